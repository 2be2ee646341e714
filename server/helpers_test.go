package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

const testBaseURL = "http://gatehouse.test"

// testApp is the real echo app over a real, migrated store.
type testApp struct {
	t     *testing.T
	srv   *Server
	store *store.Store
	logs  *strings.Builder
}

// forEachBackend runs fn against SQLite and, when configured, PostgreSQL.
func forEachBackend(t *testing.T, fn func(t *testing.T, b storetest.Backend)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

func testConfig() Config {
	return Config{
		ListenAddr:     ":0",
		BaseURL:        testBaseURL,
		TrustedOrigins: []string{"https://app.example.com", "http://localhost:5173"},
		BodyLimit:      1 << 20,
	}
}

func newTestApp(t *testing.T, st *store.Store, cfg Config) *testApp {
	t.Helper()
	logs := &strings.Builder{}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(cfg, st, log)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	return &testApp{t: t, srv: srv, store: st, logs: logs}
}

// request describes one HTTP call in a scenario.
type request struct {
	method  string
	path    string
	body    string
	headers map[string]string
}

// response is a recorded answer with helpers to decode it.
type response struct {
	*httptest.ResponseRecorder
}

func (a *testApp) do(r request) response {
	a.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req := httptest.NewRequest(r.method, r.path, body)
	req.RemoteAddr = "192.0.2.10:51234"
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	a.srv.Handler().ServeHTTP(rec, req)
	return response{rec}
}

// problem is a decoded problem+json body.
type problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Errors    []FieldError `json:"errors"`
	RequestID string       `json:"requestId"`
}

// wantProblem asserts status, content type, type URI, title and that requestId equals the
// x-request-id header; it returns the decoded problem.
func (r response) wantProblem(t *testing.T, status int, kind, title string) problem {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if ct := r.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content-type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(r.Body.Bytes(), &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, r.Body)
	}
	if want := testBaseURL + "/problems/" + kind; p.Type != want {
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

// decode unmarshals a JSON body into v after checking the status.
func (r response) decode(t *testing.T, status int, v any) {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if err := json.Unmarshal(r.Body.Bytes(), v); err != nil {
		t.Fatalf("decode: %v; body %s", err, r.Body)
	}
}
