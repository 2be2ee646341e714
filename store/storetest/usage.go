package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Usage rows reference no other table, so these tests use literal project and environment ids.

func runUsage(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("IngestAndRollups", func(t *testing.T) { testUsageIngest(t, open) })
	t.Run("ConcurrentReplays", func(t *testing.T) { testUsageConcurrentReplays(t, open) })
	t.Run("ReplaysOfAnyEventID", func(t *testing.T) { testUsageReplayIDs(t, open) })
	t.Run("ConcurrentSingles", func(t *testing.T) { testUsageConcurrentSingles(t, open) })
	t.Run("AddRevenue", func(t *testing.T) { testAddRevenue(t, open) })
	t.Run("SubjectDirectory", func(t *testing.T) { testSubjectDirectory(t, open) })
	t.Run("KeysConfirmed", func(t *testing.T) { testUsageKeysConfirmed(t, open) })
	t.Run("AfterClose", func(t *testing.T) { testUsageAfterClose(t, open) })
}

var usageT0 = time.Date(2025, 3, 2, 12, 0, 0, 0, time.UTC)

func ingest(t *testing.T, s *store.Store, events ...store.UsageEvent) []store.IngestResult {
	t.Helper()
	r, err := s.IngestUsage(testContext(t), events)
	if err != nil {
		t.Fatalf("IngestUsage: %v", err)
	}
	return r
}

