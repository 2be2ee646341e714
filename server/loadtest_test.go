package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The loopback load harness is apptest's (RunLoad and its helpers), under the names server's
// benchmarks use.
type loadResult = apptest.LoadResult

var (
	runLoad            = apptest.RunLoad
	loopbackClient     = apptest.LoopbackClient
	startLoopback      = apptest.StartLoopback
	postgresBackendCPU = apptest.PostgresBackendCPU
)

// Load benchmark settings; GATEHOUSE_BENCH_DURATION (a Go duration) overrides the time per run.
const (
	authorizeLoadConns    = apptest.LoadConns
	authorizeLoadDuration = apptest.DefaultLoadDuration
)

// BenchmarkAuthorizeLoad starts the real server (server.New behind httptest on 127.0.0.1) on
// each backend, seeds the RBAC data set (see seedRBAC), gives every project a service account
// whose API key holds project:read, and drives POST /api/v1/authorize from 16 keep-alive
// connections for 5 s each for allow and for deny decisions, cycling through every project and
// principal, each request with its project's key. It reports decisions/s and the p50 and p99
// latencies in milliseconds. The client runs in the same process, on the same cores.
//
//	go test -run '^$' -bench AuthorizeLoad -benchtime 1x ./server/
func BenchmarkAuthorizeLoad(b *testing.B) {
	duration := apptest.LoadDuration(b)
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			ten := seedRBAC(b, st)
			srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
			if err != nil {
				b.Fatal(err)
			}
			ts := startLoopback(b, srv.Handler())
			keys := benchAPIKeys(b, srv, st, ten)

			for _, allow := range []bool{true, false} {
				name := map[bool]string{true: "allow", false: "deny"}[allow]
				bodies := make([]string, len(ten.principals))
				for i, p := range ten.principals {
					perm := benchDenyPermission
					if allow {
						perm = p.allowed
					}
					bodies[i] = authorizeBody(p.projectID, store.PrincipalUser, p.principalID, perm)
				}
				want := fmt.Sprintf(`"allowed":%v`, allow)
				b.Run(name, func(b *testing.B) {
					// One checked request first: the load below counts only statuses.
					checkAuthorize(b, ts.URL, keys[ten.principals[0].projectID], bodies[0], want)
					var next atomic.Int64
					target := func() *http.Request {
						i := int(next.Add(1)) % len(bodies)
						req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/authorize", strings.NewReader(bodies[i]))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("X-API-Key", keys[ten.principals[i].projectID])
						return req
					}
					b.ResetTimer()
					var res loadResult
					for b.Loop() {
						res = runLoad(b, target, authorizeLoadConns, duration, postgresBackendCPU(b, st))
					}
					b.Logf("%s %s: %s", be.name, name, res)
					if res.Errors > 0 {
						b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
					}
					b.ReportMetric(res.RPS, "decisions/s")
					b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
					b.ReportMetric(float64(res.CPUPerRequest().Microseconds()), "cpu-µs/decision")
					if res.DBCPU > 0 {
						b.ReportMetric(float64((res.DBCPU / time.Duration(res.Requests)).Microseconds()), "pg-cpu-µs/decision")
					}
				})
			}
		})
	}
}

// benchAPIKeys creates, through the API as the organization's owner, one service account per
// project holding project:read, and returns each project's API key.
func benchAPIKeys(b testing.TB, srv *Server, st *store.Store, ten benchTenancy) map[string]string {
	b.Helper()
	cookie := benchOwnerCookie(b, srv, st, ten.owner)
	keys := map[string]string{}
	for _, p := range ten.projects {
		keys[p.ID] = benchServiceAccountKey(b, srv, cookie, p.ID, `{"name":"authorizer","scopes":["project:read"]}`)
	}
	return keys
}

// benchOwnerCookie signs owner in (a session of an hour, through the store) and returns the
// Cookie header value of that session.
func benchOwnerCookie(b testing.TB, srv *Server, st *store.Store, owner store.User) string {
	b.Helper()
	ctx := context.Background()
	token, err := identity.NewSessionToken()
	if err != nil {
		b.Fatal(err)
	}
	sess := store.Session{UserID: owner.ID, TokenHash: identity.HashToken(token), ExpiresAt: time.Now().Add(time.Hour)}
	if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateSession(ctx, &sess) }); err != nil {
		b.Fatal(err)
	}
	return srv.sessionCookieName + "=" + identity.CookieValue(srv.cookieKey, token)
}

// benchServiceAccountKey creates a service account (body: its JSON) in project projectID
// through the handler, signed in with cookie, and returns its API key.
func benchServiceAccountKey(b testing.TB, srv *Server, cookie, projectID, body string) string {
	b.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/projects/"+projectID+"/service-accounts", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", cookie)
	req.Header.Set("Origin", testBaseURL)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	var out envelope[struct {
		APIKey string `json:"apiKey"`
	}]
	if err := decodeJSON(rec, http.StatusCreated, &out); err != nil {
		b.Fatalf("create service account: %v", err)
	}
	return out.Data.APIKey
}

// checkAuthorize sends one decision over the network and checks its answer contains want.
func checkAuthorize(b *testing.B, baseURL, key, body, want string) {
	b.Helper()
	if got := benchRequest(b, http.MethodPost, baseURL+"/api/v1/authorize", key, body); !strings.Contains(string(got), want) {
		b.Fatalf("authorize: %s; want 200 with %s", got, want)
	}
}

func decodeJSON(rec *httptest.ResponseRecorder, status int, v any) error {
	if rec.Code != status {
		return fmt.Errorf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
	return json.Unmarshal(rec.Body.Bytes(), v)
}
