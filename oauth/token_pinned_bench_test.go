package oauth_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Pinned token runs (issue 27): the real server in a process of its own pinned to one core with
// GOMAXPROCS=1 (apptest.StartPinnedChild), the load generator pinned to the other, as
// server.BenchmarkPinnedLoad does for /authorize, and beside them in the same child the
// ceiling: a bare echo handler answering a form POST with a fixed token-sized body.
//
//	make bench-pinned
//	go test -run '^$' -bench OAuthPinnedLoad -benchtime 1x ./oauth/

// The cores of a pinned run: the server child's and the load generator's.
const (
	oauthPinnedServerCPU = 1
	oauthPinnedLoadCPU   = 0
)

// oauthPinnedChildEnv, set to "<backend>/<alg>" (sqlite/ES256), makes TestOAuthPinnedServerChild
// the server of a pinned token run.
const oauthPinnedChildEnv = "GATEHOUSE_OAUTH_PINNED_CHILD"

// oauthPinnedEchoBody is what the ceiling's bare handler answers: the size of a
// client_credentials answer with an ES256 access token.
var oauthPinnedEchoBody = []byte(`{"access_token":"` + strings.Repeat("e", 520) + `","expires_in":3599,"scope":"roles","token_type":"bearer"}`)

// oauthPinnedHandshake is what the child hands the benchmark: where the app and the echo
// serve, and the confidential client to authenticate as.
type oauthPinnedHandshake struct{ URL, EchoURL, ClientID string }

// TestOAuthPinnedServerChild is the server half of BenchmarkOAuthPinnedLoad: in the child that
// benchmark starts, it opens a fresh store of the backend named by oauthPinnedChildEnv, seeds
// one confidential client (oauthBenchServer) with signing keys of the algorithm named, serves
// the app and a bare echo on 127.0.0.1, writes the handshake and serves until the parent lets
// it go; then its cleanups close the servers and drop the database.
func TestOAuthPinnedServerChild(t *testing.T) {
	spec := os.Getenv(oauthPinnedChildEnv)
	if spec == "" {
		// A mode switch, not a skip: outside the child BenchmarkOAuthPinnedLoad starts there
		// is no server to be, and nothing here to check.
		return
	}
	backend, alg, _ := strings.Cut(spec, "/")
	base, clientID := oauthBenchServer(t, apptest.OpenBenchBackend(t, oauthPinnedChildEnv, backend), alg)
	bare := echo.New()
	bare.POST(oauth.TokenPath, func(c echo.Context) error {
		return c.JSONBlob(http.StatusOK, oauthPinnedEchoBody)
	})
	es := apptest.StartLoopback(t, bare)
	if err := apptest.WriteHandshake(os.Stdout, oauthPinnedHandshake{URL: base, EchoURL: es.URL, ClientID: clientID}); err != nil {
		t.Fatal(err)
	}
	apptest.AwaitParent()
}

