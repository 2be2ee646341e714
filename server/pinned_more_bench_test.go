package server

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// The lookup and usage ingest runs of a pinned sitting (BenchmarkPinnedLoad, after its
// /authorize runs, against the same server child): effective permissions and the first page of
// who-holds (issue 24, BenchmarkRBACLookupLoad's requests), usage ingest (issue 27,
// BenchmarkUsageLoad's events) in one project and spread over usageProjects projects with a
// key each, and on PostgreSQL the raw insert limit (tools/pgbench-usage.sh, pinned to the load
// core) against the same database in the same sitting.

// pinnedSender is a project of the pinned ingest runs: one of its environments and a key
// holding usage:write.
type pinnedSender struct{ Project, Env, Key string }

// pinnedMoreHandshake is the part of the server child's handshake for the runs of this file.
type pinnedMoreHandshake struct {
	// Permissions is one GET …/principals/user/{id}/permissions per principal of the
	// /authorize data set, with its project's key; HoldersCommon and HoldersRare the first page
	// of GET …/permission-holders in the 10,000-principal project of seedHolders, for a
	// permission 3 in 8 of them hold and for one only its last principal holds.
	Permissions, HoldersCommon, HoldersRare []pinnedRequest
	// Senders are usageProjects projects of the organization; the one-project runs use the first.
	Senders []pinnedSender
}

// seedPinnedMore, in the server child, adds to the /authorize data set (ten, keys) the
// who-holds project (seedHolders) with a key holding project:read, and usageProjects empty
// projects with a key holding usage:write each, and returns the requests of this file's runs.
func seedPinnedMore(t *testing.T, srv *Server, st *store.Store, ten benchTenancy, keys map[string]string) pinnedMoreHandshake {
	t.Helper()
	var hs pinnedMoreHandshake
	for _, p := range ten.principals {
		hs.Permissions = append(hs.Permissions, pinnedRequest{Method: http.MethodGet, Key: keys[p.projectID],
			Path: "/api/v1/projects/" + p.projectID + "/principals/user/" + p.principalID + "/permissions"})
	}
	holders := seedHolders(t, st, ten)
	cookie := benchOwnerCookie(t, srv, st, ten.owner)
	holdersKey := benchServiceAccountKey(t, srv, cookie, holders.ID, `{"name":"authorizer","scopes":["project:read"]}`)
	firstPage := func(permission string) []pinnedRequest {
		return []pinnedRequest{{Method: http.MethodGet, Key: holdersKey,
			Path: "/api/v1/projects/" + holders.ID + "/permission-holders?permission=" + url.QueryEscape(permission)}}
	}
	hs.HoldersCommon, hs.HoldersRare = firstPage("resource0:action0"), firstPage("rare:permission")
	ctx := context.Background()
	for i := range usageProjects {
		prj := store.Project{OrganizationID: ten.org.ID, Name: "Usage " + strconv.Itoa(i), Slug: "usage-" + strconv.Itoa(i)}
		if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateProject(ctx, &prj) }); err != nil {
			t.Fatal(err)
		}
		key := benchServiceAccountKey(t, srv, cookie, prj.ID, `{"name":"meter","scopes":["usage:write"]}`)
		hs.Senders = append(hs.Senders, pinnedSender{Project: prj.ID, Env: prj.Environments[0].ID, Key: key})
	}
	return hs
}

