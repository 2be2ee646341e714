package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/pgcluster"
	"github.com/gatehouse-dev/gatehouse/store/usagegen"
)

// BenchmarkUsageScale measures usage on PostgreSQL at a size (docs/benchmarks.md, "Usage at
// scale"): it seeds GATEHOUSE_BENCH_EVENTS events (for example 10000000) over events/200
// subjects and 90 days with usagegen's COPY path and reports the seed rate; then, with no
// vacuum in between, single-event ingest (max-ms, the slowest request, shows a stall), batch
// ingest and every analytics route's p50/p95; then, GATEHOUSE_BENCH_SETTLE later (default 5m:
// autovacuum has had its turn), single-event ingest and the analytics routes again; last, the
// analytics routes again while single-event ingest runs at full rate beside them. It runs only
// with GATEHOUSE_BENCH_EVENTS and GATEHOUSE_TEST_POSTGRES_URL set, or with
// GATEHOUSE_BENCH_EVENTS and GATEHOUSE_BENCH_REPLICA set: then it starts a primary of its own
// (newScaleBench), seeds it, adds a streaming standby right after the seed's measurements, and
// from then on loads the analytics twice, from the primary and from the standby:
//
//	GATEHOUSE_BENCH_EVENTS=10000000 go test -run '^$' -bench UsageScale -benchtime 1x -timeout 90m ./server/
//	GATEHOUSE_BENCH_REPLICA=1 GATEHOUSE_BENCH_EVENTS=10000000 go test -run '^$' -bench UsageScale -benchtime 1x -timeout 90m ./server/
func BenchmarkUsageScale(b *testing.B) {
	size, _ := strconv.Atoi(os.Getenv("GATEHOUSE_BENCH_EVENTS"))
	if size <= 0 || (os.Getenv("GATEHOUSE_TEST_POSTGRES_URL") == "" && os.Getenv("GATEHOUSE_BENCH_REPLICA") == "") {
		b.Skip("needs GATEHOUSE_BENCH_EVENTS and GATEHOUSE_TEST_POSTGRES_URL or GATEHOUSE_BENCH_REPLICA")
	}
	settle := 5 * time.Minute
	if v := os.Getenv("GATEHOUSE_BENCH_SETTLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("GATEHOUSE_BENCH_SETTLE: %v", err)
		}
		settle = d
	}
	subjects := max(size/200, 1)
	u, top := newScaleBench(b)
	// readers are the servers the analytics are loaded through: u's store reads the primary;
	// with GATEHOUSE_BENCH_REPLICA, once the standby is added, a second server's store reads it.
	type reader struct {
		name string
		u    usageBench
	}
	readers := []reader{{"/primary", u}}
	analytics := func(tag string) {
		for _, r := range readers {
			r.u.analyticsRuns(b, tag+r.name, subjects)
		}
	}
	tag := "@" + strconv.Itoa(size)
	// A sub-benchmark, so that its figures are printed (a parent benchmark's log is not).
	b.Run("seed"+tag, func(b *testing.B) {
		var took time.Duration
		for b.Loop() {
			start := time.Now()
			if _, err := usagegen.Seed(context.Background(), u.st, usagegen.Spec{ProjectID: u.projectID, Environments: u.envs,
				Events: size, Subjects: subjects, Days: 90, Prefix: "seed", Workers: 2}); err != nil {
				b.Fatal(err)
			}
			took = time.Since(start)
		}
		b.Logf("seed: %d events over %d subjects in %v, %.0f events/s", size, subjects, took.Round(time.Second), float64(size)/took.Seconds())
		b.ReportMetric(float64(size)/took.Seconds(), "events/s")
		b.ReportMetric(took.Seconds(), "seconds")
	})
	u.ingestLoad(b, "single/after-seed"+tag, "after", 0, nil)
	u.ingestLoad(b, "batch/after-seed"+tag, "afterb", usageBatchSize, nil)
	analytics(tag)
	var replica usageBench
	if top != nil {
		start := time.Now()
		top.AddStandby(false)
		top.WaitReplayed()
		replica = u.readingReplica(b, top.PrimaryURL, top.StandbyURL)
		b.Run("standby-added"+tag, func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(time.Since(start).Seconds(), "seconds")
		})
		readers = append(readers, reader{"/replica", replica})
	}
	b.Logf("waiting %v before ingesting again", settle)
	time.Sleep(settle)
	u.ingestLoad(b, "single/settled"+tag, "settled", 0, nil)
	analytics(tag + "/settled")
	for _, r := range readers {
		r.u.analyticsUnderIngest(b, u, tag+r.name, subjects)
	}
	if top != nil {
		if n := poolCount(b, replica.srv, "getAnalyticsSummary", store.PoolReplica); n == 0 {
			b.Errorf("no analytics summary served by the replica")
		}
	}
}

