package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// apiKeyBench is a server over one backend with a project, a secret config entry in its
// production environment and a service account key holding config:read.
type apiKeyBench struct {
	srv    *Server
	ts     *httptest.Server
	key    string
	envID  string
	secret string
}

func newAPIKeyBench(b *testing.B, st *store.Store) apiKeyBench {
	b.Helper()
	ctx := context.Background()
	srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
	if err != nil {
		b.Fatal(err)
	}
	u := store.User{Name: "Bench", Email: "bench@example.com"}
	org := store.Organization{Name: "Bench", Slug: "bench"}
	prj := store.Project{Name: "Bench", Slug: "bench"}
	token, _ := identity.NewSessionToken()
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := storetest.CreateOwnedProject(ctx, tx, &u, "!", &org, &prj); err != nil {
			return err
		}
		return tx.CreateSession(ctx, &store.Session{UserID: u.ID, TokenHash: identity.HashToken(token), ExpiresAt: time.Now().Add(time.Hour)})
	})
	if err != nil {
		b.Fatal(err)
	}
	cookie := srv.sessionCookieName + "=" + identity.CookieValue(srv.cookieKey, token)
	call := func(method, path, body string, status int, v any) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Cookie", cookie)
		req.Header.Set("Origin", testBaseURL)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if err := decodeJSON(rec, status, v); err != nil {
			b.Fatalf("%s %s: %v", method, path, err)
		}
	}
	bench := apiKeyBench{srv: srv, envID: prj.Environments[2].ID, secret: "postgres://app:s3cr3t@db.internal/app"}
	var created envelope[struct {
		APIKey string `json:"apiKey"`
	}]
	call("POST", "/api/v1/projects/"+prj.ID+"/service-accounts", `{"name":"reader","scopes":["config:read"]}`, 201, &created)
	bench.key = created.Data.APIKey
	var entry envelope[map[string]any]
	call("PUT", "/api/v1/environments/"+bench.envID+"/configs/DATABASE_URL", `{"value":"`+bench.secret+`","secret":true}`, 201, &entry)

	bench.ts = startLoopback(b, srv.Handler())
	return bench
}

// BenchmarkAPIKeyAuth measures authenticating one X-API-Key: parse, HMAC, one indexed lookup,
// constant-time compare (the lastUsedAt write happens at most once a minute, off the path).
//
//	go test -run '^$' -bench APIKeyAuth -benchmem ./server/
func BenchmarkAPIKeyAuth(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			bench := newAPIKeyBench(b, be.open(b))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bench.srv.apiKeyPrincipal(ctx, bench.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConfigRevealLoad drives GET /api/v1/environments/{id}/configs/{key} (a secret,
// decrypted and audited on every read) with an API key from 16 keep-alive loopback connections.
//
//	go test -run '^$' -bench ConfigRevealLoad -benchtime 1x ./server/
func BenchmarkConfigRevealLoad(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			bench := newAPIKeyBench(b, be.open(b))
			url := bench.ts.URL + "/api/v1/environments/" + bench.envID + "/configs/DATABASE_URL"
			check := httptest.NewRequest(http.MethodGet, url, nil)
			check.Header.Set("X-API-Key", bench.key)
			rec := httptest.NewRecorder()
			bench.srv.Handler().ServeHTTP(rec, check)
			if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), bench.secret) {
				b.Fatalf("reveal: %d %s", rec.Code, rec.Body)
			}
			target := func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("X-API-Key", bench.key)
				return req
			}
			var res loadResult
			for b.Loop() {
				res = runLoad(b, target, 16, benchDuration(b, 5*time.Second))
			}
			b.Logf("%s reveal: %s", be.name, res)
			if res.Errors > 0 {
				b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
			}
			b.ReportMetric(res.RPS, "req/s")
			b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
		})
	}
}

// benchDuration is def, or GATEHOUSE_BENCH_DURATION (a Go duration) when set.
func benchDuration(b *testing.B, def time.Duration) time.Duration {
	if v := os.Getenv("GATEHOUSE_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("GATEHOUSE_BENCH_DURATION: %v", err)
		}
		return d
	}
	return def
}
