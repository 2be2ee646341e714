package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
	"github.com/gatehouse-dev/gatehouse/store/usagegen"
)

// Usage load benchmarks, on the loopback harness of loadtest_test.go (16 keep-alive
// connections, 5 s per run, GATEHOUSE_BENCH_DURATION to change it):
//
//	go test -run '^$' -bench UsageLoad -benchtime 1x ./server/
//
// For each backend: single-event and batch (usageBatchSize events per request) ingest of new
// events, then of the same events again (duplicates), in an empty project. With
// GATEHOUSE_BENCH_EVENTS=N (for example 2000000) the project is then seeded with N events over
// N/200 subjects and 90 days (usagegen, through the store), ingest is measured again at that
// size, and every analytics route is loaded from 4 connections for its p50/p95.

// usageBatchSize is the events per batch request in the load runs: 100, the size the
// targets and the pgbench raw-limit run (tools/pgbench-usage.sh) use.
const usageBatchSize = 100

// usageProjects is how many projects, each with its own key, the multi-project runs spread
// their events over.
const usageProjects = 10

// analyticsLoadConns is how many connections load the analytics routes at once: a handful of
// dashboards, not the ingest's 16 senders.
const analyticsLoadConns = 4

// usageBench is a running server with one project and an API key holding usage:write,
// usage:read and billing:read; senders is that project and key first, then any added by
// addProjects.
type usageBench struct {
	url, key, projectID string
	envs                []string
	st                  *store.Store
	handler             http.Handler
	srv                 *Server
	cookie, orgID       string
	senders             []usageSender
}

// addProjects creates n more projects in the organization, each with a key holding
// usage:write, and adds them to u.senders.
func (u *usageBench) addProjects(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		prj := store.Project{Name: "Usage " + strconv.Itoa(i), Slug: "usage-" + strconv.Itoa(i), OrganizationID: u.orgID}
		if err := u.st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateProject(ctx, &prj) }); err != nil {
			b.Fatal(err)
		}
		key := benchServiceAccountKey(b, u.srv, u.cookie, prj.ID, `{"name":"meter","scopes":["usage:write"]}`)
		u.senders = append(u.senders, usageSender{project: prj.ID, env: prj.Environments[0].ID, key: key})
	}
}

func newUsageBench(b *testing.B, st *store.Store) usageBench {
	b.Helper()
	ctx := context.Background()
	owner := store.User{Name: "Owner", Email: "owner@bench.example.com"}
	org := store.Organization{Name: "Bench", Slug: "bench"}
	prj := store.Project{Name: "Usage", Slug: "usage"}
	token, err := identity.NewSessionToken()
	if err != nil {
		b.Fatal(err)
	}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := storetest.CreateOwnedProject(ctx, tx, &owner, "!no-password", &org, &prj); err != nil {
			return err
		}
		return tx.CreateSession(ctx, &store.Session{UserID: owner.ID, TokenHash: identity.HashToken(token), ExpiresAt: time.Now().Add(time.Hour)})
	})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
	if err != nil {
		b.Fatal(err)
	}
	cookie := srv.sessionCookieName + "=" + identity.CookieValue(srv.cookieKey, token)
	key := benchServiceAccountKey(b, srv, cookie, prj.ID, `{"name":"meter","scopes":["usage:write","usage:read","billing:read"]}`)
	h := srv.Handler()
	ts := startLoopback(b, h)
	envs := make([]string, len(prj.Environments))
	for i, e := range prj.Environments {
		envs[i] = e.ID
	}
	return usageBench{url: ts.URL, key: key, projectID: prj.ID, envs: envs, st: st, handler: h, srv: srv, cookie: cookie,
		orgID: org.ID, senders: []usageSender{{project: prj.ID, env: envs[0], key: key}}}
}

