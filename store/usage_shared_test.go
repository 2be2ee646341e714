package store

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUsageSharedFlushProjects: a flush of single events of three projects, queued interleaved,
// is recorded together (ingestShared: one statement on PostgreSQL, one call of the batch path
// in one transaction on SQLite) and every waiter gets its own result: the same event id is new
// in each project, a replay of a stored event and one earlier in the flush report the stored
// id, an event with an expired key is refused; then one call (ingestPostgres, or tx.ingestUsage
// on SQLite) takes interleaved events of the three projects. Every rollup row is written out by
// hand. On both databases.
func TestUsageSharedFlushProjects(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		clock := &testClock{now: time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC)}
		testUsageSharedFlushProjects(t, openUsageSQLite(t, clock), clock)
	})
	t.Run("postgres", func(t *testing.T) {
		clock := &testClock{now: time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC)}
		testUsageSharedFlushProjects(t, openUsagePostgres(t, clock), clock)
	})
}

// openUsageSQLite opens a new migrated SQLite file on clock.
func openUsageSQLite(t *testing.T, clock *testClock) *Store {
	t.Helper()
	return openMigrated(t, "sqlite:"+filepath.Join(t.TempDir(), "gatehouse.db"), clock)
}

func testUsageSharedFlushProjects(t *testing.T, s *Store, clock *testClock) {
	ctx := t.Context()

	// Keys of a project of their own: the statement confirms a key's state, not its project.
	newKey := func(c string, expiresAt *time.Time) *APIKey {
		sum := sha256.Sum256([]byte(NewID("secret")))
		return &APIKey{PublicID: strings.Repeat(c, APIKeyPublicIDLen), SecretHash: sum[:], ExpiresAt: expiresAt}
	}
	past := clock.Now().Add(-time.Minute)
	live, expired := newKey("l", nil), newKey("e", &past)
	err := s.InTx(ctx, func(tx *Tx) error {
		_, p, err := ownedProject(ctx, tx, "shared-flush@example.com", "keys")
		if err != nil {
			return err
		}
		sa := ServiceAccount{ProjectID: p.ID, Name: "ingest", Scopes: []string{"usage:write"}}
		if err := tx.CreateServiceAccount(ctx, &sa, live); err != nil {
			return err
		}
		return tx.AddAPIKey(ctx, p.ID, sa.ID, expired)
	})
	if err != nil {
		t.Fatal(err)
	}

	d1, d2 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)
	ev := func(project, eventID, id, env, subject, meter string, quantity float64, at time.Time, key string) UsageEvent {
		e := UsageEvent{ProjectID: project, EventID: eventID, ID: id, EnvironmentID: env, SubjectID: subject, Meter: meter,
			Quantity: quantity, Timestamp: at, KeyID: key}
		if err := prepareUsageEvent(&e, clock.Now()); err != nil {
			t.Fatal(err)
		}
		return e
	}
	check := func(what string, got, want []IngestResult) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	stored := func(id string) IngestResult { return IngestResult{ID: id} }
	replay := func(id string) IngestResult { return IngestResult{ID: id, Duplicate: true} }
	refused := IngestResult{KeyRefused: true}

	// Stored before the flush, in prj_b.
	pre, err := s.ingestPrepared(ctx, []UsageEvent{ev("prj_b", "x", "uev_pre", "env_1", "s1", "m1", 5, d1.Add(9*time.Hour), "")})
	if err != nil {
		t.Fatal(err)
	}
	check("before", pre, []IngestResult{stored("uev_pre")})

	// The flush, queued interleaved: grouped by project (A: 1 4 7, B: 2 5 8, C: 3 6).
	queued := []UsageEvent{
		ev("prj_a", "e1", "uev_a1", "env_1", "s1", "m1", 1, d1.Add(10*time.Hour), ""),
		ev("prj_b", "e1", "uev_b1", "env_1", "s1", "m1", 2, d1.Add(11*time.Hour), live.ID),
		ev("prj_c", "e1", "uev_c1", "env_1", "s2", "m2", 3, d2.Add(1*time.Hour), expired.ID),
		ev("prj_a", "e2", "uev_a2", "env_1", "s1", "m2", 4, d1.Add(12*time.Hour), ""),
		ev("prj_b", "x", "uev_bx", "env_1", "s1", "m1", 9, d1.Add(14*time.Hour), ""),
		ev("prj_c", "e2", "uev_c2", "env_1", "s2", "m2", 6, d2.Add(2*time.Hour), ""),
		ev("prj_a", "e1", "uev_a1b", "env_1", "s1", "m1", 9, d1.Add(15*time.Hour), ""),
		ev("prj_b", "e3", "uev_b3", "env_2", "s1", "m1", 7, d2.Add(3*time.Hour), live.ID),
	}
	batch := make([]*pendingUsage, len(queued))
	for i, e := range queued {
		batch[i] = &pendingUsage{event: e, done: make(chan usageOutcome, 1)}
	}
	s.flushUsage(batch)
	flushed := make([]IngestResult, len(batch))
	for i, p := range batch {
		out := <-p.done
		if out.err != nil {
			t.Fatalf("event %d: %v", i, out.err)
		}
		flushed[i] = out.result
	}
	check("flush", flushed, []IngestResult{stored("uev_a1"), stored("uev_b1"), refused, stored("uev_a2"),
		replay("uev_pre"), stored("uev_c2"), replay("uev_a1"), stored("uev_b3")})

	// One call of interleaved projects: the refused event is new now, a replay, a new subject.
	interleaved := []UsageEvent{
		ev("prj_c", "e1", "uev_c1b", "env_1", "s2", "m2", 3, d2.Add(1*time.Hour), ""),
		ev("prj_a", "e1", "uev_a1c", "env_1", "s1", "m1", 9, d1.Add(16*time.Hour), ""),
		ev("prj_b", "e2", "uev_b2", "env_1", "s3", "m1", 1, d1.Add(13*time.Hour), live.ID),
	}
	var again []IngestResult
	if s.dialect == Postgres {
		again, err = s.ingestPostgres(ctx, interleaved)
	} else {
		err = s.InTx(ctx, func(tx *Tx) error {
			var err error
			again, err = tx.ingestUsage(ctx, interleaved, clock.Now())
			return err
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	check("interleaved call", again, []IngestResult{stored("uev_c1b"), replay("uev_a1"), stored("uev_b2")})

	// The stored rows, each as one text: a time as MM-DD HH:MI in UTC, a number as an integer.
	at, ids := `to_char(%s AT TIME ZONE 'UTC', 'MM-DD HH24:MI')`, "usage_event_ids"
	if s.dialect == SQLite {
		at, ids = `replace(substr(%s, 6, 11), 'T', ' ')`, "usage_events" // its primary key detects replays
	}
	for _, c := range []struct {
		table, query string
		want         []string
	}{
		{ids, `SELECT concat_ws(' ', project_id, event_id, id) FROM ` + ids, []string{
			"prj_a e1 uev_a1", "prj_a e2 uev_a2", "prj_b e1 uev_b1", "prj_b e2 uev_b2", "prj_b e3 uev_b3",
			"prj_b x uev_pre", "prj_c e1 uev_c1b", "prj_c e2 uev_c2"}},
		{"usage_events", `SELECT concat_ws(' ', project_id, event_id, id, subject_id, meter, CAST(quantity AS INTEGER)) FROM usage_events`, []string{
			"prj_a e1 uev_a1 s1 m1 1", "prj_a e2 uev_a2 s1 m2 4", "prj_b e1 uev_b1 s1 m1 2", "prj_b e2 uev_b2 s3 m1 1",
			"prj_b e3 uev_b3 s1 m1 7", "prj_b x uev_pre s1 m1 5", "prj_c e1 uev_c1b s2 m2 3", "prj_c e2 uev_c2 s2 m2 6"}},
		{"usage_daily", `SELECT concat_ws(' ', project_id, subject_id, day, meter, environment_id, events, CAST(quantity AS INTEGER)) FROM usage_daily`, []string{
			"prj_a s1 2026-04-01 m1 env_1 1 1", "prj_a s1 2026-04-01 m2 env_1 1 4", "prj_b s1 2026-04-01 m1 env_1 2 7",
			"prj_b s1 2026-04-02 m1 env_2 1 7", "prj_b s3 2026-04-01 m1 env_1 1 1", "prj_c s2 2026-04-02 m2 env_1 2 9"}},
		{"usage_subject_days", `SELECT concat_ws(' ', project_id, subject_id, day, environment_id, events) FROM usage_subject_days`, []string{
			"prj_a s1 2026-04-01 env_1 2", "prj_b s1 2026-04-01 env_1 2", "prj_b s1 2026-04-02 env_2 1",
			"prj_b s3 2026-04-01 env_1 1", "prj_c s2 2026-04-02 env_1 2"}},
		{"usage_subjects", `SELECT concat_ws(' ', project_id, subject_id, environment_id, ` + strings.ReplaceAll(at, "%s", "first_seen") + `,
			` + strings.ReplaceAll(at, "%s", "last_seen") + `, events, CAST(quantity AS INTEGER)) FROM usage_subjects`, []string{
			"prj_a s1 env_1 04-01 10:00 04-01 12:00 2 5", "prj_b s1 env_1 04-01 09:00 04-01 11:00 2 7",
			"prj_b s1 env_2 04-02 03:00 04-02 03:00 1 7", "prj_b s3 env_1 04-01 13:00 04-01 13:00 1 1",
			"prj_c s2 env_1 04-02 01:00 04-02 02:00 2 9"}},
		{"usage_subject_totals", `SELECT concat_ws(' ', project_id, subject_id, ` + strings.ReplaceAll(at, "%s", "first_seen") + `,
			` + strings.ReplaceAll(at, "%s", "last_seen") + `, events, CAST(quantity AS INTEGER), CAST(revenue AS INTEGER)) FROM usage_subject_totals`, []string{
			"prj_a s1 04-01 10:00 04-01 12:00 2 5 0", "prj_b s1 04-01 09:00 04-02 03:00 3 14 0",
			"prj_b s3 04-01 13:00 04-01 13:00 1 1 0", "prj_c s2 04-02 01:00 04-02 02:00 2 9 0"}},
		// Shards are drawn per call: their sums.
		{"usage_totals", `SELECT concat_ws(' ', project_id, day, environment_id, meter, sum(events), CAST(sum(quantity) AS INTEGER), sum(new_subjects))
			FROM usage_totals GROUP BY project_id, day, environment_id, meter`, []string{
			"prj_a 2026-04-01 env_1 m1 1 1 1", "prj_a 2026-04-01 env_1 m2 1 4 0", "prj_b 2026-04-01 env_1 m1 3 8 2",
			"prj_b 2026-04-02 env_2 m1 1 7 1", "prj_c 2026-04-02 env_1 m2 2 9 1"}},
	} {
		var got []string
		if err := s.writer.SelectContext(ctx, &got, c.query); err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		slices.Sort(got) // byte order, as PostgreSQL's "C" collation
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.table, got, c.want)
		}
	}
}