func testUsageIngest(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	ev := func(id, subject, meter string, q float64, at time.Time) store.UsageEvent {
		return store.UsageEvent{ProjectID: "prj_u", EnvironmentID: "env_a", EventID: id, SubjectID: subject, Meter: meter, Quantity: q, Timestamp: at}
	}
	d1, d2 := usageT0.AddDate(0, 0, -1), usageT0
	one := ingest(t, s, ev("a", "ada", "api_call", 1, d1))
	if one[0].Duplicate || one[0].ID == "" {
		t.Fatalf("first: %+v", one[0])
	}
	// A batch: a replay of "a", two new events, a repeat of one of them, another subject.
	r := ingest(t, s, ev("b", "ada", "api_call", 2, d2), ev("a", "ada", "api_call", 1, d1),
		ev("c", "ada", "storage", 0.5, d2), ev("b", "ada", "api_call", 2, d2), ev("d", "bo", "api_call", 4, d2))
	dup := []bool{false, true, false, true, false}
	for i := range r {
		if r[i].Duplicate != dup[i] {
			t.Errorf("result %d duplicate = %v, want %v", i, r[i].Duplicate, dup[i])
		}
	}
	if r[1].ID != one[0].ID || r[3].ID != r[0].ID {
		t.Errorf("duplicate ids: %+v, first %s", r, one[0].ID)
	}
	// Hand-computed: d1 ada 1 event 1.0; d2 ada 2 events 2.5, bo 1 event 4.
	points, err := s.UsageActivity(ctx, store.AnalyticsScope{ProjectID: "prj_u"}, usageT0, 7)
	if err != nil {
		t.Fatal(err)
	}
	got := [][4]any{}
	for _, p := range points[5:] {
		got = append(got, [4]any{p.Day, p.ActiveSubjects, p.Events, p.Quantity})
	}
	want := [][4]any{{"2025-03-01", int64(1), int64(1), 1.0}, {"2025-03-02", int64(2), int64(3), 6.5}}
	if !reflect.DeepEqual(got, want) || points[0].Day != "2025-02-24" || points[0].Events != 0 {
		t.Errorf("activity = %v, want %v", got, want)
	}
	total, subjects, err := s.UsageSubjects(ctx, store.SubjectQuery{AnalyticsScope: store.AnalyticsScope{ProjectID: "prj_u"},
		Since: d1.AddDate(0, 0, -1), Sort: "subjectId", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if total != 2 || len(subjects) != 2 || subjects[0].Events != 3 || subjects[0].Quantity != 3.5 ||
		!subjects[0].FirstSeen.Equal(d1) || !subjects[0].LastSeen.Equal(d2) || subjects[1].Events != 1 {
		t.Errorf("subjects = %d %+v", total, subjects)
	}
	for _, bad := range [][]store.UsageEvent{nil, {ev("", "ada", "m", 1, d1)}, {ev("x", "ada", "m", -1, d1)},
		{ev("x", "ada", "m", 1, d1), {ProjectID: "prj_other", EnvironmentID: "env_a", EventID: "y", SubjectID: "s", Meter: "m"}}} {
		if _, err := s.IngestUsage(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("IngestUsage(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

// testUsageReplayIDs replays events whose ids hold quotes, backslashes, array and SQL syntax
// and non-ASCII letters, in a batch and one by one: each is a duplicate with its original id.
func testUsageReplayIDs(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ids := []string{`it's`, `back\slash`, `\'`, `{brace},comma`, `"quoted"`, `NULL`, `ünï 🙂`, ` spaced `, `a'); DROP TABLE usage_events; --`}
	events := make([]store.UsageEvent, len(ids))
	for i, id := range ids {
		events[i] = store.UsageEvent{ProjectID: "prj_u'q", EnvironmentID: "env_a", EventID: id, SubjectID: "ada", Meter: "m", Quantity: 1}
	}
	first := ingest(t, s, events...)
	again := ingest(t, s, events...)
	for i := range ids {
		one := ingest(t, s, events[i])
		if first[i].Duplicate || !again[i].Duplicate || !one[0].Duplicate || again[i].ID != first[i].ID || one[0].ID != first[i].ID {
			t.Errorf("event id %q: first %+v, batch replay %+v, single replay %+v", ids[i], first[i], again[i], one[0])
		}
	}
}

func testUsageConcurrentReplays(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	var wg sync.WaitGroup
	results := make([]store.IngestResult, 20)
	errs := make([]error, 20)
	for i := range results {
		wg.Go(func() {
			events := []store.UsageEvent{{ProjectID: "prj_u", EnvironmentID: "env_a", EventID: "same", SubjectID: "ada", Meter: "m", Quantity: 1}}
			if i%2 == 1 { // half through the multi-statement path
				events = append(events, store.UsageEvent{ProjectID: "prj_u", EnvironmentID: "env_a", EventID: "same", SubjectID: "ada", Meter: "m", Quantity: 1})
			}
			r, err := s.IngestUsage(testContext(t), events)
			if err == nil {
				results[i] = r[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	fresh := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if !r.Duplicate {
			fresh++
		}
		if r.ID != results[0].ID {
			t.Fatalf("call %d: id %s, want %s", i, r.ID, results[0].ID)
		}
	}
	a, err := s.SubjectActivity(testContext(t), store.AnalyticsScope{ProjectID: "prj_u"}, "ada", time.Now(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if fresh != 1 || a.Events != 1 || len(a.Recent) != 1 {
		t.Fatalf("%d calls recorded it, %d events, %d rows; want 1", fresh, a.Events, len(a.Recent))
	}
}

// testUsageConcurrentSingles sends 60 single events at once — 3 projects × 10 event ids, each
// sent twice — so that the store groups them into shared transactions: each project ends with
// exactly its 10 events, every event id has one id, and each id was new for exactly one call.
func testUsageConcurrentSingles(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	projects := []string{"prj_a", "prj_b", "prj_c"}
	type call struct{ project, event string }
	var calls []call
	for _, p := range projects {
		for n := range 10 {
			calls = append(calls, call{p, fmt.Sprintf("e%d", n)}, call{p, fmt.Sprintf("e%d", n)})
		}
	}
	results := make([]store.IngestResult, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			r, err := s.IngestUsage(testContext(t), []store.UsageEvent{{ProjectID: c.project, EnvironmentID: "env_" + c.project,
				EventID: c.event, SubjectID: "sub_" + c.event, Meter: "m", Quantity: 2}})
			if err == nil {
				results[i] = r[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	ids := map[call]string{}
	fresh := map[call]int{}
	for i, c := range calls {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if id, ok := ids[c]; ok && id != results[i].ID {
			t.Fatalf("%v: ids %s and %s", c, id, results[i].ID)
		}
		ids[c] = results[i].ID
		if !results[i].Duplicate {
			fresh[c]++
		}
	}
	for c := range ids {
		if fresh[c] != 1 {
			t.Errorf("%v was new for %d calls, want 1", c, fresh[c])
		}
	}
	for _, p := range projects {
		sum, err := s.UsageSummary(testContext(t), store.AnalyticsScope{ProjectID: p}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Meters) != 1 || sum.Meters[0].Events != 10 || sum.Meters[0].Quantity != 20 {
			t.Errorf("%s: meters %+v, want m with 10 events and quantity 20", p, sum.Meters)
		}
	}
}

// testAddRevenue checks AddRevenue against a hand-computed fixture: two invoices of one subject,
// day and currency fold into one row; the subject summary's revenue (which the directory sorts
// by) sums minor units over currencies; a subject without usage gets a summary row.
func testAddRevenue(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	ingest(t, s, store.UsageEvent{ProjectID: "prj_r", EnvironmentID: "env_a", EventID: "u1", SubjectID: "ada", Meter: "m", Quantity: 1,
		Timestamp: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)})
	entries := []store.RevenueEntry{
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "ada", At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Currency: "USD", Amount: 4900},
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "ada", At: time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC), Currency: "usd", Amount: 100},
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "ada", At: time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC), Currency: "eur", Amount: 700},
		{ProjectID: "prj_r", EnvironmentID: "env_b", SubjectID: "bo", At: time.Date(2025, 3, 2, 8, 0, 0, 0, time.UTC), Currency: "usd", Amount: 300},
	}
	err := s.InTx(ctx, func(tx *store.Tx) error {
		for _, e := range entries {
			if err := tx.AddRevenue(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Refused entries, and a transaction that fails after adding revenue, write nothing.
	for _, bad := range []store.RevenueEntry{
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "ada", At: usageT0, Currency: "us", Amount: 1},
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "ada", At: usageT0, Currency: "usd", Amount: -1},
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "", At: usageT0, Currency: "usd", Amount: 1},
		{ProjectID: "prj_r", EnvironmentID: "env_a", SubjectID: "ada", Currency: "usd", Amount: 1},
	} {
		err := s.InTx(ctx, func(tx *store.Tx) error { return tx.AddRevenue(ctx, bad) })
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AddRevenue(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	boom := errors.New("payment rolled back")
	err = s.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.AddRevenue(ctx, entries[0]); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}

	rows, err := s.RevenueDays(ctx, "prj_r")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RevenueDay{
		{EnvironmentID: "env_a", Day: "2025-03-01", SubjectID: "ada", Currency: "usd", Amount: 5000, Invoices: 2},
		{EnvironmentID: "env_a", Day: "2025-03-02", SubjectID: "ada", Currency: "eur", Amount: 700, Invoices: 1},
		{EnvironmentID: "env_b", Day: "2025-03-02", SubjectID: "bo", Currency: "usd", Amount: 300, Invoices: 1},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("revenue_daily =\n%+v\nwant\n%+v", rows, want)
	}
	total, subjects, err := s.UsageSubjects(ctx, store.SubjectQuery{AnalyticsScope: store.AnalyticsScope{ProjectID: "prj_r"},
		Since: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Sort: "revenue", Desc: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	bo := time.Date(2025, 3, 2, 8, 0, 0, 0, time.UTC)
	if total != 2 || subjects[0].SubjectID != "ada" || !reflect.DeepEqual(subjects[0].Revenue, store.Revenue{"usd": 5000, "eur": 700}) ||
		subjects[0].Events != 1 || subjects[1].SubjectID != "bo" || !reflect.DeepEqual(subjects[1].Revenue, store.Revenue{"usd": 300}) ||
		subjects[1].Events != 0 || !subjects[1].FirstSeen.Equal(bo) || !subjects[1].LastSeen.Equal(bo) {
		t.Errorf("subjects = %d %+v", total, subjects)
	}
	points, err := s.UsageActivity(ctx, store.AnalyticsScope{ProjectID: "prj_r", EnvironmentID: "env_a"}, usageT0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(points[5].Revenue, store.Revenue{"usd": 5000}) || !reflect.DeepEqual(points[6].Revenue, store.Revenue{"eur": 700}) {
		t.Errorf("env_a revenue by day: %v %v", points[5].Revenue, points[6].Revenue)
	}
	sum, err := s.UsageSummary(ctx, store.AnalyticsScope{ProjectID: "prj_r"}, usageT0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sum.Revenue, store.Revenue{"usd": 5300, "eur": 700}) {
		t.Errorf("summary revenue = %v", sum.Revenue)
	}
}

// testUsageKeysConfirmed: an event sent with an API key is recorded only while the key can
// authenticate; revoked, expired, disabled-account and archived-project keys are refused, with
// nothing written for their events, in a batch and one by one, new event or replay.
func testUsageKeysConfirmed(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "usage-keys@example.com")
	org := newOrganization(t, s, "usage-keys", owner.ID)
	project := newProject(t, s, org.ID, "metered")
	newKey := func(name string, expiresAt *time.Time) (store.ServiceAccount, *store.APIKey) {
		k := saKey(t, expiresAt)
		sa := store.ServiceAccount{ProjectID: project.ID, Name: name, Scopes: []string{"usage:write"}}
		createSA(t, s, &sa, k)
		return sa, k
	}
	past := s.Now().Add(-time.Minute)
	_, live := newKey("live", nil)
	revokedSA, revoked := newKey("revoked", nil)
	disabledSA, disabled := newKey("disabled", nil)
	_, expired := newKey("expired", &past)
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.RevokeAPIKey(ctx, project.ID, revokedSA.ID, revoked.ID)
		return err
	})
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetServiceAccountDisabled(ctx, project.ID, disabledSA.ID, true)
		return err
	})
	ev := func(id, keyID string) store.UsageEvent {
		return store.UsageEvent{ProjectID: project.ID, EnvironmentID: project.Environments[0].ID, EventID: id,
			SubjectID: "sub", Meter: "m", Quantity: 1, Timestamp: usageT0, KeyID: keyID}
	}
	type outcome struct{ refused, duplicate bool }
	check := func(what string, got []store.IngestResult, want ...outcome) {
		t.Helper()
		for i, r := range got {
			if r.KeyRefused != want[i].refused || r.Duplicate != want[i].duplicate || (r.ID == "") != want[i].refused {
				t.Errorf("%s: result %d = %+v, want refused %v duplicate %v", what, i, r, want[i].refused, want[i].duplicate)
			}
		}
	}
	recorded, refused, replay := outcome{}, outcome{refused: true}, outcome{duplicate: true}
	check("batch", ingest(t, s, ev("a", live.ID), ev("b", revoked.ID), ev("c", disabled.ID), ev("d", expired.ID), ev("e", "")),
		recorded, refused, refused, refused, recorded)
	// A refused event was not stored: the same id with a usable key is new.
	check("batch again", ingest(t, s, ev("b", live.ID), ev("a", revoked.ID), ev("a", live.ID)), recorded, refused, replay)
	check("single, revoked", ingest(t, s, ev("f", revoked.ID)), refused)
	check("single, live", ingest(t, s, ev("f", live.ID)), recorded)
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, project.ID, true)
		return err
	})
	check("archived project", ingest(t, s, ev("g", live.ID), ev("h", "")), refused, recorded)
	// Recorded: a, e, b, f, h (five events, quantity 5).
	sum, err := s.UsageSummary(ctx, store.AnalyticsScope{ProjectID: project.ID}, usageT0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Meters) != 1 || sum.Meters[0].Events != 5 || sum.Meters[0].Quantity != 5 {
		t.Errorf("meters %+v, want m with 5 events and quantity 5", sum.Meters)
	}
}

// testUsageAfterClose: a single event sent to a closed store is an error, not a wait.
func testUsageAfterClose(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ev := store.UsageEvent{ProjectID: "prj_c", EnvironmentID: "env_c", EventID: "e", SubjectID: "s", Meter: "m", Quantity: 1}
	ingest(t, s, ev)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.IngestUsage(testContext(t), []store.UsageEvent{ev})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("IngestUsage after Close succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("IngestUsage after Close did not return")
	}
}