// pinnedMoreRuns runs this file's runs against the server child of hs, each from 16
// connections for duration, its first answer checked first: the lookups ("permissions",
// "holders-common", "holders-rare"); usage ingest, single events and batches of 100, new then
// duplicate ("ingest/single/new" …), in one project and then over usageProjects projects (the
// same names ending "/projects=10"); on PostgreSQL then the raw limit (pinnedPgbench). The load
// runs go in results under those names; it returns the raw limits, or nil and why there are none.
func pinnedMoreRuns(b *testing.B, backend string, hs pinnedHandshake, duration time.Duration, dbCPU, serverCPU func() time.Duration, results map[string]loadResult) (pgbenchRaw, string) {
	load := func(b *testing.B, target func() *http.Request) loadResult {
		b.ResetTimer()
		var res loadResult
		for b.Loop() {
			res = runLoad(b, target, authorizeLoadConns, duration, dbCPU, serverCPU)
		}
		return res
	}
	for _, run := range []struct {
		name     string
		requests []pinnedRequest
		want     string
	}{
		{"permissions", hs.Permissions, `"wildcard":false`},
		{"holders-common", hs.HoldersCommon, `{"principalId":"user-00000","principalType":"user","roles":["role-0"]}`},
		{"holders-rare", hs.HoldersRare, `{"data":[{"principalId":"user-zzzz","principalType":"user","roles":["role-8"]}]}`},
	} {
		b.Run(run.name, func(b *testing.B) {
			first := run.requests[0]
			if got := benchRequest(b, first.Method, hs.URL+first.Path, first.Key, ""); !strings.Contains(string(got), run.want) {
				b.Fatalf("%s answered %s, want it to contain %s", first.Path, got, run.want)
			}
			var next atomic.Int64
			res := load(b, func() *http.Request { return run.requests[int(next.Add(1))%len(run.requests)].request(hs.URL) })
			results[run.name] = res
			reportPinned(b, backend, run.name, res, 1, results)
			b.ReportMetric(float64(res.P95.Microseconds())/1000, "p95-ms")
		})
	}

	sets := []struct {
		tag     string
		senders []pinnedSender
	}{{"", hs.Senders[:1]}, {"/projects=" + strconv.Itoa(len(hs.Senders)), hs.Senders}}
	for _, set := range sets {
		for _, batch := range []int{0, usageBatchSize} {
			kind, events := "single", 1
			// The first answer of a new run, of its replay and of a duplicate run.
			created, replayed := `{"data":{"accepted":true,"duplicate":false,"id":"uev_`, `{"data":{"accepted":false,"duplicate":true,"id":"uev_`
			createdStatus := http.StatusCreated
			if batch > 0 {
				kind, events, createdStatus = "batch", batch, http.StatusOK
				created, replayed = `{"data":{"accepted":100,"duplicates":0,"results":[`, `{"data":{"accepted":0,"duplicates":100,"results":[`
			}
			prefix := kind + set.tag
			fresh := newPinnedIngest(hs.URL, set.senders, prefix, batch, nil)
			name := "ingest/" + kind + "/new" + set.tag
			ok := b.Run(name, func(b *testing.B) {
				checkIngest(b, fresh.target(), createdStatus, created)
				// The same first request again: the replay of sender 0's first events.
				known := make([]int, len(set.senders))
				known[0] = events
				checkIngest(b, newPinnedIngest(hs.URL, set.senders, prefix, batch, known).target(), http.StatusOK, replayed)
				res := load(b, fresh.target)
				results[name] = res
				reportPinnedIngest(b, backend, name, res, events)
			})
			if !ok {
				continue
			}
			again := newPinnedIngest(hs.URL, set.senders, prefix, batch, fresh.sent())
			newName, name := name, "ingest/"+kind+"/duplicate"+set.tag
			b.Run(name, func(b *testing.B) {
				if fresh.sent()[0] == 0 {
					b.Fatalf("%s replays the events of %s: run that too", name, newName)
				}
				checkIngest(b, again.target(), http.StatusOK, replayed)
				res := load(b, again.target)
				results[name] = res
				reportPinnedIngest(b, backend, name, res, events)
			})
		}
	}
	if backend != string(store.Postgres) {
		return nil, "the raw limit is PostgreSQL's (pgbench)"
	}
	var raw pgbenchRaw
	note := ""
	b.Run("pgbench-raw", func(b *testing.B) {
		for b.Loop() {
			raw, note = pinnedPgbench(b, duration)
		}
		for _, run := range pgbenchRawRuns {
			if raw[run] > 0 {
				b.ReportMetric(raw[run], run+"-events/s")
			}
		}
	})
	return raw, note
}

