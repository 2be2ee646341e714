package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// BenchmarkIngestUsageHandler measures the CPU one ingest request costs this process, through
// the whole handler chain (routing, authentication, validation, decoding, the handler, the
// store and its driver, encoding, logging and metrics) without the network, one request at a
// time: single events and batches of usageBatchSize, new and duplicate. cpu-us/event is the
// process's CPU time (getrusage) per event, which excludes the database server's own CPU
// (PostgreSQL) and so stays comparable on a machine shared with other work; compare commits
// with
//
//	go test -run '^$' -bench 'IngestUsageHandler/postgres' -cpu 1 -count 8 ./server/ | benchstat
func BenchmarkIngestUsageHandler(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			u := newUsageBench(b, be.open(b))
			for _, size := range []int{0, usageBatchSize} {
				name := "single"
				if size > 0 {
					name = fmt.Sprintf("batch%d", size)
				}
				var sent int
				for _, kind := range []string{"new", "duplicate"} {
					b.Run(name+"/"+kind, func(b *testing.B) {
						if kind == "duplicate" && sent == 0 {
							// Run alone (-bench filter): store the events to replay first.
							sent = store.MaxUsageBatch
							events := make([]store.UsageEvent, sent)
							for i := range events {
								events[i] = store.UsageEvent{ProjectID: u.projectID, EnvironmentID: u.envs[0], EventID: fmt.Sprintf("h%s-%d", name, i),
									SubjectID: fmt.Sprintf("load_%05d", i%5000), Meter: "api_call", Quantity: 1}
							}
							if _, err := u.st.IngestUsage(context.Background(), events); err != nil {
								b.Fatal(err)
							}
						}
						n := 0
						event := func() string {
							id := n
							if kind == "duplicate" {
								id = n % sent
							}
							n++
							return fmt.Sprintf(`"eventId":"h%s-%d","subjectId":"load_%05d","meter":"api_call","quantity":1`, name, id, id%5000)
						}
						want := http.StatusCreated
						if kind == "duplicate" {
							want = http.StatusOK
						}
						if size > 0 {
							want = http.StatusOK
						}
						per := max(size, 1)
						start := apptest.ProcessCPU()
						for b.Loop() {
							var body, path string
							if size == 0 {
								body = `{` + event() + `,"environmentId":"` + u.envs[0] + `"}`
								path = "/usage-events"
							} else {
								parts := make([]string, size)
								for i := range parts {
									parts[i] = "{" + event() + "}"
								}
								body = `{"environmentId":"` + u.envs[0] + `","events":[` + strings.Join(parts, ",") + `]}`
								path = "/usage-events/batch"
							}
							req := httptest.NewRequest(http.MethodPost, "/api/v1/projects/"+u.projectID+path, strings.NewReader(body))
							req.Header.Set("Content-Type", "application/json")
							req.Header.Set("X-API-Key", u.key)
							rec := httptest.NewRecorder()
							u.handler.ServeHTTP(rec, req)
							if rec.Code != want {
								b.Fatalf("status %d: %s", rec.Code, rec.Body)
							}
						}
						b.ReportMetric(float64((apptest.ProcessCPU()-start).Nanoseconds())/1000/float64(b.N*per), "cpu-us/event")
						b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "events/s")
						if kind == "new" {
							sent = n
						}
					})
				}
			}
		})
	}
}
