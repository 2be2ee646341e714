package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// testSubjectDirectory checks the subject directory and the summary's active counts against a
// hand-computed fixture of three subjects over three environments, written by single events, a
// batch with a replay, and revenue before, between and after the events:
//
//	ada  env_c  revenue 10.00 usd on 20 Feb 10:00 (no events)
//	     env_a  e1 1 Mar 09:00 q 2, e5 28 Feb 12:00 q 0.5, then revenue 2.00 usd on 5 Mar
//	     env_b  e2 2 Mar 18:00 q 3
//	bo   env_a  e3 25 Feb 00:00 q 1
//	     env_c  revenue 0.50 usd on 10 Feb 00:00 (no events)
//	cy   env_b  e4 2 Mar 06:00 q 10
//
// Over every environment: ada first 20 Feb 10:00, last 2 Mar 18:00, 3 events, quantity 5.5,
// revenue 1,200; bo first 10 Feb, last 25 Feb, 1 event, quantity 1, revenue 50; cy first and
// last 2 Mar 06:00, 1 event, quantity 10. The revenue of 5 Mar lands on a row that exists, so
// it moves no subject's last seen.
func testSubjectDirectory(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	at := func(month time.Month, day, hour int) time.Time {
		return time.Date(2025, month, day, hour, 0, 0, 0, time.UTC)
	}
	ev := func(id, env, subject string, q float64, ts time.Time) store.UsageEvent {
		return store.UsageEvent{ProjectID: "prj_t", EnvironmentID: env, EventID: id, SubjectID: subject, Meter: "api_call", Quantity: q, Timestamp: ts}
	}
	revenue := func(env, subject string, paid time.Time, amount int64) {
		t.Helper()
		err := s.InTx(ctx, func(tx *store.Tx) error {
			return tx.AddRevenue(ctx, store.RevenueEntry{ProjectID: "prj_t", EnvironmentID: env, SubjectID: subject, At: paid, Currency: "usd", Amount: amount})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	revenue("env_c", "ada", at(2, 20, 10), 1000)
	ingest(t, s, ev("e1", "env_a", "ada", 2, at(3, 1, 9)))
	ingest(t, s, ev("e2", "env_b", "ada", 3, at(3, 2, 18)), ev("e3", "env_a", "bo", 1, at(2, 25, 0)), ev("e1", "env_a", "ada", 2, at(3, 1, 9)),
		ev("e4", "env_b", "cy", 10, at(3, 2, 6)), ev("e5", "env_a", "ada", 0.5, at(2, 28, 12)))
	revenue("env_a", "ada", at(3, 5, 0), 200)
	revenue("env_c", "bo", at(2, 10, 0), 50)

	ada := store.SubjectUsage{SubjectID: "ada", FirstSeen: at(2, 20, 10), LastSeen: at(3, 2, 18), Events: 3, Quantity: 5.5, Revenue: store.Revenue{"usd": 1200}}
	bo := store.SubjectUsage{SubjectID: "bo", FirstSeen: at(2, 10, 0), LastSeen: at(2, 25, 0), Events: 1, Quantity: 1, Revenue: store.Revenue{"usd": 50}}
	cy := store.SubjectUsage{SubjectID: "cy", FirstSeen: at(3, 2, 6), LastSeen: at(3, 2, 6), Events: 1, Quantity: 10, Revenue: store.Revenue{}}
	adaInA := store.SubjectUsage{SubjectID: "ada", FirstSeen: at(2, 28, 12), LastSeen: at(3, 1, 9), Events: 2, Quantity: 2.5, Revenue: store.Revenue{"usd": 200}}
	boInA := store.SubjectUsage{SubjectID: "bo", FirstSeen: at(2, 25, 0), LastSeen: at(2, 25, 0), Events: 1, Quantity: 1, Revenue: store.Revenue{}}
	all := store.AnalyticsScope{ProjectID: "prj_t"}
	since := at(1, 1, 0)
	for _, c := range []struct {
		name  string
		q     store.SubjectQuery
		total int
		want  []store.SubjectUsage
	}{
		{"by events, ties by id", store.SubjectQuery{AnalyticsScope: all, Since: since, Sort: "events", Desc: true, Limit: 10}, 3, []store.SubjectUsage{ada, bo, cy}},
		{"seen since 1 March", store.SubjectQuery{AnalyticsScope: all, Since: at(3, 1, 0), Sort: "lastSeen", Desc: true, Limit: 10}, 2, []store.SubjectUsage{ada, cy}},
		{"by revenue", store.SubjectQuery{AnalyticsScope: all, Since: since, Sort: "revenue", Limit: 10}, 3, []store.SubjectUsage{cy, bo, ada}},
		{"by quantity, two", store.SubjectQuery{AnalyticsScope: all, Since: since, Sort: "quantity", Desc: true, Limit: 2}, 3, []store.SubjectUsage{cy, ada}},
		{"contains y", store.SubjectQuery{AnalyticsScope: all, Since: since, Contains: "y", Sort: "subjectId", Limit: 10}, 1, []store.SubjectUsage{cy}},
		{"second page", store.SubjectQuery{AnalyticsScope: all, Since: since, Sort: "subjectId", Limit: 1, Offset: 1}, 3, []store.SubjectUsage{bo}},
		{"past the end", store.SubjectQuery{AnalyticsScope: all, Since: since, Sort: "subjectId", Limit: 1, Offset: 5}, 3, []store.SubjectUsage{}},
		{"one environment", store.SubjectQuery{AnalyticsScope: store.AnalyticsScope{ProjectID: "prj_t", EnvironmentID: "env_a"}, Since: since, Sort: "quantity", Limit: 10},
			2, []store.SubjectUsage{boInA, adaInA}},
	} {
		total, got, err := s.UsageSubjects(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if total != c.total || len(got) != len(c.want) {
			t.Errorf("%s: %d subjects of %d, want %d of %d: %+v", c.name, len(got), total, len(c.want), c.total, got)
			continue
		}
		for i := range got {
			g := got[i]
			g.FirstSeen, g.LastSeen = g.FirstSeen.UTC(), g.LastSeen.UTC()
			if !reflect.DeepEqual(g, c.want[i]) {
				t.Errorf("%s: subject %d = %+v, want %+v", c.name, i, g, c.want[i])
			}
		}
	}

	// On 2 March 20:00 the last 7 days start on 24 February and the last 30 on 1 February.
	now := at(3, 2, 20)
	for _, c := range []struct {
		env               string
		today, week, days int64
	}{{"", 2, 3, 3}, {"env_a", 0, 2, 2}, {"env_b", 2, 2, 2}, {"env_c", 0, 0, 2}} {
		sum, err := s.UsageSummary(ctx, store.AnalyticsScope{ProjectID: "prj_t", EnvironmentID: c.env}, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]int64{sum.ActiveToday, sum.Active7Days, sum.Active30Days}; got != [3]int64{c.today, c.week, c.days} {
			t.Errorf("summary of %q: active today, 7 and 30 days = %v, want %v", c.env, got, [3]int64{c.today, c.week, c.days})
		}
	}
}
