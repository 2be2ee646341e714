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
// GATEHOUSE_BENCH_EVENTS and GATEHOUSE_BENCH_REPLICA set: then it builds its own primary and
// streaming standby (newScaleBench) and the analytics are read from the standby:
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
	u, replica := newScaleBench(b)
	// readers are the servers the analytics are loaded through: u's store reads the primary,
	// replica's (with GATEHOUSE_BENCH_REPLICA) the standby.
	readers := []struct {
		name string
		u    usageBench
	}{{"/primary", u}}
	if replica.srv != nil {
		readers = append(readers, struct {
			name string
			u    usageBench
		}{"/replica", replica})
	}
	analytics := func(tag string) {
		for _, r := range readers {
			r.u.analyticsRuns(b, tag+r.name, subjects)
		}
	}
	start := time.Now()
	if _, err := usagegen.Seed(context.Background(), u.st, usagegen.Spec{ProjectID: u.projectID, Environments: u.envs,
		Events: size, Subjects: subjects, Days: 90, Prefix: "seed", Workers: 2}); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.Logf("seed: %d events over %d subjects in %v, %.0f events/s", size, subjects, took.Round(time.Second), float64(size)/took.Seconds())
	tag := "@" + strconv.Itoa(size)
	u.ingestLoad(b, "single/after-seed"+tag, "after", 0, nil)
	u.ingestLoad(b, "batch/after-seed"+tag, "afterb", usageBatchSize, nil)
	analytics(tag)
	b.Logf("waiting %v before ingesting again", settle)
	time.Sleep(settle)
	u.ingestLoad(b, "single/settled"+tag, "settled", 0, nil)
	analytics(tag + "/settled")
	for _, r := range readers {
		r.u.analyticsUnderIngest(b, u, tag+r.name, subjects)
	}
	if replica.srv != nil {
		if n := poolCount(b, replica.srv, "getAnalyticsSummary", store.PoolReplica); n == 0 {
			b.Errorf("no analytics summary served by the replica")
		}
	}
}

// newScaleBench opens BenchmarkUsageScale's store on the test PostgreSQL and a bench over it;
// or, with GATEHOUSE_BENCH_REPLICA set, builds a primary and its streaming standby for the run
// (store/pgcluster, with a packaged cluster's durability settings and shared buffers) and
// returns two benches on the same data: one whose store has no replica (every read on the
// primary) and one whose store has the standby as its read replica
// (GATEHOUSE_DATABASE_READ_URL, 5 s of lag at most), each with its own server.
func newScaleBench(b *testing.B) (primary, replica usageBench) {
	if os.Getenv("GATEHOUSE_BENCH_REPLICA") == "" {
		for _, c := range benchBackends(b) {
			if c.name == string(store.Postgres) {
				return newUsageBench(b, c.open(b)), usageBench{}
			}
		}
		b.Fatal("no PostgreSQL backend")
	}
	top := pgcluster.Start(b, pgcluster.Options{Conf: []string{"fsync = on", "full_page_writes = on", "shared_buffers = 128MB"},
		ReplayTimeout: 10 * time.Minute})
	open := func(opts ...store.Option) *store.Store {
		ctx := context.Background()
		st, err := store.Open(ctx, top.PrimaryURL, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		if err := st.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		return st
	}
	primary = newUsageBench(b, open())
	replica = primary
	st := open(store.WithReadReplicas([]string{top.StandbyURL}, 5*time.Second))
	srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
	if err != nil {
		b.Fatal(err)
	}
	replica.st, replica.srv, replica.handler = st, srv, srv.Handler()
	replica.url = startLoopback(b, replica.handler).URL
	top.WaitReplayed()
	return primary, replica
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
	b.Logf("ingest beside the analytics%s: %s; %.0f events/s", tag, res, res.RPS)
	if res.Errors > 0 {
		b.Errorf("ingest: %d errors, first: %s", res.Errors, res.FirstError)
	}
}