// ingestLoad drives single-event (batch 0) or batch ingest of events "<prefix>-<n>" for
// n = 0, 1, 2, … (new events) or of n modulo known (duplicates of an earlier run with the
// same prefix) and reports events/s. Request r goes to sender r modulo len(u.senders), each
// project with its own key and its own numbering n. It returns how many events it sent to
// each sender (known, for the duplicate run).
func (u usageBench) ingestLoad(b *testing.B, name, prefix string, batch int, known []int) []int {
	sent := make([]int, len(u.senders))
	b.Run(name, func(b *testing.B) {
		next := make([]atomic.Int64, len(u.senders))
		id := func(s int) int {
			n := int(next[s].Add(1) - 1)
			if known != nil && known[s] > 0 {
				n %= known[s]
			}
			return n
		}
		event := func(n int) string {
			return fmt.Sprintf(`"eventId":"%s-%d","subjectId":"load_%05d","meter":"api_call","quantity":1`, prefix, n, n%5000)
		}
		var requests atomic.Int64
		target := func() *http.Request {
			si := int(requests.Add(1)-1) % len(u.senders)
			snd := u.senders[si]
			var body, path string
			if batch == 0 {
				body = `{` + event(id(si)) + `,"environmentId":"` + snd.env + `"}`
				path = "/usage-events"
			} else {
				parts := make([]string, batch)
				for i := range parts {
					parts[i] = "{" + event(id(si)) + "}"
				}
				body = `{"environmentId":"` + snd.env + `","events":[` + strings.Join(parts, ",") + `]}`
				path = "/usage-events/batch"
			}
			req, _ := http.NewRequest(http.MethodPost, u.url+"/api/v1/projects/"+snd.project+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", snd.key)
			return req
		}
		var res loadResult
		for b.Loop() {
			res = runLoad(b, target, authorizeLoadConns, benchDuration(b, authorizeLoadDuration))
		}
		perRequest := max(batch, 1)
		b.Logf("%s: %s; %.0f events/s", name, res, res.RPS*float64(perRequest))
		if res.Errors > 0 {
			b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
		}
		b.ReportMetric(res.RPS*float64(perRequest), "events/s")
		b.ReportMetric(float64(res.CPU.Microseconds())/float64(max(res.Requests*perRequest, 1)), "cpu-us/event")
		b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(res.Max.Microseconds())/1000, "max-ms")
		for i := range sent {
			sent[i] = int(next[i].Load())
		}
	})
	return sent
}

// ingestRuns measures new then duplicate events, single and batch.
func (u usageBench) ingestRuns(b *testing.B, tag string) {
	n := u.ingestLoad(b, "single/new"+tag, "s"+tag, 0, nil)
	u.ingestLoad(b, "single/duplicate"+tag, "s"+tag, 0, n)
	n = u.ingestLoad(b, "batch/new"+tag, "b"+tag, usageBatchSize, nil)
	u.ingestLoad(b, "batch/duplicate"+tag, "b"+tag, usageBatchSize, n)
}

func BenchmarkUsageLoad(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			u := newUsageBench(b, be.open(b))
			u.ingestRuns(b, "")
			// The same runs spread over usageProjects projects with a key each (events of
			// duplicate runs keep their project: request r goes to project r mod 10 and
			// carries the event ids it did the first time).
			multi := u
			multi.addProjects(b, usageProjects-1)
			multi.ingestRuns(b, "/projects="+strconv.Itoa(usageProjects))
			size, _ := strconv.Atoi(os.Getenv("GATEHOUSE_BENCH_EVENTS"))
			if size <= 0 {
				return
			}
			subjects := max(size/200, 1)
			start := time.Now()
			workers := 1
			if be.name == string(store.Postgres) {
				workers = 4
			}
			_, err := usagegen.Seed(context.Background(), u.st, usagegen.Spec{ProjectID: u.projectID, Environments: u.envs,
				Events: size, Subjects: subjects, Days: 90, Prefix: "seed", Workers: workers})
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: seeded %d events over %d subjects in %v (%.0f events/s through the store)", be.name, size, subjects,
				time.Since(start).Round(time.Second), float64(size)/time.Since(start).Seconds())
			settleAfterBulkLoad(b, u.st)
			tag := "@" + strconv.Itoa(size)
			u.ingestRuns(b, tag)
			u.analyticsRuns(b, tag, subjects)
		})
	}
}

