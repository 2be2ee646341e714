package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/usagegen"
)

// BenchmarkUsageScale measures usage on PostgreSQL at a size (docs/benchmarks.md, "Usage at
// scale"): it seeds GATEHOUSE_BENCH_EVENTS events (for example 10000000) over events/200
// subjects and 90 days with usagegen's COPY path and reports the seed rate; then, with no
// vacuum in between, single-event ingest (the slowest request shows a stall), batch ingest and
// every analytics route's p50/p95; then, GATEHOUSE_BENCH_SETTLE later (default 5m), single-event
// ingest again. It runs only with GATEHOUSE_TEST_POSTGRES_URL and GATEHOUSE_BENCH_EVENTS set:
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
	u.stallRun(b, "single/after-seed"+tag, "after", 0)
	u.stallRun(b, "batch/after-seed"+tag, "afterb", usageBatchSize)
	u.analyticsRuns(b, tag, subjects)
	b.Logf("waiting %v before ingesting again", settle)
	time.Sleep(settle)
	u.stallRun(b, "single/settled"+tag, "settled", 0)
}

// stallRun drives new-event ingest (single, or batches of batch) for the load duration and
// logs the rate with p50, p99 and the slowest request.
func (u usageBench) stallRun(b *testing.B, name, prefix string, batch int) {
	b.Run(name, func(b *testing.B) {
		var next atomic.Int64
		event := func() string {
			n := next.Add(1)
			return fmt.Sprintf(`"eventId":"%s-%d","subjectId":"stall_%05d","meter":"api_call","quantity":1`, prefix, n, n%5000)
		}
		target := func() *http.Request {
			body, path := `{`+event()+`,"environmentId":"`+u.envs[0]+`"}`, "/usage-events"
			if batch > 0 {
				parts := make([]string, batch)
				for i := range parts {
					parts[i] = "{" + event() + "}"
				}
				body, path = `{"environmentId":"`+u.envs[0]+`","events":[`+strings.Join(parts, ",")+`]}`, "/usage-events/batch"
			}
			req, _ := http.NewRequest(http.MethodPost, u.url+"/api/v1/projects/"+u.projectID+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", u.key)
			return req
		}
		var res loadResult
		for b.Loop() {
			res = runLoad(b, target, authorizeLoadConns, benchDuration(b, authorizeLoadDuration))
		}
		b.Logf("%s: %.0f events/s, p50 %v, p99 %v, slowest %v, %d errors", name, res.RPS*float64(max(batch, 1)), res.P50, res.P99, res.Max, res.Errors)
		if res.Errors > 0 {
			b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
		}
		b.ReportMetric(res.RPS*float64(max(batch, 1)), "events/s")
		b.ReportMetric(float64(res.Max.Microseconds())/1000, "max-ms")
	})
}