// pinnedIngest makes the requests of one pinned ingest run: single events (batch 0) or
// batches of batch events, with ids "<prefix>-<n>" numbered n = 0, 1, 2, … per sender (new
// events), or n modulo known[s] for sender s (duplicates of an earlier run with the same
// prefix, known its sent()). Request r goes to sender r modulo len(senders), with its key.
// target is safe for concurrent use.
type pinnedIngest struct {
	base    string
	senders []pinnedSender
	prefix  string
	batch   int
	known   []int
	next    []atomic.Int64
	count   atomic.Int64
}

func newPinnedIngest(base string, senders []pinnedSender, prefix string, batch int, known []int) *pinnedIngest {
	return &pinnedIngest{base: base, senders: senders, prefix: prefix, batch: batch, known: known,
		next: make([]atomic.Int64, len(senders))}
}

// target returns the run's next request.
func (g *pinnedIngest) target() *http.Request {
	s := int(g.count.Add(1)-1) % len(g.senders)
	snd := g.senders[s]
	k := max(g.batch, 1)
	first := int(g.next[s].Add(int64(k))) - k // this request's k event numbers, reserved at once
	id := func(i int) int {
		n := first + i
		if s < len(g.known) && g.known[s] > 0 {
			n %= g.known[s]
		}
		return n
	}
	event := func(buf []byte, n int) []byte {
		return fmt.Appendf(buf, `{"eventId":"%s-%d","subjectId":"load_%05d","meter":"api_call","quantity":1`, g.prefix, n, n%5000)
	}
	path := "/usage-events"
	var body []byte
	if g.batch == 0 {
		body = append(event(body, id(0)), `,"environmentId":"`+snd.Env+`"}`...)
	} else {
		path += "/batch"
		body = append(body, `{"environmentId":"`+snd.Env+`","events":[`...)
		for i := range g.batch {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(event(body, id(i)), '}')
		}
		body = append(body, "]}"...)
	}
	req, _ := http.NewRequest(http.MethodPost, g.base+"/api/v1/projects/"+snd.Project+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", snd.Key)
	return req
}

// sent is how many event numbers each sender has used so far (known, for a duplicate run).
func (g *pinnedIngest) sent() []int {
	out := make([]int, len(g.next))
	for i := range g.next {
		out[i] = int(g.next[i].Load())
	}
	return out
}

// checkIngest sends req over the network and checks its status and that its answer starts with want.
func checkIngest(b *testing.B, req *http.Request, status int, want string) {
	b.Helper()
	got, raw := roundTrip(b, req)
	if got != status || !strings.HasPrefix(string(raw), want) {
		b.Fatalf("POST %s: %d %s; want %d starting %s", req.URL.Path, got, raw, status, want)
	}
}

// reportPinnedIngest logs and reports the pinned ingest run named run, events events a request.
func reportPinnedIngest(b *testing.B, backend, run string, res loadResult, events int) {
	b.Helper()
	b.Logf("%s %s: %s; %.0f events/s, server child %v CPU per event", backend, run, res,
		res.RPS*float64(events), serverCPUPerEvent(res, events))
	if res.Errors > 0 {
		b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
	}
	if res.Requests == 0 {
		return
	}
	n := float64(res.Requests * events)
	b.ReportMetric(res.RPS*float64(events), "events/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(micros(serverCPUPerEvent(res, events)), "srv-cpu-µs/event")
	b.ReportMetric(micros(res.CPU)/n, "gen-cpu-µs/event")
	if res.DBCPU > 0 {
		b.ReportMetric(micros(res.DBCPU)/n, "pg-cpu-µs/event")
	}
}

// serverCPUPerEvent is the server child's CPU time per event of res, events a request.
func serverCPUPerEvent(res loadResult, events int) time.Duration {
	if len(res.ReaderCPU) < 2 || res.Requests == 0 {
		return 0
	}
	return res.ReaderCPU[1] / time.Duration(res.Requests*events)
}

// pgbenchRaw is the raw limits tools/pgbench-usage.sh prints, events/s by run (pgbenchRawRuns).
type pgbenchRaw map[string]float64

// pgbenchRawRuns are the runs of tools/pgbench-usage.sh.
var pgbenchRawRuns = []string{"single-new", "single-duplicate", "batch100-new", "durable-single-new", "durable-batch100-new"}

// pinnedPgbench runs tools/pgbench-usage.sh pinned to the load core (taskset) for duration in
// whole seconds (at least 1) a run, against GATEHOUSE_TEST_POSTGRES_URL's database, and returns
// its raw limits. Without pgbench or psql it returns nil and a note saying so; a script that
// fails, or prints no rate for a run, fails b.
func pinnedPgbench(b *testing.B, duration time.Duration) (pgbenchRaw, string) {
	for _, tool := range []string{"pgbench", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, tool + " is not installed: no raw limit in this sitting"
		}
	}
	secs := max(int(math.Ceil(duration.Seconds())), 1)
	cmd := exec.Command("taskset", "-c", strconv.Itoa(pinnedLoadCPU), "../tools/pgbench-usage.sh")
	cmd.Env = append(os.Environ(), "GATEHOUSE_BENCH_DURATION="+strconv.Itoa(secs))
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Errorf("tools/pgbench-usage.sh: %v; it printed:\n%s", err, out)
		return nil, "tools/pgbench-usage.sh failed"
	}
	raw, err := parsePgbenchRaw(string(out))
	if err != nil {
		b.Error(err)
		return nil, "tools/pgbench-usage.sh printed no rates"
	}
	return raw, fmt.Sprintf("taskset -c %d, %d s a run", pinnedLoadCPU, secs)
}