// settleAfterBulkLoad runs VACUUM (ANALYZE) on PostgreSQL's usage tables, as PostgreSQL's guide
// advises after a bulk load ("Populating a Database"), so that the runs at that size measure the
// table's size rather than the load's vacuum debt: measured at once, while autovacuum worked
// through the 2 M new rows, new single events were 22–28 % slower than in the empty project;
// after the vacuum, no slower.
func settleAfterBulkLoad(b *testing.B, st *store.Store) {
	db := st.Pools()["postgres"]
	if db == nil {
		return
	}
	start := time.Now()
	for _, table := range []string{"usage_events", "usage_daily", "usage_subject_days", "usage_subjects", "usage_totals"} {
		if _, err := db.Exec("VACUUM (ANALYZE) " + table); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("postgres: VACUUM (ANALYZE) of the usage tables took %v", time.Since(start).Round(time.Millisecond))
}

// analyticsRuns loads each analytics route and reports p50 and p95.
func (u usageBench) analyticsRuns(b *testing.B, tag string, subjects int) {
	routes := []struct {
		name string
		path func() string
	}{
		{"summary", func() string { return "/analytics/summary" }},
		{"summary-env", func() string { return "/analytics/summary?environmentId=" + u.envs[0] }},
		{"activity-90d", func() string { return "/analytics/activity?days=90" }},
		{"subjects-events", func() string { return "/analytics/subjects?days=365&sort=-events&limit=50" }},
		{"subjects-search", func() string {
			return "/analytics/subjects?days=30&q=sub_00" + strconv.Itoa(rand.IntN(10)) + "&sort=-lastSeen"
		}},
		{"subjects-page", func() string {
			return "/analytics/subjects?days=90&sort=subjectId&limit=50&offset=" + strconv.Itoa(rand.IntN(subjects))
		}},
		{"subject-activity", func() string { return fmt.Sprintf("/subjects/sub_%06d/activity?days=30", rand.IntN(subjects)) }},
	}
	for _, r := range routes {
		b.Run("analytics/"+r.name+tag, func(b *testing.B) {
			target := func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, u.url+"/api/v1/projects/"+u.projectID+r.path(), nil)
				req.Header.Set("X-API-Key", u.key)
				return req
			}
			var res loadResult
			for b.Loop() {
				res = runLoad(b, target, analyticsLoadConns, benchDuration(b, authorizeLoadDuration))
			}
			b.Logf("analytics %s: %s, p95 %v", r.name, res, res.P95)
			if res.Errors > 0 {
				b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
			}
			b.ReportMetric(res.RPS, "req/s")
			b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(res.P95.Microseconds())/1000, "p95-ms")
		})
	}
}

// BenchmarkIngestUsage measures store.IngestUsage alone, one caller at a time (no HTTP, no
// group commit to share): a new single event, and a batch of usageBatchSize new events, per
// operation. Subjects cycle over 5,000 as in the load runs.
func BenchmarkIngestUsage(b *testing.B) {
	for _, be := range benchBackends(b) {
		st := be.open(b)
		ctx := context.Background()
		var n int
		event := func() store.UsageEvent {
			n++
			return store.UsageEvent{ProjectID: "prj_bench", EnvironmentID: "env_bench", EventID: "e-" + strconv.Itoa(n),
				SubjectID: fmt.Sprintf("load_%05d", n%5000), Meter: "api_call", Quantity: 1}
		}
		for _, size := range []int{1, usageBatchSize} {
			b.Run(fmt.Sprintf("%s/events=%d", be.name, size), func(b *testing.B) {
				events := make([]store.UsageEvent, size)
				for b.Loop() {
					for i := range events {
						events[i] = event()
					}
					if _, err := st.IngestUsage(ctx, events); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
