package server

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestHealth(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		res := app.do(request{method: http.MethodGet, path: "/api/v1/health"})
		if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != `{"status":"ok"}` {
			t.Fatalf("health = %d %s", res.Code, res.Body)
		}
		if ct := res.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("content-type = %q", ct)
		}
		if id := res.Header().Get("X-Request-Id"); !uuidRE.MatchString(id) {
			t.Errorf("generated x-request-id = %q, want a UUID", id)
		}
	})
}

func TestRequestID(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	cases := []struct {
		name, sent string
		echoed     bool
	}{
		{"own id echoed", "req-2026.11:abc_DEF", true},
		{"128 characters echoed", strings.Repeat("a", 128), true},
		{"129 characters replaced", strings.Repeat("a", 129), false},
		{"space replaced", "two words", false},
		{"quote replaced", `x"y`, false},
		{"absent generated", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// An unknown path: the id is set on error responses too.
			res := app.do(request{method: http.MethodGet, path: "/api/v1/nope", headers: map[string]string{"X-Request-Id": tc.sent}})
			got := res.Header().Get("X-Request-Id")
			if tc.echoed && got != tc.sent {
				t.Fatalf("x-request-id = %q, want %q", got, tc.sent)
			}
			if !tc.echoed && !uuidRE.MatchString(got) {
				t.Fatalf("x-request-id = %q, want a generated UUID", got)
			}
			p := res.wantProblem(t, http.StatusNotFound, "http-404", "Not found")
			if p.RequestID != got {
				t.Errorf("requestId %q != header %q", p.RequestID, got)
			}
		})
	}
	if !strings.Contains(app.logs.String(), "request_id=req-2026.11:abc_DEF") {
		t.Errorf("access log lacks the request id:\n%s", app.logs)
	}
}

func TestProblems(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	app.srv.echo.GET("/test/panic", func(echo.Context) error { panic("boom: secret-value") })
	app.srv.echo.GET("/test/error", func(echo.Context) error { return errors.New("db password=hunter2 refused") })

	t.Run("unknown route", func(t *testing.T) {
		app.do(request{method: http.MethodGet, path: "/api/v1/does-not-exist"}).
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
	})
	t.Run("unknown route outside the API", func(t *testing.T) {
		app.do(request{method: http.MethodGet, path: "/favicon.ico"}).
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
	})
	t.Run("wrong method", func(t *testing.T) {
		res := app.do(request{method: http.MethodDelete, path: "/api/v1/health"})
		res.wantProblem(t, http.StatusMethodNotAllowed, "http-4xx", "Method Not Allowed")
		if allow := res.Header().Get("Allow"); !strings.Contains(allow, "GET") {
			t.Errorf("Allow = %q, want GET listed", allow)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		res := app.do(request{method: http.MethodPost, path: "/api/v1/health", body: `{"x":"` + strings.Repeat("a", 1<<20) + `"}`})
		res.wantProblem(t, http.StatusRequestEntityTooLarge, "http-4xx", "Request body too large")
	})
	for _, path := range []string{"/test/panic", "/test/error"} {
		t.Run("internal "+path, func(t *testing.T) {
			res := app.do(request{method: http.MethodGet, path: path})
			p := res.wantProblem(t, http.StatusInternalServerError, "internal", "Internal server error")
			if strings.Contains(res.Body.String(), "secret-value") || strings.Contains(res.Body.String(), "hunter2") {
				t.Fatalf("500 body leaks the error text: %s", res.Body)
			}
			if !strings.Contains(app.logs.String(), "request_id="+p.RequestID) {
				t.Errorf("the internal error is not logged with its request id")
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	for _, tc := range []struct {
		base string
		hsts bool
	}{{"http://gatehouse.test", false}, {"https://gatehouse.test", true}} {
		cfg := testConfig()
		cfg.BaseURL = tc.base
		res := newTestApp(t, st, cfg).do(request{method: http.MethodGet, path: "/api/v1/health"})
		h := res.Header()
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") == "" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: security headers missing: %v", tc.base, h)
		}
		if got := h.Get("Strict-Transport-Security") != ""; got != tc.hsts {
			t.Errorf("%s: HSTS present = %v, want %v", tc.base, got, tc.hsts)
		}
	}
}

func TestCORS(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	preflight := func(origin string) response {
		return app.do(request{method: http.MethodOptions, path: "/api/v1/health", headers: map[string]string{
			"Origin":                         origin,
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "content-type, x-api-key",
		}})
	}
	for _, origin := range []string{"https://app.example.com", "http://localhost:5173", testBaseURL} {
		t.Run("allowed "+origin, func(t *testing.T) {
			res := preflight(origin)
			h := res.Header()
			if res.Code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != origin ||
				h.Get("Access-Control-Allow-Credentials") != "true" {
				t.Fatalf("preflight = %d %v", res.Code, h)
			}
			// echo joins the lists with bare commas.
			if got := h.Get("Access-Control-Allow-Methods"); got != "GET,POST,PUT,PATCH,DELETE,OPTIONS" {
				t.Errorf("methods = %q", got)
			}
			if got := h.Get("Access-Control-Allow-Headers"); got != "content-type,authorization,x-api-key,x-request-id,idempotency-key" {
				t.Errorf("headers = %q", got)
			}
			if !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
				t.Errorf("Vary lacks Origin: %v", h.Values("Vary"))
			}
			// A simple request from the same origin gets the headers too.
			simple := app.do(request{method: http.MethodGet, path: "/api/v1/health", headers: map[string]string{"Origin": origin}})
			if simple.Header().Get("Access-Control-Allow-Origin") != origin {
				t.Errorf("simple request: no allow-origin")
			}
		})
	}
	for _, origin := range []string{
		"null",
		"https://evil.example.com",
		"http://app.example.com",          // http variant of an https origin
		"https://app.example.com.evil.io", // look-alike suffix
		"https://evilapp.example.com",
		"https://app.example.com:8443",
		"https://app.example.com/path",
	} {
		t.Run("refused "+origin, func(t *testing.T) {
			res := preflight(origin)
			for k := range res.Header() {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Fatalf("refused origin got CORS header %s: %v", k, res.Header())
				}
			}
			simple := app.do(request{method: http.MethodGet, path: "/api/v1/health", headers: map[string]string{"Origin": origin}})
			if simple.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("simple request from refused origin got allow-origin")
			}
		})
	}
}