// TestUsageSharedFlushLarge: a flush as large as maxUsageFlush, MaxUsageBatch events from each
// of four projects, is recorded on SQLite in calls small enough for its parameter limit, and
// each group gets its own results, in order.
func TestUsageSharedFlushLarge(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC)}
	s := openUsageSQLite(t, clock)
	groups := make([][]UsageEvent, maxUsageFlush/MaxUsageBatch)
	for g := range groups {
		for i := range MaxUsageBatch {
			e := UsageEvent{ProjectID: fmt.Sprintf("prj_%d", g), EventID: fmt.Sprintf("e%d", i), ID: fmt.Sprintf("uev_%d_%d", g, i),
				EnvironmentID: "env_1", SubjectID: fmt.Sprintf("s%d", i%7), Meter: "m1", Quantity: 1, Timestamp: clock.Now().Add(-time.Hour)}
			if err := prepareUsageEvent(&e, clock.Now()); err != nil {
				t.Fatal(err)
			}
			groups[g] = append(groups[g], e)
		}
	}
	all, err := s.ingestShared(t.Context(), groups)
	if err != nil {
		t.Fatal(err)
	}
	for g := range groups {
		if len(all[g]) != MaxUsageBatch {
			t.Fatalf("group %d: %d results, want %d", g, len(all[g]), MaxUsageBatch)
		}
		for i, r := range all[g] {
			if want := (IngestResult{ID: fmt.Sprintf("uev_%d_%d", g, i)}); r != want {
				t.Fatalf("group %d event %d: %+v, want %+v", g, i, r, want)
			}
		}
	}
	var stored, events int
	if err := s.writer.GetContext(t.Context(), &stored, `SELECT count(*) FROM usage_events`); err != nil {
		t.Fatal(err)
	}
	if err := s.writer.GetContext(t.Context(), &events, `SELECT sum(events) FROM usage_totals`); err != nil {
		t.Fatal(err)
	}
	if stored != 4000 || events != 4000 {
		t.Errorf("stored %d events, totals count %d; want 4000 and 4000", stored, events)
	}
}
