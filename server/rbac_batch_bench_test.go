package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Load benchmarks of the decisions beyond one check (issue 24), on the /authorize harness and
// data set (seedRBAC: 100 projects, 1,000 principals, 3,000 bindings; each project's API key
// holding project:read; 16 keep-alive connections, 5 s per run, GATEHOUSE_BENCH_DURATION to
// change it):
//
//	go test -run '^$' -bench 'AuthorizeBatchLoad|RBACLookupLoad' -benchtime 1x ./server/
//
// BenchmarkAuthorizeBatchHandler measures the same requests' cost to the server alone.

// batchBenchSize is the number of checks in one benchmark batch.
const batchBenchSize = 100

// mixedChecks returns the benchmark's 100 checks for one project: each of its 10 principals
// asks for 10 permissions resource<r>:action<j> (j = 0..9, r = (i+j) mod 8 for principal i),
// of which 5 are granted (j = 0, 1, 2, 8, 9: principal i is bound to roles i, i+1, i+2 mod 8)
// and 5 are not (roles of the project it is not bound to). It returns them with the decisions
// they must get.
func mixedChecks(ten benchTenancy, projectID string) (checks []store.Check, allowed []bool) {
	i := 0
	for _, p := range ten.principals {
		if p.projectID != projectID {
			continue
		}
		for j := range benchPermissionsPerRole {
			checks = append(checks, store.Check{PrincipalType: store.PrincipalUser, PrincipalID: p.principalID,
				Permission: fmt.Sprintf("resource%d:action%d", (i+j)%benchRolesPerProject, j)})
			allowed = append(allowed, j%benchRolesPerProject < benchRolesPerPrincipal)
		}
		i++
	}
	return checks, allowed
}

// checkJSON is c as a member of a batch's checks.
func checkJSON(c store.Check) string {
	return fmt.Sprintf(`{"principalType":%q,"principalId":%q,"permission":%q}`, c.PrincipalType, c.PrincipalID, c.Permission)
}

// BenchmarkAuthorizeBatchLoad measures, on each backend, the same mixed checks (mixedChecks,
// half granted) asked three ways: one per POST /api/v1/authorize ("single"), 100 per POST
// /api/v1/authorize/batch ("batch"), and 100 per batch with explain ("batch-explain"), cycling
// through the 100 projects, each request with its project's key, from 16 connections; then
// single checks and batches again from one connection ("-1conn": the latency of a request
// that waits behind no other). It reports checks/s, the p50 and p99 of one request, and the
// CPU per check (Gatehouse and the load client; PostgreSQL's own in pg-cpu).
func BenchmarkAuthorizeBatchLoad(b *testing.B) {
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

			singles, batches, explained := batchBenchRequests(b, ten, keys)
			_, allowed := mixedChecks(ten, ten.projects[0].ID)
			checkBatch(b, ts.URL, batches[0].key, batches[0].body, allowed)
			checkBatch(b, ts.URL, explained[0].key, explained[0].body, allowed)
			for _, run := range []struct {
				name     string
				requests []decisionRequest
				checks   int
				conns    int
			}{
				{"single", singles, 1, authorizeLoadConns},
				{"batch", batches, batchBenchSize, authorizeLoadConns},
				{"batch-explain", explained, batchBenchSize, authorizeLoadConns},
				// One connection: each request's own latency, nothing queued behind others.
				{"single-1conn", singles, 1, 1},
				{"batch-1conn", batches, batchBenchSize, 1},
			} {
				b.Run(run.name, func(b *testing.B) {
					var next atomic.Int64
					target := func() *http.Request {
						r := run.requests[int(next.Add(1))%len(run.requests)]
						req, _ := http.NewRequest(http.MethodPost, ts.URL+r.path, strings.NewReader(r.body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("X-API-Key", r.key)
						return req
					}
					b.ResetTimer()
					var res loadResult
					for b.Loop() {
						res = runLoad(b, target, run.conns, duration, postgresBackendCPU(b, st))
					}
					reportChecks(b, be.name+" "+run.name, res, run.checks)
				})
			}
		})
	}
}

// decisionRequest is one request of the decision benchmarks: a POST of body to path with key.
type decisionRequest struct{ path, body, key string }

// batchBenchRequests returns, for each project of ten (in order), its mixed checks (mixedChecks)
// as single POST /api/v1/authorize requests (100 a project), as one batch, and as one batch
// with explain, each with its project's key.
func batchBenchRequests(b testing.TB, ten benchTenancy, keys map[string]string) (singles, batches, explained []decisionRequest) {
	b.Helper()
	for _, p := range ten.projects {
		list, _ := mixedChecks(ten, p.ID)
		if len(list) != batchBenchSize {
			b.Fatalf("%d checks for %s, want %d", len(list), p.ID, batchBenchSize)
		}
		checks := make([]string, len(list))
		for i, c := range list {
			checks[i] = checkJSON(c)
			singles = append(singles, decisionRequest{"/api/v1/authorize", `{"projectId":"` + p.ID + `",` + checks[i][1:], keys[p.ID]})
		}
		body := fmt.Sprintf(`{"projectId":%q,"checks":[%s]}`, p.ID, strings.Join(checks, ","))
		batches = append(batches, decisionRequest{"/api/v1/authorize/batch", body, keys[p.ID]})
		explained = append(explained, decisionRequest{"/api/v1/authorize/batch", body[:len(body)-1] + `,"explain":true}`, keys[p.ID]})
	}
	return singles, batches, explained
}

