// Package apptest drives the Gatehouse app over HTTP in tests: requests and their recorded
// answers, users with signed session cookies, the few fixtures the HTTP tests share
// (organizations, projects, OIDC clients), a browser with a cookie jar for the provider's
// pages, and the loopback load runs of the benchmarks.
//
// It works over an http.Handler (the app, however it was built) and its *store.Store, and does
// not import package server, so server's own tests and the tests of other packages (oauth's)
// share it.
package apptest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// BaseURL is the base URL of an app under test unless a test serves it elsewhere: the Origin
// that authenticated requests send (User.As) and the prefix of problem type URIs (WantProblem).
const BaseURL = "http://gatehouse.test"

// RemoteAddr is the client address of every request Do sends.
const RemoteAddr = "192.0.2.10:51234"

// App is the app under test: its handler over its store, and how it signs and names session
// cookies (NewUser).
type App struct {
	T       testing.TB
	Handler http.Handler
	Store   *store.Store
	// CookieKey signs session cookies (identity.SessionCookieKey of the master key) and
	// CookieName names them (identity.SessionCookieName).
	CookieKey  []byte
	CookieName string
}

// Request describes one HTTP call in a scenario.
type Request struct {
	Method  string
	Path    string
	Body    string
	Headers map[string]string
}

// Response is a recorded answer with helpers to decode it.
type Response struct {
	*httptest.ResponseRecorder
}

// Do sends r to the handler from RemoteAddr (a JSON body when r has one; r's headers win) and
// records the answer.
func (a *App) Do(r Request) Response {
	a.T.Helper()
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req := httptest.NewRequest(r.Method, r.Path, body)
	req.RemoteAddr = RemoteAddr
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	a.Handler.ServeHTTP(rec, req)
	return Response{rec}
}

// Decode unmarshals a JSON body into v after checking the status.
func (r Response) Decode(t testing.TB, status int, v any) {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if err := json.Unmarshal(r.Body.Bytes(), v); err != nil {
		t.Fatalf("decode: %v; body %s", err, r.Body)
	}
}

// Envelope decodes a {"data": ...} body.
type Envelope[T any] struct {
	Data T `json:"data"`
}

// Problem is a decoded problem+json body whose validation errors decode as E.
type Problem[E any] struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Errors    []E    `json:"errors"`
	RequestID string `json:"requestId"`
}

// WantProblem asserts r's status, content type, type URI (BaseURL/problems/kind), title and
// that requestId equals the x-request-id header; it returns the decoded problem.
func WantProblem[E any](t testing.TB, r Response, status int, kind, title string) Problem[E] {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if ct := r.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content-type = %q, want application/problem+json", ct)
	}
	var p Problem[E]
	if err := json.Unmarshal(r.Body.Bytes(), &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, r.Body)
	}
	if want := BaseURL + "/problems/" + kind; p.Type != want {
		t.Errorf("type = %q, want %q", p.Type, want)
	}
	if p.Title != title {
		t.Errorf("title = %q, want %q", p.Title, title)
	}
	if p.Status != status {
		t.Errorf("body status = %d, want %d", p.Status, status)
	}
	if p.RequestID == "" || p.RequestID != r.Header().Get("X-Request-Id") {
		t.Errorf("requestId = %q, header x-request-id = %q", p.RequestID, r.Header().Get("X-Request-Id"))
	}
	return p
}