// parsePgbenchRaw reads the "pgbench raw limit <run> <rate> events/s …" lines of out. Every run
// of pgbenchRawRuns must be there with a rate above 0 (the script prints 0 for a pgbench that
// failed).
func parsePgbenchRaw(out string) (pgbenchRaw, error) {
	raw := pgbenchRaw{}
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := strings.CutPrefix(line, "pgbench raw limit ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 3 || f[2] != "events/s" {
			return nil, fmt.Errorf("pgbench: unreadable line %q", line)
		}
		rate, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("pgbench: line %q: %w", line, err)
		}
		raw[f[0]] = rate
	}
	for _, run := range pgbenchRawRuns {
		if raw[run] <= 0 {
			return nil, fmt.Errorf("pgbench: no rate above 0 for %s in:\n%s", run, out)
		}
	}
	return raw, nil
}

// pinnedMoreSummary states one backend's lookup and ingest figures against the targets:
// effective permissions p99 ≤ 10 ms, who-holds first page p99 ≤ 20 ms; single new events at
// least 50% of pgbench single-new (about 7,000/s), duplicates at least as fast as new events,
// batches at least 40% of pgbench batch100-new; beside each new-event rate, its share of the
// durable shape's limit (durable-single-new, durable-batch100-new), which has no target, and
// the CPU the event cost in all (load generator, server and PostgreSQL) against the budget its
// target leaves on the machine's cores: cores / (target share × pgbench's rate). A path that
// spends more than that cannot meet its target even with every core busy. raw is nil when
// there is no raw limit (note says why); otherwise note says how it ran.
func pinnedMoreSummary(backend string, r map[string]loadResult, raw pgbenchRaw, note string, cores int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s pinned lookups and usage ingest (16 connections):\n", backend)
	for _, l := range []struct{ name, what, target string }{
		{"permissions", "effective permissions", "10ms"},
		{"holders-common", "who-holds first page, common", "20ms"},
		{"holders-rare", "who-holds first page, rare", "20ms"},
	} {
		res := r[l.name]
		fmt.Fprintf(&s, "  %s: p50 %v, p95 %v, p99 %v (target ≤ %s), %.0f/s, server CPU %v", l.what,
			us(res.P50), us(res.P95), us(res.P99), l.target, res.RPS, serverCPUPerRequest(res))
		if res.DBCPU > 0 {
			fmt.Fprintf(&s, ", PostgreSQL CPU %v", res.DBCPU/time.Duration(res.Requests))
		}
		s.WriteString(" per request\n")
	}
	if raw == nil {
		fmt.Fprintf(&s, "  pgbench raw limit: none (%s)\n", note)
	} else {
		fmt.Fprintf(&s, "  pgbench raw limit: single-new %.0f/s, single-duplicate %.0f/s, batch100-new %.0f events/s; "+
			"of the durable shape (ids and partitioned events): durable-single-new %.0f/s, durable-batch100-new %.0f events/s (%s)\n",
			raw["single-new"], raw["single-duplicate"], raw["batch100-new"], raw["durable-single-new"], raw["durable-batch100-new"], note)
	}
	// share states events/s against the target, percent of pgbench's run (about: its usual rate).
	share := func(events float64, run string, percent int, about string) string {
		if raw[run] <= 0 {
			return fmt.Sprintf("(target ≥ %d%% of pgbench %s%s)", percent, run, about)
		}
		return fmt.Sprintf("= %.1f%% of pgbench %s %.0f/s (target ≥ %d%%%s)", 100*events/raw[run], run, raw[run], percent, about)
	}
	// durable states events/s as a share of the limit of the durable shape (no target: it
	// tells how much of the gap is the shape and how much the request path and the rollups).
	durable := func(events float64, run string) string {
		if raw[run] <= 0 {
			return ""
		}
		return fmt.Sprintf(", %.1f%% of %s %.0f/s", 100*events/raw[run], run, raw[run])
	}
	// budget states res's CPU per event in all against what percent of pgbench's run allows.
	budget := func(res loadResult, events int, run string, percent int) string {
		if raw[run] <= 0 || res.Requests == 0 || len(res.ReaderCPU) < 2 {
			return ""
		}
		all := (res.CPU + res.ReaderCPU[1] + res.DBCPU) / time.Duration(res.Requests*events)
		allowed := time.Duration(float64(cores) * float64(time.Second) / (float64(percent) / 100 * raw[run]))
		return fmt.Sprintf("; CPU in all %v per event, the target's budget on %d cores %v", us(all), cores, us(allowed))
	}
	eventsPer := map[string]int{"single": 1, "batch": usageBatchSize}
	// targets names, per kind of call, the pgbench run its new events are held against, the
	// durable shape's run, the target's share and pgbench's usual rate (about).
	targets := map[string]struct {
		run, durable string
		percent      int
		about        string
	}{
		"single": {"single-new", "durable-single-new", 50, ", ~7,000/s"},
		"batch":  {"batch100-new", "durable-batch100-new", 40, ""},
	}
	for _, tag := range []string{"", "/projects=" + strconv.Itoa(usageProjects)} {
		rate := func(kind, age string) float64 { return r["ingest/"+kind+"/"+age+tag].RPS * float64(eventsPer[kind]) }
		for _, kind := range []string{"single", "batch"} {
			for _, age := range []string{"new", "duplicate"} {
				name := "ingest/" + kind + "/" + age + tag
				res, events := r[name], eventsPer[kind]
				target := fmt.Sprintf("= %.2f× new (target ≥ 1×)", ratioOrZero(rate(kind, age), rate(kind, "new")))
				if age == "new" {
					t := targets[kind]
					target = share(rate(kind, age), t.run, t.percent, t.about) + durable(rate(kind, age), t.durable) +
						budget(res, events, t.run, t.percent)
				}
				fmt.Fprintf(&s, "  %s: %.0f events/s %s; p50 %v, p99 %v; server CPU %v", name, rate(kind, age), target,
					us(res.P50), us(res.P99), serverCPUPerEvent(res, events))
				if res.DBCPU > 0 {
					fmt.Fprintf(&s, ", PostgreSQL CPU %v", dbCPUPerEvent(res, events))
				}
				s.WriteString(" per event\n")
			}
		}
	}
	return strings.TrimSuffix(s.String(), "\n")
}

// us is d rounded to the microsecond.
func us(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// dbCPUPerEvent is PostgreSQL's CPU time per event of res, events a request (0 on SQLite).
func dbCPUPerEvent(res loadResult, events int) time.Duration {
	if res.Requests == 0 {
		return 0
	}
	return res.DBCPU / time.Duration(res.Requests*events)
}

// ratioOrZero is a/b, or 0 when b is 0.
func ratioOrZero(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