// BenchmarkOAuthPinnedLoad measures, on each backend and with RS256 and ES256 signing keys,
// the real token endpoint in a child pinned to core 1 (GOMAXPROCS=1) from this process pinned
// to core 0, each run from 16 keep-alive connections: "echo", the ceiling (a bare handler in
// the same child); "token", client_credentials with client_secret_basic; "introspect", 256
// tokens issued before the runs. It reports tokens/s, p50, p99, the child's CPU per request
// (and PostgreSQL's, unpinned) and prints the figures against issue 27's targets
// (oauthPinnedSummary).
func BenchmarkOAuthPinnedLoad(b *testing.B) {
	if n := runtime.NumCPU(); n < 2 {
		b.Fatalf("pinned runs need 2 cores (server on %d, load on %d); this machine has %d", oauthPinnedServerCPU, oauthPinnedLoadCPU, n)
	}
	duration := apptest.LoadDuration(b)
	for _, be := range apptest.BenchBackends(b) {
		for _, alg := range []string{"RS256", "ES256"} {
			b.Run(be.Name+"/"+alg, func(b *testing.B) {
				var hs oauthPinnedHandshake
				pid := apptest.StartPinnedChild(b, apptest.PinnedChild{Test: "TestOAuthPinnedServerChild",
					Env: []string{oauthPinnedChildEnv + "=" + be.Name + "/" + alg}, CPU: oauthPinnedServerCPU}, 5*time.Minute, &hs)
				dbCPU, serverCPU := apptest.PinnedCPU(b, be.Name, pid)
				if h := oauthJWTHeader(b, oauthBenchToken(b, hs.URL, hs.ClientID)); h["alg"] != alg {
					b.Fatalf("token header %v, want alg %s", h, alg)
				}
				tokens := make([]string, 256)
				for i := range tokens {
					tokens[i] = oauthBenchToken(b, hs.URL, hs.ClientID)
				}
				form := url.Values{"grant_type": {"client_credentials"}, "scope": {"roles"}}
				apptest.PinProcess(b, oauthPinnedLoadCPU)

				results := map[string]apptest.LoadResult{}
				var next atomic.Int64
				for _, run := range []struct {
					name   string
					target func() *http.Request
				}{
					{"echo", func() *http.Request { return oauthBenchRequest(hs.EchoURL, oauth.TokenPath, hs.ClientID, form) }},
					{"token", func() *http.Request { return oauthBenchRequest(hs.URL, oauth.TokenPath, hs.ClientID, form) }},
					{"introspect", func() *http.Request {
						tok := tokens[int(next.Add(1))%len(tokens)]
						return oauthBenchRequest(hs.URL, oauth.IntrospectPath, hs.ClientID, url.Values{"token": {tok}})
					}},
				} {
					b.Run(run.name, func(b *testing.B) {
						b.ResetTimer()
						var res apptest.LoadResult
						for b.Loop() {
							res = apptest.RunLoad(b, run.target, apptest.LoadConns, duration, dbCPU, serverCPU)
						}
						results[run.name] = res
						reportOAuthPinned(b, res, results["echo"])
					})
				}
				// Printed, not logged: go test drops the log of a benchmark that has sub-benchmarks.
				fmt.Println(oauthPinnedSummary(be.Name, alg, results))
			})
		}
	}
}

// reportOAuthPinned reports one pinned run: requests/s, p50, p99, the child's CPU per request
// (the second CPU reader), PostgreSQL's when read, and the share of the ceiling.
func reportOAuthPinned(b *testing.B, res, ceiling apptest.LoadResult) {
	b.Helper()
	b.Logf("%s; server child %v CPU per request", res, oauthChildCPU(res))
	if res.Errors > 0 {
		b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
	}
	if res.Requests == 0 {
		return
	}
	b.ReportMetric(res.RPS, "req/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(oauthChildCPU(res).Nanoseconds())/1000, "srv-cpu-µs/req")
	if res.DBCPU > 0 {
		b.ReportMetric(float64((res.DBCPU/time.Duration(res.Requests)).Nanoseconds())/1000, "pg-cpu-µs/req")
	}
	if ceiling.RPS > 0 && res.RPS != ceiling.RPS {
		b.ReportMetric(100*res.RPS/ceiling.RPS, "%-of-echo")
	}
}

// oauthChildCPU is the server child's CPU time per request of res (its second CPU reader), 0
// when res has none.
func oauthChildCPU(res apptest.LoadResult) time.Duration {
	if len(res.ReaderCPU) < 2 || res.Requests == 0 {
		return 0
	}
	return res.ReaderCPU[1] / time.Duration(res.Requests)
}

// oauthPinnedSummary states one backend and algorithm's pinned token figures against issue
// 27's targets: with ES256, at least 3,000 tokens/s on SQLite and 2,000 on PostgreSQL; with
// RS256, no slower than before (a figure to set beside the previous build's).
func oauthPinnedSummary(backend, alg string, r map[string]apptest.LoadResult) string {
	target := "no slower than the previous build"
	if alg == "ES256" {
		target = map[string]string{string(store.SQLite): "≥ 3,000/s", string(store.Postgres): "≥ 2,000/s"}[backend]
	}
	tok, in, echo := r["token"], r["introspect"], r["echo"]
	return fmt.Sprintf("%s %s pinned (server on core %d, GOMAXPROCS=1; load on core %d):\n"+
		"  token: %.0f/s (target %s), p50 %v, p99 %v, server CPU %v per token; echo ceiling %.0f/s\n"+
		"  introspect: %.0f/s, p50 %v, p99 %v, server CPU %v per request",
		backend, alg, oauthPinnedServerCPU, oauthPinnedLoadCPU,
		tok.RPS, target, tok.P50, tok.P99, oauthChildCPU(tok), echo.RPS,
		in.RPS, in.P50, in.P99, oauthChildCPU(in))
}
