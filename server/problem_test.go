package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestStoreSentinelsMapInOnePlace: every store sentinel that reaches the error handler, however
// wrapped, becomes its problem; no handler has to remember a mapping. Before, ErrInUse,
// ErrArchived, ErrLimit and ErrInvalid that a handler forgot became 500s.
func TestStoreSentinelsMapInOnePlace(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	cases := []struct {
		err         error
		status      int
		kind, title string
	}{
		{store.ErrNotFound, 404, "http-404", "Not found"},
		{store.ErrConflict, 409, "conflict", "Conflict"},
		{store.ErrInUse, 409, "conflict", "Still in use"},
		{store.ErrArchived, 409, "conflict", "Archived; restore it first"},
		{store.ErrLimit, 400, "http-4xx", "Limit exceeded"},
		{store.ErrInvalid, 400, "http-4xx", "Invalid request"},
	}
	for i, tc := range cases {
		path := fmt.Sprintf("/test/sentinel/%d", i)
		err := fmt.Errorf("store: some operation: %w: detail that must not leak", tc.err)
		app.srv.echo.GET(path, func(echo.Context) error { return err })
		res := app.do(request{method: http.MethodGet, path: path})
		res.wantProblem(t, tc.status, tc.kind, tc.title)
		if strings.Contains(res.Body.String(), "must not leak") {
			t.Errorf("%v: body leaks the error text: %s", tc.err, res.Body)
		}
	}
	app.srv.echo.GET("/test/sentinel/other", func(echo.Context) error { return errors.New("db exploded: secret") })
	res := app.do(request{method: http.MethodGet, path: "/test/sentinel/other"})
	res.wantProblem(t, 500, "internal", "Internal server error")
	if strings.Contains(res.Body.String(), "secret") {
		t.Errorf("500 body leaks the error text: %s", res.Body)
	}
}

// TestProtocolErrorsAreRFC6749: an error reaching the error handler from a protocol operation
// (fosite writes the protocol's own errors) gets an RFC 6749 body, not a problem.
func TestProtocolErrorsAreRFC6749(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{ErrUnavailable, 503, "temporarily_unavailable"},
		{ClientError(http.StatusRequestEntityTooLarge, titleBodyTooLarge), 413, "invalid_request"},
		{ErrUnauthenticated, 401, "invalid_client"},
		{errors.New("boom"), 500, "server_error"},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		c := app.srv.echo.NewContext(httptest.NewRequest(http.MethodPost, "/token", nil), rec)
		c.Set(matchedRouteKey, &matchedRoute{operation: &operation{id: "token", policy: policy{surface: surfaceProtocol}}})
		app.srv.errorHandler(tc.err, c)
		var body map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: %s", err, rec.Body)
		}
		if rec.Code != tc.status || body["error"] != tc.code || rec.Header().Get("Content-Type") != "application/json" || body["type"] != "" {
			t.Errorf("%v: %d %s %v, want %d error %q", tc.err, rec.Code, rec.Header().Get("Content-Type"), body, tc.status, tc.code)
		}
	}
}

// TestOperationSurface: an operation's surface comes from x-surface, else from its tags, never
// from its path.
func TestOperationSurface(t *testing.T) {
	cases := []struct {
		ext  any
		tags []string
		want surface
	}{
		{nil, []string{"Organizations"}, surfaceV1},
		{nil, []string{"Auth / Organization"}, surfaceAuthJSON},
		{"protocol", []string{"Auth / Oauth-provider"}, surfaceProtocol},
		{"v1", []string{"Auth / Default"}, surfaceV1},
	}
	for _, tc := range cases {
		op := &openapi3.Operation{Tags: tc.tags, Extensions: map[string]any{}}
		if tc.ext != nil {
			op.Extensions["x-surface"] = tc.ext
		}
		got, err := operationSurface(op)
		if err != nil || got != tc.want {
			t.Errorf("x-surface %v tags %v: %q %v, want %q", tc.ext, tc.tags, got, err, tc.want)
		}
	}
	if _, err := operationSurface(&openapi3.Operation{Extensions: map[string]any{"x-surface": "soap"}}); err == nil {
		t.Error("an unknown x-surface was accepted")
	}
}
