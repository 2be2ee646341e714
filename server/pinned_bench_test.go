package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Pinned load runs (issues 24 and 27): the real server in a process of its own pinned to one
// core with GOMAXPROCS=1, the load generator (this benchmark) pinned to the other, and beside
// it, in the same sitting and the same server process, its limit: a bare echo handler
// returning a fixed JSON body. The server's CPU is read from /proc, apart from the generator's.
//
//	make bench-pinned
//	go test -run '^$' -bench PinnedLoad -benchtime 1x ./server/

// The cores of a pinned run: the server child's and the load generator's.
const (
	pinnedServerCPU = 1
	pinnedLoadCPU   = 0
)

// pinnedChildEnv, set to a backend's name ("sqlite", "postgres"), makes TestPinnedServerChild
// the server of a pinned run.
const pinnedChildEnv = "GATEHOUSE_PINNED_CHILD"

// pinnedEchoPath and pinnedEchoBody are the bare echo route of the ceiling run: it answers
// every POST with this body, the size of an allowed decision, and reads nothing.
const pinnedEchoPath = "/echo"

var pinnedEchoBody = []byte(`{"data":{"allowed":true,"decisionId":"dec_01JBENCHPINNEDCEILING000000","roles":["role-2"]}}`)

// pinnedRequest is one request of a pinned run: Method (POST when empty) of Body (none when
// empty) to Path with Key.
type pinnedRequest struct{ Path, Body, Key, Method string }

// request is r addressed to base (the server's URL).
func (r pinnedRequest) request(base string) *http.Request {
	method, body := r.Method, io.Reader(http.NoBody)
	if method == "" {
		method = http.MethodPost
	}
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, _ := http.NewRequest(method, base+r.Path, body)
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", r.Key)
	return req
}

// pinnedHandshake is what the server child hands the benchmark: where it serves, and the
// requests of each run, built on the child's seeded data set (the parent never opens it).
type pinnedHandshake struct {
	URL, EchoURL string
	// Allow and Deny are one /authorize request per principal (BenchmarkAuthorizeLoad's);
	// Singles, Batches and Explained the mixed checks one by one, 100 a batch, and 100 a batch
	// with explain (BenchmarkAuthorizeBatchLoad's); BatchAllowed the decisions of Batches[0].
	Allow, Deny, Singles, Batches, Explained []pinnedRequest
	BatchAllowed                             []bool
	// The lookup and usage ingest runs' (pinned_more_bench_test.go).
	pinnedMoreHandshake
}

// TestPinnedServerChild is the server half of BenchmarkPinnedLoad: in the child process that
// benchmark starts (apptest.StartPinnedChild, with pinnedChildEnv set) it opens a fresh store
// of the backend named, seeds the /authorize data set (seedRBAC, benchAPIKeys) and what the
// lookup and ingest runs need (seedPinnedMore: the 10,000-principal project of seedHolders, 10
// empty usage projects), serves the real handler and a bare echo on 127.0.0.1, writes the
// handshake and serves until the parent lets it go (apptest.AwaitParent); then its cleanups
// close the servers and drop the database.
func TestPinnedServerChild(t *testing.T) {
	backend := os.Getenv(pinnedChildEnv)
	if backend == "" {
		// A mode switch, not a skip: outside the child BenchmarkPinnedLoad starts there is no
		// server to be, and nothing here to check.
		return
	}
	st := apptest.OpenBenchBackend(t, pinnedChildEnv, backend)
	ten := seedRBAC(t, st)
	srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
	if err != nil {
		t.Fatal(err)
	}
	keys := benchAPIKeys(t, srv, st, ten)
	ts := startLoopback(t, srv.Handler())
	bare := echo.New()
	bare.POST(pinnedEchoPath, func(c echo.Context) error { return c.JSONBlob(http.StatusOK, pinnedEchoBody) })
	es := startLoopback(t, bare)

	hs := pinnedHandshake{URL: ts.URL, EchoURL: es.URL}
	for _, p := range ten.principals {
		key := keys[p.projectID]
		hs.Allow = append(hs.Allow, pinnedRequest{Path: "/api/v1/authorize", Body: authorizeBody(p.projectID, store.PrincipalUser, p.principalID, p.allowed), Key: key})
		hs.Deny = append(hs.Deny, pinnedRequest{Path: "/api/v1/authorize", Body: authorizeBody(p.projectID, store.PrincipalUser, p.principalID, benchDenyPermission), Key: key})
	}
	singles, batches, explained := batchBenchRequests(t, ten, keys)
	for _, run := range []struct {
		from []decisionRequest
		to   *[]pinnedRequest
	}{{singles, &hs.Singles}, {batches, &hs.Batches}, {explained, &hs.Explained}} {
		for _, r := range run.from {
			*run.to = append(*run.to, pinnedRequest{Path: r.path, Body: r.body, Key: r.key})
		}
	}
	_, hs.BatchAllowed = mixedChecks(ten, ten.projects[0].ID)
	hs.pinnedMoreHandshake = seedPinnedMore(t, srv, st, ten, keys)
	if err := apptest.WriteHandshake(os.Stdout, hs); err != nil {
		t.Fatal(err)
	}
	apptest.AwaitParent()
}