// BenchmarkAuthorizeBatchHandler measures, on each backend, what one request costs the server
// alone: the handler (middleware, validation, query, answer) called in process through
// ServeHTTP, no network, no load client, for the load benchmark's single checks and batches
// (batchBenchRequests), cycling through the projects. It reports the process's CPU per request
// (the garbage collector's included) and PostgreSQL's in pg-cpu-µs/op: the figures a profile
// explains (add -cpuprofile).
//
//	go test -run '^$' -bench AuthorizeBatchHandler -benchtime 2000x ./server/
func BenchmarkAuthorizeBatchHandler(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			ten := seedRBAC(b, st)
			srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
			if err != nil {
				b.Fatal(err)
			}
			keys := benchAPIKeys(b, srv, st, ten)
			singles, batches, explained := batchBenchRequests(b, ten, keys)
			h, dbCPU := srv.Handler(), postgresBackendCPU(b, st)
			for _, run := range []struct {
				name     string
				requests []decisionRequest
			}{{"single", singles}, {"batch", batches}, {"batch-explain", explained}} {
				b.Run(run.name, func(b *testing.B) {
					b.ReportAllocs()
					cpu, db := apptest.ProcessCPU(), time.Duration(0)
					if dbCPU != nil {
						db = dbCPU()
					}
					n := 0
					for b.Loop() {
						r := run.requests[n%len(run.requests)]
						req := httptest.NewRequest(http.MethodPost, r.path, strings.NewReader(r.body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("X-API-Key", r.key)
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, req)
						if rec.Code != http.StatusOK {
							b.Fatalf("%s: %d %s", r.path, rec.Code, rec.Body)
						}
						n++
					}
					b.ReportMetric(float64((apptest.ProcessCPU()-cpu).Microseconds())/float64(n), "cpu-µs/op")
					if dbCPU != nil {
						b.ReportMetric(float64((dbCPU()-db).Microseconds())/float64(n), "pg-cpu-µs/op")
					}
				})
			}
		})
	}
}

// reportChecks logs and reports a load run whose requests each carried checks checks.
func reportChecks(b *testing.B, name string, res loadResult, checks int) {
	b.Helper()
	b.Logf("%s: %s", name, res)
	if res.Errors > 0 {
		b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
	}
	if res.Requests == 0 {
		return
	}
	n := time.Duration(res.Requests * checks)
	b.ReportMetric(res.RPS*float64(checks), "checks/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64((res.CPU/n).Nanoseconds())/1000, "cpu-µs/check")
	if res.DBCPU > 0 {
		b.ReportMetric(float64((res.DBCPU/n).Nanoseconds())/1000, "pg-cpu-µs/check")
	}
}

// checkBatch sends one batch over the network and checks every decision against want.
func checkBatch(b *testing.B, baseURL, key, body string, want []bool) {
	b.Helper()
	raw := benchRequest(b, http.MethodPost, baseURL+"/api/v1/authorize/batch", key, body)
	var out envelope[struct {
		Results []struct{ Allowed bool }
	}]
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Data.Results) != len(want) {
		b.Fatalf("batch: %v %s", err, raw)
	}
	for i, r := range out.Data.Results {
		if r.Allowed != want[i] {
			b.Fatalf("batch result %d: allowed %v, want %v", i, r.Allowed, want[i])
		}
	}
}

// benchRequest sends one request over the network with key and returns its 200 body.
func benchRequest(b *testing.B, method, target, key, body string) []byte {
	b.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, target, r)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	status, raw := roundTrip(b, req)
	if status != http.StatusOK {
		b.Fatalf("%s %s: %d %s", method, target, status, raw)
	}
	return raw
}

