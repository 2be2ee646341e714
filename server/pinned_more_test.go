package server

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The helpers of the pinned lookup and ingest runs (pinned_more_bench_test.go).

// TestPinnedPgbenchParse: parsePgbenchRaw reads the five rates tools/pgbench-usage.sh prints
// among pgbench's other lines, and refuses output missing one, or with a failed run's 0.
func TestPinnedPgbenchParse(t *testing.T) {
	out := `NOTICE:  something psql said
pgbench raw limit single-new             14236 events/s  (14236 tps x 1 rows, -M prepared -c16, 5s)
pgbench raw limit single-duplicate       21877 events/s  (21877 tps x 1 rows, -M prepared -c16, 5s)
pgbench raw limit batch100-new          128412 events/s  (1284 tps x 100 rows, -M prepared -c16, 5s)
pgbench raw limit durable-single-new      9120 events/s  (9120 tps x 1 rows, -M prepared -c16, 5s)
pgbench raw limit durable-batch100-new   61300 events/s  (613 tps x 100 rows, -M prepared -c16, 5s)
`
	raw, err := parsePgbenchRaw(out)
	if err != nil {
		t.Fatal(err)
	}
	want := pgbenchRaw{"single-new": 14236, "single-duplicate": 21877, "batch100-new": 128412,
		"durable-single-new": 9120, "durable-batch100-new": 61300}
	if !reflect.DeepEqual(raw, want) {
		t.Fatalf("parsePgbenchRaw = %v, want %v", raw, want)
	}
	for name, bad := range map[string]string{
		"a run missing":         strings.Join(strings.Split(out, "\n")[:3], "\n"),
		"a durable run missing": strings.Join(strings.Split(out, "\n")[:5], "\n"),
		"a failed run":          strings.Replace(out, "128412 events/s", "0 events/s", 1),
		"no rate":               strings.Replace(out, "128412 events/s", "events/s", 1),
	} {
		if raw, err := parsePgbenchRaw(bad); err == nil {
			t.Errorf("%s: parsePgbenchRaw = %v, want an error", name, raw)
		}
	}
}