// newScaleBench opens BenchmarkUsageScale's store on the test PostgreSQL and a bench over it;
// or, with GATEHOUSE_BENCH_REPLICA set, starts a primary of its own for the run, without its
// standby yet (store/pgcluster, with a packaged cluster's durability settings and shared
// buffers: fsync and full-page writes on, 128 MB).
func newScaleBench(b *testing.B) (usageBench, *pgcluster.Topology) {
	if os.Getenv("GATEHOUSE_BENCH_REPLICA") == "" {
		for _, c := range benchBackends(b) {
			if c.name == string(store.Postgres) {
				return newUsageBench(b, c.open(b)), nil
			}
		}
		b.Fatal("no PostgreSQL backend")
	}
	top := pgcluster.Start(b, pgcluster.Options{NoStandby: true, ReplayTimeout: 10 * time.Minute,
		Conf: []string{"fsync = on", "full_page_writes = on", "shared_buffers = 128MB"}})
	return newUsageBench(b, openScaleStore(b, top.PrimaryURL)), top
}

// openScaleStore opens and migrates a store on primaryURL with opts.
func openScaleStore(b *testing.B, primaryURL string, opts ...store.Option) *store.Store {
	ctx := context.Background()
	st, err := store.Open(ctx, primaryURL, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return st
}

// readingReplica returns u with a server of its own whose store, on the same primary, has
// standbyURL as its read replica (GATEHOUSE_DATABASE_READ_URL, 5 s of lag at most), once that
// store counts the replica usable.
func (u usageBench) readingReplica(b *testing.B, primaryURL, standbyURL string) usageBench {
	st := openScaleStore(b, primaryURL, store.WithReadReplicas([]string{standbyURL}, 5*time.Second))
	waitUsable(b, st, true)
	srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
	if err != nil {
		b.Fatal(err)
	}
	u.st, u.srv, u.handler = st, srv, srv.Handler()
	u.url = startLoopback(b, u.handler).URL
	return u
}

// analyticsUnderIngest loads every analytics route through u (analyticsRuns) while
// single-event ingest runs at full rate through ingest beside it (16 connections, new events),
// and reports the ingest rate over the whole time.
func (u usageBench) analyticsUnderIngest(b *testing.B, ingest usageBench, tag string, subjects int) {
	var n atomic.Int64
	target := func() *http.Request {
		i := n.Add(1)
		body := fmt.Sprintf(`{"eventId":"busy-%s-%d","subjectId":"load_%05d","meter":"api_call","quantity":1,"environmentId":%q}`,
			strings.Trim(tag, "@/"), i, i%5000, ingest.envs[0])
		req, _ := http.NewRequest(http.MethodPost, ingest.url+"/api/v1/projects/"+ingest.projectID+"/usage-events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", ingest.key)
		return req
	}
	// Seven routes of benchDuration (5 s) each, with their warm-ups.
	span := 7 * (benchDuration(b, authorizeLoadDuration) + time.Second)
	done := make(chan loadResult)
	go func() { done <- runLoad(b, target, authorizeLoadConns, span) }()
	u.analyticsRuns(b, "/under-ingest"+tag, subjects)
	res := <-done
	// Reported by a sub-benchmark of its own: a parent benchmark's log is not printed.
	b.Run("single/beside-analytics"+tag, func(b *testing.B) {
		for b.Loop() {
		}
		b.Logf("ingest beside the analytics%s: %s; %.0f events/s", tag, res, res.RPS)
		if res.Errors > 0 {
			b.Errorf("ingest: %d errors, first: %s", res.Errors, res.FirstError)
		}
		b.ReportMetric(res.RPS, "events/s")
		b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(res.Max.Microseconds())/1000, "max-ms")
	})
}