// roundTrip sends req over a connection of its own and returns the answer's status and body.
func roundTrip(b *testing.B, req *http.Request) (int, []byte) {
	b.Helper()
	client := loopbackClient(1)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// holdersBenchPrincipals is the size of the who-holds benchmark's project.
const holdersBenchPrincipals = 10_000

// seedHolders adds to ten's organization a project of holdersBenchPrincipals users, each bound
// (like seedRBAC's principals) to 3 of 8 roles of 10 permissions (30,000 bindings), plus one
// user, "user-zzzz", bound to a role holding "rare:permission" alone: the last in order, so
// that its first page reads every binding of the project. It returns the project.
func seedHolders(b testing.TB, st *store.Store, ten benchTenancy) store.Project {
	b.Helper()
	ctx := context.Background()
	project := store.Project{OrganizationID: ten.org.ID, Name: "Holders", Slug: "holders"}
	roles := make([]store.ProjectRole, benchRolesPerProject+1)
	err := st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateProject(ctx, &project); err != nil {
			return err
		}
		for r := range roles {
			perms := []string{"rare:permission"}
			if r < benchRolesPerProject {
				perms = make([]string, benchPermissionsPerRole)
				for i := range perms {
					perms[i] = fmt.Sprintf("resource%d:action%d", r, i)
				}
			}
			roles[r] = store.ProjectRole{ProjectID: project.ID, Name: fmt.Sprint("Role ", r), Slug: fmt.Sprint("role-", r), Permissions: perms}
			if err := tx.CreateProjectRole(ctx, &roles[r]); err != nil {
				return err
			}
		}
		rare := store.RoleBinding{ProjectID: project.ID, RoleID: roles[benchRolesPerProject].ID, PrincipalType: store.PrincipalUser, PrincipalID: "user-zzzz"}
		return tx.CreateRoleBinding(ctx, &rare)
	})
	if err != nil {
		b.Fatal(err)
	}
	// Transactions of perTx principals, several at once on PostgreSQL (each binding is two
	// round trips: seeding one after another took ~20 s in a pinned child), one at a time on
	// SQLite (one writer).
	const perTx = 1000
	workers := 1
	if st.Pools()["postgres"] != nil {
		workers = 4
	}
	starts := make(chan int, holdersBenchPrincipals/perTx)
	for start := 0; start < holdersBenchPrincipals; start += perTx {
		starts <- start
	}
	close(starts)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for start := range starts {
				errs[w] = st.InTx(ctx, func(tx *store.Tx) error {
					for i := start; i < start+perTx; i++ {
						for k := range benchRolesPerPrincipal {
							rb := store.RoleBinding{ProjectID: project.ID, RoleID: roles[(i+k)%benchRolesPerProject].ID,
								PrincipalType: store.PrincipalUser, PrincipalID: fmt.Sprintf("user-%05d", i)}
							if err := tx.CreateRoleBinding(ctx, &rb); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return project
}

// BenchmarkRBACLookupLoad measures, on each backend, GET …/principals/user/{id}/permissions
// over the /authorize data set (cycling through its 1,000 principals), and the first page (50)
// of GET …/permission-holders in a project of 10,000 principals (seedHolders): a permission
// 3 in 8 of them hold ("common": the page fills within the first ~130 principals) and one only
// the last principal holds ("rare": the page reads all 30,001 bindings). It reports
// requests/s, p50, p95 and p99.
func BenchmarkRBACLookupLoad(b *testing.B) {
	duration := apptest.LoadDuration(b)
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			ten := seedRBAC(b, st)
			holders := seedHolders(b, st, ten)
			ten.projects = append(ten.projects, holders)
			srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
			if err != nil {
				b.Fatal(err)
			}
			ts := startLoopback(b, srv.Handler())
			keys := benchAPIKeys(b, srv, st, ten)

			var permissionPaths []string
			for _, p := range ten.principals {
				permissionPaths = append(permissionPaths, "/api/v1/projects/"+p.projectID+"/principals/user/"+p.principalID+"/permissions")
			}
			holdersPath := func(permission string) []string {
				return []string{"/api/v1/projects/" + holders.ID + "/permission-holders?permission=" + url.QueryEscape(permission)}
			}
			for _, run := range []struct {
				name      string
				paths     []string
				projectID func(i int) string
				wantBody  string
			}{
				{"permissions", permissionPaths, func(i int) string { return ten.principals[i].projectID },
					`"wildcard":false`},
				{"holders-10k-common", holdersPath("resource0:action0"), func(int) string { return holders.ID },
					`{"principalId":"user-00000","principalType":"user","roles":["role-0"]}`},
				{"holders-10k-rare", holdersPath("rare:permission"), func(int) string { return holders.ID },
					`{"data":[{"principalId":"user-zzzz","principalType":"user","roles":["role-8"]}]}`},
			} {
				b.Run(run.name, func(b *testing.B) {
					if got := benchRequest(b, http.MethodGet, ts.URL+run.paths[0], keys[run.projectID(0)], ""); !strings.Contains(string(got), run.wantBody) {
						b.Fatalf("%s answered %s, want it to contain %s", run.paths[0], got, run.wantBody)
					}
					var next atomic.Int64
					target := func() *http.Request {
						i := int(next.Add(1)) % len(run.paths)
						req, _ := http.NewRequest(http.MethodGet, ts.URL+run.paths[i], nil)
						req.Header.Set("X-API-Key", keys[run.projectID(i)])
						return req
					}
					b.ResetTimer()
					var res loadResult
					for b.Loop() {
						res = runLoad(b, target, authorizeLoadConns, duration, postgresBackendCPU(b, st))
					}
					b.Logf("%s %s: %s, p95 %v", be.name, run.name, res, res.P95)
					if res.Errors > 0 {
						b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
					}
					b.ReportMetric(res.RPS, "req/s")
					b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(res.P95.Microseconds())/1000, "p95-ms")
					b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}