// BenchmarkPinnedLoad measures, on each backend, the real server in a child process pinned to
// core 1 (GOMAXPROCS=1, TestPinnedServerChild) from this process pinned to core 0, each run
// from 16 keep-alive connections (the connection count of BenchmarkAuthorizeLoad and
// BenchmarkAuthorizeBatchLoad, so the figures compare): "echo", the ceiling (a bare echo
// handler in the same child); "single", the batch runs' mixed checks one per /authorize;
// "allow" and "deny" (BenchmarkAuthorizeLoad's requests); "batch" and "batch-explain", 100
// checks a request (BenchmarkAuthorizeBatchLoad's). It reports req/s (and checks/s), p50 and
// p99, the server child's CPU per request and the generator's (and PostgreSQL's, unpinned), each
// decision run's share of the ceiling, a batch's p99 against a single check's, and deny's p99
// against allow's. Then, on the same child, the lookups, usage ingest and on PostgreSQL the raw
// insert limit (pinnedMoreRuns, pinned_more_bench_test.go). It prints the figures against the
// targets of issues 24 and 27 (pinnedSummary, pinnedMoreSummary).
func BenchmarkPinnedLoad(b *testing.B) {
	if n := runtime.NumCPU(); n < 2 {
		b.Fatalf("pinned runs need 2 cores (server on %d, load on %d); this machine has %d", pinnedServerCPU, pinnedLoadCPU, n)
	}
	duration := apptest.LoadDuration(b)
	for _, be := range apptest.BenchBackends(b) {
		b.Run(be.Name, func(b *testing.B) {
			var hs pinnedHandshake
			pid := apptest.StartPinnedChild(b, apptest.PinnedChild{Test: "TestPinnedServerChild",
				Env: []string{pinnedChildEnv + "=" + be.Name}, CPU: pinnedServerCPU}, 5*time.Minute, &hs)
			dbCPU, serverCPU := apptest.PinnedCPU(b, be.Name, pid)
			checkAuthorize(b, hs.URL, hs.Allow[0].Key, hs.Allow[0].Body, `"allowed":true`)
			checkAuthorize(b, hs.URL, hs.Deny[0].Key, hs.Deny[0].Body, `"allowed":false`)
			checkBatch(b, hs.URL, hs.Batches[0].Key, hs.Batches[0].Body, hs.BatchAllowed)
			checkBatch(b, hs.URL, hs.Explained[0].Key, hs.Explained[0].Body, hs.BatchAllowed)
			echoes := make([]pinnedRequest, len(hs.Allow))
			for i, r := range hs.Allow {
				echoes[i] = pinnedRequest{Path: pinnedEchoPath, Body: r.Body, Key: r.Key}
			}
			if got := benchRequest(b, http.MethodPost, hs.EchoURL+pinnedEchoPath, "", echoes[0].Body); string(got) != string(pinnedEchoBody) {
				b.Fatalf("echo answered %s, want %s", got, pinnedEchoBody)
			}
			apptest.PinProcess(b, pinnedLoadCPU)

			results := map[string]loadResult{}
			for _, run := range []struct {
				name     string
				base     string
				requests []pinnedRequest
				checks   int
			}{
				{"echo", hs.EchoURL, echoes, 1},
				{"single", hs.URL, hs.Singles, 1},
				{"allow", hs.URL, hs.Allow, 1},
				{"deny", hs.URL, hs.Deny, 1},
				{"batch", hs.URL, hs.Batches, batchBenchSize},
				{"batch-explain", hs.URL, hs.Explained, batchBenchSize},
			} {
				b.Run(run.name, func(b *testing.B) {
					var next atomic.Int64
					target := func() *http.Request {
						return run.requests[int(next.Add(1))%len(run.requests)].request(run.base)
					}
					b.ResetTimer()
					var res loadResult
					for b.Loop() {
						res = runLoad(b, target, authorizeLoadConns, duration, dbCPU, serverCPU)
					}
					results[run.name] = res
					reportPinned(b, be.Name, run.name, res, run.checks, results)
				})
			}
			raw, rawNote := pinnedMoreRuns(b, be.Name, hs, duration, dbCPU, serverCPU, results)
			// Printed, not logged: go test drops the log of a benchmark that has sub-benchmarks.
			fmt.Println(pinnedSummary(be.Name, results))
			fmt.Println(pinnedMoreSummary(be.Name, results, raw, rawNote, runtime.NumCPU()))
		})
	}
}

