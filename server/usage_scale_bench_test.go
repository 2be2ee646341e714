package server

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/usagegen"
)

// BenchmarkUsageScale measures usage on PostgreSQL at a size (docs/benchmarks.md, "Usage at
// scale"): it seeds GATEHOUSE_BENCH_EVENTS events (for example 10000000) over events/200
// subjects and 90 days with usagegen's COPY path and reports the seed rate; then, with no
// vacuum in between, single-event ingest (max-ms, the slowest request, shows a stall), batch ingest and
// every analytics route's p50/p95; then, GATEHOUSE_BENCH_SETTLE later (default 5m: autovacuum has
// had its turn), single-event ingest and the analytics routes again. It runs only with GATEHOUSE_TEST_POSTGRES_URL and GATEHOUSE_BENCH_EVENTS set:
//
//	GATEHOUSE_BENCH_EVENTS=10000000 go test -run '^$' -bench UsageScale -benchtime 1x -timeout 90m ./server/
func BenchmarkUsageScale(b *testing.B) {
	size, _ := strconv.Atoi(os.Getenv("GATEHOUSE_BENCH_EVENTS"))
	if size <= 0 || os.Getenv("GATEHOUSE_TEST_POSTGRES_URL") == "" {
		b.Skip("needs GATEHOUSE_BENCH_EVENTS and GATEHOUSE_TEST_POSTGRES_URL")
	}
	settle := 5 * time.Minute
	if v := os.Getenv("GATEHOUSE_BENCH_SETTLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("GATEHOUSE_BENCH_SETTLE: %v", err)
		}
		settle = d
	}
	var be benchBackend
	for _, c := range benchBackends(b) {
		if c.name == string(store.Postgres) {
			be = c
		}
	}
	u := newUsageBench(b, be.open(b))
	subjects := max(size/200, 1)
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
	u.analyticsRuns(b, tag, subjects)
	b.Logf("waiting %v before ingesting again", settle)
	time.Sleep(settle)
	u.ingestLoad(b, "single/settled"+tag, "settled", 0, nil)
	u.analyticsRuns(b, tag+"/settled", subjects)
}