// TestPinnedIngestRequests: a pinned ingest run's requests go round the senders, each with its
// own key and event numbering, a batch's events numbered in a row; a duplicate run's numbers
// wrap at what each sender sent before.
func TestPinnedIngestRequests(t *testing.T) {
	senders := []pinnedSender{{"prj_a", "env_a", "key-a"}, {"prj_b", "env_b", "key-b"}}
	type sent struct{ path, key, body string }
	take := func(g *pinnedIngest, n int) []sent {
		var out []sent
		for range n {
			req := g.target()
			raw, _ := io.ReadAll(req.Body)
			if req.Method != "POST" || req.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%s with Content-Type %q", req.Method, req.Header.Get("Content-Type"))
			}
			out = append(out, sent{req.URL.String(), req.Header.Get("X-API-Key"), string(raw)})
		}
		return out
	}
	ev := func(id, subject string) string {
		return `{"eventId":"` + id + `","subjectId":"` + subject + `","meter":"api_call","quantity":1`
	}
	single := newPinnedIngest("http://127.0.0.1:1", senders, "s", 0, nil)
	got := take(single, 3)
	want := []sent{
		{"http://127.0.0.1:1/api/v1/projects/prj_a/usage-events", "key-a", ev("s-0", "load_00000") + `,"environmentId":"env_a"}`},
		{"http://127.0.0.1:1/api/v1/projects/prj_b/usage-events", "key-b", ev("s-0", "load_00000") + `,"environmentId":"env_b"}`},
		{"http://127.0.0.1:1/api/v1/projects/prj_a/usage-events", "key-a", ev("s-1", "load_00001") + `,"environmentId":"env_a"}`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("single events:\n got %q\nwant %q", got, want)
	}
	if n := single.sent(); !reflect.DeepEqual(n, []int{2, 1}) {
		t.Fatalf("sent %v, want [2 1]", n)
	}
	var ids []string
	for _, r := range take(newPinnedIngest("http://127.0.0.1:1", senders, "s", 0, []int{2, 1}), 6) {
		ids = append(ids, r.body[len(`{"eventId":"`):strings.Index(r.body, `","subject`)]+"@"+r.key)
	}
	if want := "s-0@key-a s-0@key-b s-1@key-a s-0@key-b s-0@key-a s-0@key-b"; strings.Join(ids, " ") != want {
		t.Fatalf("duplicates: %s, want %s", strings.Join(ids, " "), want)
	}

	batches := newPinnedIngest("http://127.0.0.1:1", senders[:1], "b", 2, []int{3})
	got = take(batches, 2)
	want = []sent{
		{"http://127.0.0.1:1/api/v1/projects/prj_a/usage-events/batch", "key-a",
			`{"environmentId":"env_a","events":[` + ev("b-0", "load_00000") + "}," + ev("b-1", "load_00001") + "}]}"},
		{"http://127.0.0.1:1/api/v1/projects/prj_a/usage-events/batch", "key-a",
			`{"environmentId":"env_a","events":[` + ev("b-2", "load_00002") + "}," + ev("b-0", "load_00000") + "}]}"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batches:\n got %q\nwant %q", got, want)
	}
}

// TestPinnedMoreSummary: the ingest lines state new events/s as a share of pgbench's raw limit
// and of the durable shape's, with the CPU a new event cost in all against its target's budget
// on 2 cores, and duplicates against new events; without pgbench, the target and the reason.
func TestPinnedMoreSummary(t *testing.T) {
	r := map[string]loadResult{
		"permissions": {RPS: 5000, P50: 2 * time.Millisecond, P95: 4*time.Millisecond + 400, P99: 6 * time.Millisecond},
		"ingest/single/new": {RPS: 7000, Requests: 700, CPU: 14 * time.Millisecond, DBCPU: 70 * time.Millisecond,
			ReaderCPU: []time.Duration{0, 35 * time.Millisecond}},
		"ingest/single/duplicate": {RPS: 10500},
		"ingest/batch/new": {RPS: 600, Requests: 60, CPU: 6 * time.Millisecond, DBCPU: 180 * time.Millisecond,
			ReaderCPU: []time.Duration{0, 60 * time.Millisecond}},
		"ingest/batch/duplicate/projects=10": {RPS: 300},
		"ingest/batch/new/projects=10":       {RPS: 400},
	}
	raw := pgbenchRaw{"single-new": 14000, "single-duplicate": 20000, "batch100-new": 100000,
		"durable-single-new": 8750, "durable-batch100-new": 75000}
	got := pinnedMoreSummary("postgres", r, raw, "taskset -c 0, 1 s a run", 2)
	for _, want := range []string{
		"  effective permissions: p50 2ms, p95 4ms, p99 6ms (target ≤ 10ms), 5000/s, server CPU 0s per request\n",
		"  pgbench raw limit: single-new 14000/s, single-duplicate 20000/s, batch100-new 100000 events/s; " +
			"of the durable shape (ids and partitioned events): durable-single-new 8750/s, durable-batch100-new 75000 events/s (taskset -c 0, 1 s a run)\n",
		// (14 + 35 + 70) ms / 700 events = 170µs; 2 cores / (50% × 14,000/s) = 285.7µs.
		"  ingest/single/new: 7000 events/s = 50.0% of pgbench single-new 14000/s (target ≥ 50%, ~7,000/s), 80.0% of durable-single-new 8750/s; " +
			"CPU in all 170µs per event, the target's budget on 2 cores 286µs; p50 0s, p99 0s; server CPU 50µs, PostgreSQL CPU 100µs per event\n",
		"  ingest/single/duplicate: 10500 events/s = 1.50× new (target ≥ 1×);",
		// (6 + 60 + 180) ms / 6,000 events = 41µs; 2 cores / (40% × 100,000/s) = 50µs.
		"  ingest/batch/new: 60000 events/s = 60.0% of pgbench batch100-new 100000/s (target ≥ 40%), 80.0% of durable-batch100-new 75000/s; " +
			"CPU in all 41µs per event, the target's budget on 2 cores 50µs; p50 0s,",
		"  ingest/batch/duplicate/projects=10: 30000 events/s = 0.75× new (target ≥ 1×);",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	got = pinnedMoreSummary("sqlite", r, nil, "the raw limit is PostgreSQL's (pgbench)", 2)
	for _, want := range []string{
		"  pgbench raw limit: none (the raw limit is PostgreSQL's (pgbench))\n",
		"  ingest/single/new: 7000 events/s (target ≥ 50% of pgbench single-new, ~7,000/s); p50 0s, p99 0s; server CPU 50µs",
		"  ingest/batch/new: 60000 events/s (target ≥ 40% of pgbench batch100-new); p50 0s,",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