// reportPinned logs and reports the pinned run named run on backend, whose requests each
// carried checks checks; results holds the runs so far, for the ratios to the ceiling
// ("echo"), to a single check ("single") and to an allow ("allow").
func reportPinned(b *testing.B, backend, run string, res loadResult, checks int, results map[string]loadResult) {
	b.Helper()
	b.Logf("%s %s: %s; server child %v CPU per request", backend, run, res, serverCPUPerRequest(res))
	if res.Errors > 0 {
		b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
	}
	if res.Requests == 0 {
		return
	}
	b.ReportMetric(res.RPS, "req/s")
	if checks > 1 {
		b.ReportMetric(res.RPS*float64(checks), "checks/s")
		b.ReportMetric(micros(serverCPUPerRequest(res))/float64(checks), "srv-cpu-µs/check")
	}
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(micros(serverCPUPerRequest(res)), "srv-cpu-µs/req")
	b.ReportMetric(micros(res.CPUPerRequest()), "gen-cpu-µs/req")
	if res.DBCPU > 0 {
		b.ReportMetric(micros(res.DBCPU/time.Duration(res.Requests)), "pg-cpu-µs/req")
	}
	ceiling, single, allow := results["echo"], results["single"], results["allow"]
	if run != "echo" && checks == 1 && ceiling.RPS > 0 {
		b.ReportMetric(100*res.RPS/ceiling.RPS, "%-of-echo")
	}
	if checks > 1 && single.P99 > 0 {
		b.ReportMetric(float64(res.P99)/float64(single.P99), "p99-x-single")
	}
	if run == "deny" && allow.P99 > 0 {
		b.ReportMetric(float64(res.P99)/float64(allow.P99), "p99-x-allow")
	}
}

// serverCPUPerRequest is the server child's CPU time per request of res (its second CPU
// reader), 0 when res has none.
func serverCPUPerRequest(res loadResult) time.Duration {
	if len(res.ReaderCPU) < 2 || res.Requests == 0 {
		return 0
	}
	return res.ReaderCPU[1] / time.Duration(res.Requests)
}

// pinnedSummary states one backend's pinned figures against the targets: batches (a batch of
// 100 checks: p99 at most 3× a single check's; at least 20,000 checks/s on SQLite, 10,000 on
// PostgreSQL) and the single decision (/authorize at least 25% of the bare ceiling, about 16,000/s, p99 at
// most 5 ms, a deny costing no more than an allow).
func pinnedSummary(backend string, r map[string]loadResult) string {
	checksTarget := map[string]float64{string(store.SQLite): 20_000, string(store.Postgres): 10_000}[backend]
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s pinned (server on core %d, GOMAXPROCS=1; load on core %d):\n", backend, pinnedServerCPU, pinnedLoadCPU)
	fmt.Fprintf(&s, "  batch: p99 %v = %.2f× single p99 %v (target ≤ 3×); %.0f checks/s (target ≥ %.0f); explained %.0f checks/s, p99 %v\n",
		r["batch"].P99, ratio(float64(r["batch"].P99), float64(r["single"].P99)), r["single"].P99,
		r["batch"].RPS*batchBenchSize, checksTarget, r["batch-explain"].RPS*batchBenchSize, r["batch-explain"].P99)
	for _, name := range []string{"allow", "deny"} {
		fmt.Fprintf(&s, "  authorize: %s %.0f/s = %.1f%% of the echo ceiling %.0f/s (target ≥ 25%%, ~16,000/s), p99 %v (target ≤ 5ms), server CPU %v per request\n",
			name, r[name].RPS, 100*ratio(r[name].RPS, r["echo"].RPS), r["echo"].RPS, r[name].P99, serverCPUPerRequest(r[name]))
	}
	fmt.Fprintf(&s, "  deny/allow: p99 %.2f×, server CPU per request %.2f× (target ≤ 1)",
		ratio(float64(r["deny"].P99), float64(r["allow"].P99)),
		ratio(float64(serverCPUPerRequest(r["deny"])), float64(serverCPUPerRequest(r["allow"]))))
	return s.String()
}

// micros is d in microseconds, with fractions.
func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
