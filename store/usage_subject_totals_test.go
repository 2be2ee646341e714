package store

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestRepairSubjectTotals: rows that a release before migration 34 writes to usage_subjects
// alone (more events for a subject, a subject of its own, revenue) make their project drift;
// RepairSubjectTotals rebuilds that project's totals to the fold, leaves the other project
// alone, and finds nothing the second time.
func TestRepairSubjectTotals(t *testing.T) {
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	s := openUsagePostgres(t, &testClock{now: t0})
	for i, p := range []string{"prj_old", "prj_new"} {
		ingestOne(t, s, UsageEvent{ProjectID: p, EnvironmentID: "env_a", EventID: "e1", SubjectID: "ada", Meter: "m", Quantity: 2, Timestamp: t0.Add(-time.Hour)})
		ingestOne(t, s, UsageEvent{ProjectID: p, EnvironmentID: "env_b", EventID: "e2", SubjectID: "ada", Meter: "m", Quantity: 1, Timestamp: t0.Add(-time.Duration(i+2) * time.Hour)})
	}
	if got, err := s.RepairSubjectTotals(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("RepairSubjectTotals before any drift = %v, %v; want none", got, err)
	}
	// What the old release writes, each alone enough to be found: two more events of ada in
	// env_a an hour later; revenue for ada in env_c; a new subject bo (usage_subjects only).
	for _, q := range []string{
		`UPDATE usage_subjects SET events = events + 2, quantity = quantity + 4, last_seen = '2026-05-04T10:00:00Z'
			WHERE project_id = 'prj_old' AND subject_id = 'ada' AND environment_id = 'env_a'`,
		`INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity, revenue)
			VALUES ('prj_old', 'ada', 'env_c', '2026-05-01T00:00:00Z', '2026-05-01T00:00:00Z', 0, 0, 900)`,
		`INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity, revenue)
			VALUES ('prj_old', 'bo', 'env_a', '2026-05-04T09:30:00Z', '2026-05-04T09:30:00Z', 1, 1, 0)`,
	} {
		if _, err := s.writer.Exec(q); err != nil {
			t.Fatal(err)
		}
		if got, err := s.RepairSubjectTotals(t.Context()); err != nil || !slices.Equal(got, []string{"prj_old"}) {
			t.Fatalf("RepairSubjectTotals after %s = %v, %v; want [prj_old]", q, got, err)
		}
	}
	rows := readSubjectTotals(t, s)
	h := func(hour, minute int) sqlTime { return sqlTime(time.Date(2026, 5, 4, hour, minute, 0, 0, time.UTC)) }
	want := []subjectTotal{
		{"prj_new", "ada", h(7, 0), h(9, 0), 2, 3, 0},
		{"prj_old", "ada", sqlTime(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)), h(10, 0), 4, 7, 900},
		{"prj_old", "bo", h(9, 30), h(9, 30), 1, 1, 0},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("usage_subject_totals after repair =\n%+v\nwant\n%+v", rows, want)
	}
	if got, err := s.RepairSubjectTotals(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("RepairSubjectTotals after the repair = %v, %v; want none", got, err)
	}
}

// subjectTotal is a usage_subject_totals row.
type subjectTotal struct {
	ProjectID string  `db:"project_id"`
	SubjectID string  `db:"subject_id"`
	FirstSeen sqlTime `db:"first_seen"`
	LastSeen  sqlTime `db:"last_seen"`
	Events    int64   `db:"events"`
	Quantity  float64 `db:"quantity"`
	Revenue   int64   `db:"revenue"`
}

// readSubjectTotals returns every usage_subject_totals row by project and subject, times in UTC.
func readSubjectTotals(t *testing.T, s *Store) []subjectTotal {
	t.Helper()
	var rows []subjectTotal
	if err := s.writer.Select(&rows, `SELECT * FROM usage_subject_totals ORDER BY project_id, subject_id`); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].FirstSeen, rows[i].LastSeen = sqlTime(time.Time(rows[i].FirstSeen).UTC()), sqlTime(time.Time(rows[i].LastSeen).UTC())
	}
	return rows
}
