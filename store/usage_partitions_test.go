package store

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
)

// testClock is a settable clock (storetest.Clock cannot be imported here).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// openUsagePostgres opens a fresh migrated PostgreSQL schema on clock, or skips the test when
// GATEHOUSE_TEST_POSTGRES_URL is unset (partitions exist only on PostgreSQL).
func openUsagePostgres(t *testing.T, clock *testClock, opts ...Option) *Store {
	t.Helper()
	dbURL := postgresTestURL(t)
	if dbURL == "" {
		t.Skip("GATEHOUSE_TEST_POSTGRES_URL is unset: usage partitions are PostgreSQL's")
	}
	return openMigrated(t, dbURL, clock, opts...)
}

// openMigrated opens dbURL on clock, migrated, and closes it when the test ends.
func openMigrated(t *testing.T, dbURL string, clock *testClock, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), dbURL, append([]Option{WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// partitionOf returns the table that holds event eventID.
func partitionOf(t *testing.T, s *Store, eventID string) string {
	t.Helper()
	var name string
	if err := s.writer.Get(&name, `SELECT tableoid::regclass::text FROM usage_events WHERE event_id = $1`, eventID); err != nil {
		t.Fatalf("partition of %s: %v", eventID, err)
	}
	return name
}

func usagePartitions(t *testing.T, s *Store) []string {
	t.Helper()
	var names []string
	if err := s.writer.Select(&names, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'usage_events'::regclass ORDER BY c.relname`); err != nil {
		t.Fatal(err)
	}
	return names
}

func ingestOne(t *testing.T, s *Store, e UsageEvent) IngestResult {
	t.Helper()
	if e.ProjectID == "" {
		e.ProjectID, e.EnvironmentID, e.SubjectID, e.Meter, e.Quantity = "prj_p", "env_p", "ada", "api_call", 1
	}
	r, err := s.IngestUsage(t.Context(), []UsageEvent{e})
	if err != nil {
		t.Fatalf("IngestUsage(%s): %v", e.EventID, err)
	}
	return r[0]
}

// TestUsagePartitions: Migrate creates the month's partition and the two after it; an event
// lands in the partition of its received_at month whatever its (backdated) timestamp; an event
// received outside every partition lands in the default one and is moved into its month's
// partition when the maintenance creates it.
func TestUsagePartitions(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)}
	s := openUsagePostgres(t, clock)
	if got, want := usagePartitions(t, s), []string{"usage_events_default", "usage_events_p202603", "usage_events_p202604", "usage_events_p202605"}; !slices.Equal(got, want) {
		t.Fatalf("partitions after Migrate = %v, want %v", got, want)
	}
	ingestOne(t, s, UsageEvent{EventID: "now"})
	ingestOne(t, s, UsageEvent{EventID: "backdated", Timestamp: time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC)})
	ingestOne(t, s, UsageEvent{EventID: "future", ReceivedAt: time.Date(2026, 7, 10, 0, 0, 0, 0, time.UTC)})
	for id, want := range map[string]string{"now": "usage_events_p202603", "backdated": "usage_events_p202603", "future": "usage_events_default"} {
		if got := partitionOf(t, s, id); got != want {
			t.Errorf("event %s is in %s, want %s", id, got, want)
		}
	}
	clock.Set(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	rep, err := s.MaintainUsage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"usage_events_p202606", "usage_events_p202607", "usage_events_p202608"}; !slices.Equal(rep.Created, want) {
		t.Errorf("created %v, want %v", rep.Created, want)
	}
	if got := partitionOf(t, s, "future"); got != "usage_events_p202607" {
		t.Errorf("event future is in %s after the maintenance, want usage_events_p202607", got)
	}
	// A second run (another replica) finds nothing to do.
	if rep, err := s.MaintainUsage(t.Context()); err != nil || len(rep.Created) != 0 {
		t.Errorf("second MaintainUsage = %+v, %v; want nothing created", rep, err)
	}
}

// TestUsageReplayWindow: a replay is recognised across partitions (the original received in
// March, the replay in April) for the whole replay window, with the original id; once the
// maintenance has run after the window, the same eventId is a new event.
func TestUsageReplayWindow(t *testing.T) {
	t0 := time.Date(2026, 3, 20, 9, 0, 0, 0, time.UTC)
	clock := &testClock{now: t0}
	s := openUsagePostgres(t, clock, WithUsageReplayWindow(30*24*time.Hour))
	first := ingestOne(t, s, UsageEvent{EventID: "e1"})
	if first.Duplicate || first.ID == "" {
		t.Fatalf("first ingest = %+v", first)
	}
	clock.Set(t0.Add(30*24*time.Hour - time.Minute)) // 19 April, another partition
	if _, err := s.MaintainUsage(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := ingestOne(t, s, UsageEvent{EventID: "e1"}); !r.Duplicate || r.ID != first.ID {
		t.Errorf("replay within the window = %+v, want duplicate with id %s", r, first.ID)
	}
	// A batch replay in the same window too.
	r, err := s.IngestUsage(t.Context(), []UsageEvent{
		{ProjectID: "prj_p", EnvironmentID: "env_p", SubjectID: "ada", Meter: "api_call", Quantity: 1, EventID: "e1"},
		{ProjectID: "prj_p", EnvironmentID: "env_p", SubjectID: "ada", Meter: "api_call", Quantity: 1, EventID: "e2"}})
	if err != nil || !r[0].Duplicate || r[0].ID != first.ID || r[1].Duplicate {
		t.Errorf("batch replay within the window = %+v, %v", r, err)
	}
	clock.Set(t0.Add(30*24*time.Hour + time.Minute))
	rep, err := s.MaintainUsage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExpiredIDs != 1 {
		t.Errorf("expired ids = %d, want 1 (e1; e2 is younger)", rep.ExpiredIDs)
	}
	if r := ingestOne(t, s, UsageEvent{EventID: "e1"}); r.Duplicate || r.ID == first.ID {
		t.Errorf("replay after the window = %+v, want a new event", r)
	}
}

// TestUsageRetention: with a retention of 400 days the maintenance drops a month's partition
// once all of it is older than the retention, and old rows of the default partition; the
// rollups keep that month's history.
func TestUsageRetention(t *testing.T) {
	t0 := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)
	clock := &testClock{now: t0}
	s := openUsagePostgres(t, clock, WithUsageRetention(400*24*time.Hour))
	ingestOne(t, s, UsageEvent{EventID: "jan"})
	ingestOne(t, s, UsageEvent{EventID: "stray", ReceivedAt: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)})
	count := func() (n int) {
		if err := s.writer.Get(&n, `SELECT count(*) FROM usage_events`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The January partition ends on 1 February 2026, which is 400 days before 8 March 2027.
	clock.Set(time.Date(2027, 3, 5, 0, 0, 0, 0, time.UTC))
	rep, err := s.MaintainUsage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Dropped) != 0 || rep.ExpiredDefault != 1 || count() != 1 {
		t.Fatalf("maintenance on 5 March 2027 = %+v with %d events; want nothing dropped, the stray row expired, 1 event", rep, count())
	}
	clock.Set(time.Date(2027, 3, 8, 0, 0, 0, 0, time.UTC))
	if rep, err = s.MaintainUsage(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Dropped, []string{"usage_events_p202601"}) || count() != 0 {
		t.Fatalf("maintenance on 8 March 2027 = %+v with %d events; want usage_events_p202601 dropped, 0 events", rep, count())
	}
	points, err := s.UsageActivity(t.Context(), AnalyticsScope{ProjectID: "prj_p"}, t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 1 || points[0].Events != 1 {
		t.Errorf("activity of 15 January 2026 after the drop = %+v, want 1 event", points)
	}
}

// conversionEvents is the size of the legacy table TestUsageConversion converts:
// GATEHOUSE_TEST_USAGE_CONVERSION_EVENTS (.ci/run sets 1000000), else 30,000.
func conversionEvents(t *testing.T) int {
	if v := os.Getenv("GATEHOUSE_TEST_USAGE_CONVERSION_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("GATEHOUSE_TEST_USAGE_CONVERSION_EVENTS=%q: want a whole number of at least 10", v)
		}
		return n
	}
	return 30_000
}

// TestUsageConversion: an unpartitioned usage_events of N events (the schema before migration 0032,
// filled with generate_series) is converted by migration 0032 and ConvertUsageBatch. While the
// conversion runs, new events are ingested and a legacy event's replay gets its original id; a
// batch interrupted by a cancelled context moves nothing; a new store (a restart) resumes from
// the committed cursor; at the end every event is in the partitioned table exactly once.
func TestUsageConversion(t *testing.T) {
	dbURL := postgresTestURL(t)
	if dbURL == "" {
		t.Skip("GATEHOUSE_TEST_POSTGRES_URL is unset: usage partitions are PostgreSQL's")
	}
	n := conversionEvents(t)
	ctx := t.Context()
	clock := &testClock{now: time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)}
	s, err := Open(ctx, dbURL, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.migrate(ctx, "migrate to", func(m *migrate.Migrate) error { return m.Migrate(31) }); err != nil {
		t.Fatal(err)
	}
	// N events of two projects received over the 400 days before the clock, a minute apart
	// per project id … enough months to need many partitions.
	start := time.Now()
	if _, err := s.writer.Exec(`INSERT INTO usage_events (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
		SELECT 'prj_' || (i % 2), 'ev-' || i, 'uev_legacy_' || i, 'env_a', 'sub_' || (i % 1000), 'api_call', i % 7,
			$2::timestamptz - (i % 576000) * interval '1 minute', $2::timestamptz - (i % 576000) * interval '1 minute',
			CASE WHEN i % 10 = 0 THEN '{"k":1}' END
		FROM generate_series(1, $1::int) AS i`, n, clock.Now()); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d legacy events in %v", n, time.Since(start).Round(time.Millisecond))
	// The subject summary SubjectActivity needs (the rollups are not what this test is about).
	if _, err := s.writer.Exec(`INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity)
		VALUES ('prj_1', 'sub_1', 'env_a', $1, $1, 1, 1)`, clock.Now()); err != nil {
		t.Fatal(err)
	}
	var wantSum float64
	if err := s.writer.Get(&wantSum, `SELECT sum(quantity) FROM usage_events`); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.usageLegacy.Load() {
		t.Fatal("after migration 0032 the store does not see usage_events_legacy")
	}

	// During the conversion: a replay of a legacy event, and a new event.
	if r := ingestOne(t, s, UsageEvent{ProjectID: "prj_1", EnvironmentID: "env_a", SubjectID: "sub_1", Meter: "api_call", EventID: "ev-1"}); !r.Duplicate || r.ID != "uev_legacy_1" {
		t.Errorf("replay of a legacy event = %+v, want duplicate uev_legacy_1", r)
	}
	// Legacy replays of two projects in one statement: the second statement looks each up in
	// its own project (ev-2 and ev-4 are prj_0's, ev-3 prj_1's).
	var replays []UsageEvent
	for _, e := range []UsageEvent{{ProjectID: "prj_0", EventID: "ev-2"}, {ProjectID: "prj_1", EventID: "ev-3"}, {ProjectID: "prj_0", EventID: "ev-4"}} {
		e.EnvironmentID, e.SubjectID, e.Meter = "env_a", "sub_1", "api_call"
		if err := prepareUsageEvent(&e, clock.Now()); err != nil {
			t.Fatal(err)
		}
		replays = append(replays, e)
	}
	replayed, err := s.ingestPostgres(ctx, replays)
	if want := []IngestResult{{ID: "uev_legacy_2", Duplicate: true}, {ID: "uev_legacy_3", Duplicate: true}, {ID: "uev_legacy_4", Duplicate: true}}; err != nil || !reflect.DeepEqual(replayed, want) {
		t.Errorf("legacy replays of two projects = %+v, %v; want %+v", replayed, err, want)
	}
	if r := ingestOne(t, s, UsageEvent{EventID: "during"}); r.Duplicate {
		t.Errorf("new event during the conversion = %+v", r)
	}
	// The subject's recent events read the legacy table too: sub_1's are ev-1, ev-1001, …
	// (the seed's i % 1000 == 1), the newest first by timestamp, ties by event id descending.
	// Past 576,000 events the seed's minutes wrap: ev-576001 has ev-1's timestamp and sorts first.
	wantFirst := "ev-1"
	if n > 576000 {
		wantFirst = "ev-576001"
	}
	act, err := s.SubjectActivity(ctx, AnalyticsScope{ProjectID: "prj_1"}, "sub_1", clock.Now(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := min(n/1000, RecentSubjectEvents); len(act.Recent) != want || act.Recent[0].EventID != wantFirst {
		t.Fatalf("recent events of sub_1 during the conversion: %+v; want %d, %s first", act.Recent, want, wantFirst)
	}
	batch := max(n/8, 1)
	moved, done, err := s.ConvertUsageBatch(ctx, batch)
	if err != nil || done || moved != int64(batch) {
		t.Fatalf("first batch = %d, %v, %v; want %d moved", moved, done, err, batch)
	}
	// An interrupted batch (the context ends mid-statement) moves nothing.
	cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	_, _, err = s.ConvertUsageBatch(cctx, n)
	cancel()
	if err == nil {
		t.Log("the interrupted batch finished within 1 ms; nothing to check")
	}
	var cursorMoved int64
	if err := s.writer.Get(&cursorMoved, `SELECT moved FROM usage_events_conversion`); err != nil || cursorMoved != int64(batch) {
		t.Fatalf("cursor after the interruption = %d, %v; want %d", cursorMoved, err, batch)
	}
	// The cursor is the last event moved: in usage_event_ids, and no legacy row at or before it.
	var cursorOK bool
	if err := s.writer.Get(&cursorOK, `SELECT EXISTS (SELECT 1 FROM usage_event_ids i JOIN usage_events_conversion c USING (project_id, event_id))
		AND NOT EXISTS (SELECT 1 FROM usage_events_legacy l, usage_events_conversion c WHERE (l.project_id, l.event_id) <= (c.project_id, c.event_id))`); err != nil || !cursorOK {
		t.Fatalf("the cursor is not the last event moved (%v)", err)
	}
	// A restart: a new store resumes from the cursor.
	s2, err := Open(ctx, dbURL, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	total := int64(batch)
	start = time.Now()
	for {
		moved, done, err := s2.ConvertUsageBatch(ctx, 50_000)
		if err != nil {
			t.Fatal(err)
		}
		total += moved
		if done {
			break
		}
	}
	t.Logf("converted %d events in %v after the first batch", n, time.Since(start).Round(time.Millisecond))
	if total != int64(n) {
		t.Errorf("moved %d events in all, want %d", total, n)
	}
	var got struct {
		Events   int64   `db:"events"`
		Distinct int64   `db:"distinct_ids"`
		IDs      int64   `db:"ids"`
		Sum      float64 `db:"sum"`
		Legacy   bool    `db:"legacy"`
		Default  int64   `db:"in_default"`
	}
	if err := s2.writer.Get(&got, `SELECT (SELECT count(*) FROM usage_events) AS events,
		(SELECT count(DISTINCT (project_id, event_id)) FROM usage_events) AS distinct_ids,
		(SELECT count(*) FROM usage_event_ids) AS ids,
		(SELECT sum(quantity) FROM usage_events WHERE event_id <> 'during') AS sum,
		to_regclass('usage_events_legacy') IS NOT NULL AS legacy,
		(SELECT count(*) FROM usage_events_default) AS in_default`); err != nil {
		t.Fatal(err)
	}
	if want := int64(n + 1); got.Events != want || got.Distinct != want || got.IDs != want || got.Sum != wantSum || got.Legacy || got.Default != 0 {
		t.Errorf("after the conversion: %+v; want %d events, distinct and ids, sum %v, no legacy table, none in the default partition", got, want, wantSum)
	}
	// The replay after the conversion still gets the legacy id, on the store that had seen
	// the legacy table (its statement then falls back).
	if r := ingestOne(t, s, UsageEvent{ProjectID: "prj_1", EnvironmentID: "env_a", SubjectID: "sub_1", Meter: "api_call", EventID: "ev-1"}); !r.Duplicate || r.ID != "uev_legacy_1" {
		t.Errorf("replay of a converted event = %+v, want duplicate uev_legacy_1", r)
	}
}
