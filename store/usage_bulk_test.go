package store

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// usageTables reads every usage rollup, and the recorded events without their generated ids
// and received times, in a fixed order, for comparing two stores.
func usageTables(t *testing.T, s *Store) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for name, query := range map[string]string{
		"events":         `SELECT project_id, event_id, environment_id, subject_id, meter, quantity, occurred_at, properties FROM usage_events ORDER BY event_id`,
		"ids":            `SELECT project_id, event_id FROM usage_event_ids ORDER BY event_id`,
		"daily":          `SELECT * FROM usage_daily ORDER BY subject_id, day, meter, environment_id`,
		"subject_days":   `SELECT * FROM usage_subject_days ORDER BY subject_id, day, environment_id`,
		"subjects":       `SELECT * FROM usage_subjects ORDER BY subject_id, environment_id`,
		"subject_totals": `SELECT * FROM usage_subject_totals ORDER BY project_id, subject_id`,
		// Shards are drawn at random: compare their sums.
		"totals": `SELECT project_id, day, environment_id, meter, sum(events) AS events, sum(quantity) AS quantity,
			sum(new_subjects) AS new_subjects FROM usage_totals GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`,
	} {
		rows, err := s.writer.Queryx(query)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			row := map[string]any{}
			if err := rows.MapScan(row); err != nil {
				t.Fatal(err)
			}
			for k, v := range row {
				if tm, ok := v.(time.Time); ok {
					row[k] = tm.UTC()
				}
			}
			out[name] = append(out[name], row)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestBulkIngestMatchesIngest: the same events, with replays within and across calls, leave
// the same events, ids and rollups through BulkIngestUsage (COPY) as through IngestUsage
// (batches of 1,000), and both report the same number of new events.
func TestBulkIngestMatchesIngest(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC)}
	bulk, batched := openUsagePostgres(t, clock), openUsagePostgres(t, clock)
	events := func(from, to int) []UsageEvent {
		var out []UsageEvent
		for i := from; i < to; i++ {
			e := UsageEvent{ProjectID: "prj_b", EnvironmentID: []string{"env_a", "env_b"}[i%2], EventID: fmt.Sprintf("e-%05d", i%2900),
				SubjectID: fmt.Sprintf("sub_%03d", (i*37)%97), Meter: []string{"api_call", "seats", "api_call"}[i%3],
				Quantity: float64(i % 5), Timestamp: time.Date(2026, 3, 1+i%40, i%24, 0, 0, 0, time.UTC)}
			if i%4 == 0 {
				e.Properties = `{"n":` + fmt.Sprint(i) + `}`
			}
			out = append(out, e)
		}
		return out
	}
	// 3,000 events of which 100 replay earlier ids, then 500 more that all replay.
	var newBulk, newBatched int
	for _, span := range [][2]int{{0, 3000}, {1000, 1500}} {
		n, err := bulk.BulkIngestUsage(t.Context(), events(span[0], span[1]))
		if err != nil {
			t.Fatal(err)
		}
		newBulk += n
		for from := span[0]; from < span[1]; from += MaxUsageBatch {
			results, err := batched.IngestUsage(t.Context(), events(from, min(from+MaxUsageBatch, span[1])))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range results {
				if !r.Duplicate {
					newBatched++
				}
			}
		}
	}
	if newBulk != 2900 || newBatched != 2900 {
		t.Errorf("new events: bulk %d, batched %d; want 2900", newBulk, newBatched)
	}
	got, want := usageTables(t, bulk), usageTables(t, batched)
	for name := range want {
		if len(want[name]) == 0 {
			t.Errorf("table %s is empty", name)
		}
		if !reflect.DeepEqual(got[name], want[name]) {
			t.Errorf("table %s differs: bulk has %d rows, batched %d", name, len(got[name]), len(want[name]))
		}
	}
}
