package store

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Usage events: ingest, with the rollups the analytics read (store/analytics.go) maintained in
// the same transaction as each new event. An event is unique on (project, eventId): a replay
// writes nothing and reports the original event's id. Nothing references users, so deleting
// a subject keeps its accounting rows.
//
// Per new event the rollups are:
//   - usage_daily: (project, subject, day, meter, environment) → events, quantity;
//   - usage_subject_days: (project, subject, day, environment) → events; the upsert that takes
//     it to 1 marks the subject's first event of the day;
//   - usage_subjects: (project, subject, environment) → first/last seen, events, quantity
//     (and revenue, from AddRevenue);
//   - usage_subject_totals: (project, subject) → the same figures over every environment, the
//     fold of the subject's usage_subjects rows, so that the directory need not fold per read;
//   - usage_totals: (project, day, environment, meter, shard) → events, quantity and the
//     subjects whose first event of the day it was. Each call (one transaction) writes one
//     shard, drawn at random, so that concurrent transactions rarely update the same row
//     and wait on each other's commit; readers sum the shards.

// MaxUsageBatch is the most events one IngestUsage call takes (the batch route's limit).
const MaxUsageBatch = 1000

// usageShards is how many usage_totals rows share one (project, day, environment, meter).
const usageShards = 16

// UsageEvent is one usage event. On ingest ID and ReceivedAt are assigned when empty;
// Properties is compact JSON text or "" for none. Timestamp is kept at microsecond precision,
// and its UTC date is the event's day in every rollup.
type UsageEvent struct {
	ID            string    `db:"id"`
	ProjectID     string    `db:"project_id"`
	EnvironmentID string    `db:"environment_id"`
	EventID       string    `db:"event_id"`
	SubjectID     string    `db:"subject_id"`
	Meter         string    `db:"meter"`
	Quantity      float64   `db:"quantity"`
	Timestamp     time.Time `db:"-"`
	ReceivedAt    time.Time `db:"-"`
	Properties    string    `db:"-"`
	// KeyID is the API key the event was sent with, or "" (a user's session, the seed
	// generator). An event with a key is recorded only if that key may still authenticate
	// when its transaction runs (usableKeyCondition); otherwise its result is KeyRefused.
	KeyID string `db:"-"`
}

// IngestResult is the outcome of one event: its id (the original one for a duplicate) and
// whether it was already recorded.
type IngestResult struct {
	ID        string
	Duplicate bool
	// KeyRefused reports an event that was not recorded because its KeyID could no longer
	// authenticate (revoked, expired, account disabled, project or organization archived,
	// deleted); ID and Duplicate are then empty.
	KeyRefused bool
}

// UsageDay is the rollup day of t: its UTC date as YYYY-MM-DD, the form every rollup stores.
func UsageDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// callShard draws the usage_totals shard of one ingest call.
func callShard() int { return rand.IntN(usageShards) }

// IngestUsage records events, all of one project, and returns one result per event in order.
// New events and their rollups commit together, in one transaction (a single event may share
// it with concurrent single events: usage_batch.go); an event whose
// (ProjectID, EventID) is already stored — by an earlier call, a concurrent one or earlier in
// the same call — is a duplicate: nothing is written for it and its result carries the
// original id. Concurrent calls with the same event leave exactly one row.
//
// The API key of each event that names one (UsageEvent.KeyID) is confirmed in the transaction
// that would record it: an event whose key can no longer authenticate is not recorded and has
// KeyRefused set. This lets the server authenticate ingest requests from a cache of keys it
// has read (server/apikey_cache.go) without ever recording an event for a key revoked before
// the write.
//
// It returns ErrInvalid for an empty or oversized call (MaxUsageBatch), events of several
// projects, a missing id field or a negative quantity; nothing is written then.
func (s *Store) IngestUsage(ctx context.Context, events []UsageEvent) ([]IngestResult, error) {
	const op = "ingest usage"
	if err := s.prepareUsage(events); err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	if len(events) == 1 {
		// Single events share transactions with concurrent ones (usage_batch.go).
		r, err := s.ingestQueued(events[0])
		if err != nil {
			return nil, wrapError(op, err)
		}
		return []IngestResult{r}, nil
	}
	results, err := s.ingestBatch(ctx, events)
	if err != nil {
		return nil, wrapError(op, err)
	}
	return results, nil
}

// ingestPrepared records prepared events of one project in one transaction (one statement on
// PostgreSQL: usage_postgres.go).
func (s *Store) ingestPrepared(ctx context.Context, events []UsageEvent) ([]IngestResult, error) {
	var results []IngestResult
	var err error
	// A PostgreSQL deadlock (a batch and a concurrent writer meeting on rollup rows in
	// different orders) rolls back everything; the events are then simply sent again.
	for attempt := 0; attempt < 3; attempt++ {
		if s.dialect == Postgres {
			results, err = s.ingestPostgres(ctx, events)
		} else {
			err = s.InTx(ctx, func(tx *Tx) error {
				var err error
				results, err = tx.ingestUsage(ctx, events, s.Now())
				return err
			})
		}
		if err == nil || !isRetryableWrite(err) {
			break
		}
	}
	return results, err
}

// prepareUsage validates events and fills in ids, received times and precision.
func (s *Store) prepareUsage(events []UsageEvent) error {
	if len(events) == 0 || len(events) > MaxUsageBatch {
		return fmt.Errorf("%w: %d events (1 to %d)", ErrInvalid, len(events), MaxUsageBatch)
	}
	now := s.Now()
	for i := range events {
		if events[i].ProjectID != events[0].ProjectID {
			return fmt.Errorf("%w: events of several projects", ErrInvalid)
		}
		if err := prepareUsageEvent(&events[i], now); err != nil {
			return err
		}
	}
	return nil
}

// usageKey names one rollup row of a call (fields unused by a table stay empty).
type usageKey struct {
	project, env, subject, day, meter string
	shard                             int
}

func compareUsageKeys(a, b usageKey) int {
	return cmp.Or(strings.Compare(a.project, b.project), strings.Compare(a.subject, b.subject), strings.Compare(a.day, b.day),
		strings.Compare(a.meter, b.meter), strings.Compare(a.env, b.env), cmp.Compare(a.shard, b.shard))
}

// usageDelta is what a call adds to one rollup row.
type usageDelta struct {
	events      int64
	quantity    float64
	first, last time.Time
	newSubjects int64
	// firstMeter is the meter of the subject-day's first new event in the call.
	firstMeter string
}

// ingestUsage is IngestUsage inside a transaction (SQLite), for events of one project or of
// several (a group commit's, usage_batch.go): the events whose API key can no longer
// authenticate at now are refused, the others recorded by recordUsage.
func (tx *Tx) ingestUsage(ctx context.Context, events []UsageEvent, now time.Time) ([]IngestResult, error) {
	usable, err := tx.usableKeys(ctx, events, now)
	if err != nil {
		return nil, err
	}
	results := make([]IngestResult, len(events))
	kept := make([]UsageEvent, 0, len(events))
	var at []int
	for i, e := range events {
		if e.KeyID != "" && !usable[e.KeyID] {
			results[i].KeyRefused = true
			continue
		}
		kept = append(kept, e)
		at = append(at, i)
	}
	if len(kept) == 0 {
		return results, nil
	}
	recorded, err := tx.recordUsage(ctx, kept)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		results[i] = recorded[j]
	}
	return results, nil
}

// usableKeys returns which of the events' API keys may still authenticate at now.
func (tx *Tx) usableKeys(ctx context.Context, events []UsageEvent, now time.Time) (map[string]bool, error) {
	args := []any{sqlTime(now)}
	for _, e := range events {
		if e.KeyID != "" && !slices.Contains(args[1:], any(e.KeyID)) {
			args = append(args, e.KeyID)
		}
	}
	if len(args) == 1 {
		return nil, nil
	}
	var ids []string
	query := `SELECT k.id FROM ` + usableKeyJoin + ` WHERE ` + usableKeyCondition + ` AND k.id IN (?` +
		strings.Repeat(", ?", len(args)-2) + `)`
	if err := tx.tx.SelectContext(ctx, &ids, tx.tx.Rebind(query), args...); err != nil {
		return nil, err
	}
	usable := make(map[string]bool, len(ids))
	for _, id := range ids {
		usable[id] = true
	}
	return usable, nil
}

// recordUsage records events, of one project or several, in the open transaction, in a fixed
// number of statements whatever the call's size and projects: the events insert, a read of the
// duplicates' original ids, then one upsert per rollup table with the call's deltas. Rows are
// written in key order, project first (events by project and event id, rollups by key), so
// that concurrent calls lock them in the same order. A call's events number at most
// MaxUsageBatch, which keeps every statement under SQLite's 32,766 parameters.
func (tx *Tx) recordUsage(ctx context.Context, events []UsageEvent) ([]IngestResult, error) {
	order := make([]int, len(events))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(events[a].ProjectID, events[b].ProjectID), strings.Compare(events[a].EventID, events[b].EventID))
	})

	var q strings.Builder
	q.WriteString(`INSERT INTO usage_events (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties) VALUES `)
	args := make([]any, 0, len(events)*10)
	for n, i := range order {
		if n > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		e := events[i]
		args = append(args, e.ProjectID, e.EventID, e.ID, e.EnvironmentID, e.SubjectID, e.Meter, e.Quantity,
			sqlTime(e.Timestamp), sqlTime(e.ReceivedAt), nullString(e.Properties))
	}
	q.WriteString(` ON CONFLICT (project_id, event_id) DO NOTHING RETURNING project_id, event_id`)
	var insertedRows []usageEventKey
	if err := tx.tx.SelectContext(ctx, &insertedRows, tx.tx.Rebind(q.String()), args...); err != nil {
		return nil, err
	}
	inserted := make(map[usageEventKey]bool, len(insertedRows))
	for _, r := range insertedRows {
		inserted[r] = true
	}

	// The first occurrence of an inserted event id is new; every other event is a duplicate
	// whose original id is read back (a later occurrence in this call reads this call's row).
	results := make([]IngestResult, len(events))
	var fresh []UsageEvent
	var lookup []any
	for i, e := range events {
		if k := (usageEventKey{e.ProjectID, e.EventID}); inserted[k] {
			delete(inserted, k)
			results[i] = IngestResult{ID: e.ID}
			fresh = append(fresh, e)
			continue
		}
		results[i].Duplicate = true
		lookup = append(lookup, e.ProjectID, e.EventID)
	}
	if len(lookup) > 0 {
		var rows []struct {
			usageEventKey
			ID string `db:"id"`
		}
		query := `SELECT project_id, event_id, id FROM usage_events WHERE (project_id, event_id) IN (VALUES ` +
			valuesList(len(lookup)/2, 2) + `)`
		if err := tx.tx.SelectContext(ctx, &rows, tx.tx.Rebind(query), lookup...); err != nil {
			return nil, err
		}
		ids := make(map[usageEventKey]string, len(rows))
		for _, r := range rows {
			ids[r.usageEventKey] = r.ID
		}
		for i, e := range events {
			if results[i].Duplicate {
				if results[i].ID = ids[usageEventKey{e.ProjectID, e.EventID}]; results[i].ID == "" {
					return nil, fmt.Errorf("duplicate event %q has no stored row", e.EventID)
				}
			}
		}
	}
	if len(fresh) == 0 {
		return results, nil
	}
	return results, tx.addUsageRollups(ctx, fresh)
}

// usageEventKey names a stored event: its project and event id.
type usageEventKey struct {
	ProjectID string `db:"project_id"`
	EventID   string `db:"event_id"`
}

// addUsageRollups adds new events, of one project or several, to the five rollup tables, one
// upsert statement each.
func (tx *Tx) addUsageRollups(ctx context.Context, fresh []UsageEvent) error {
	daily := map[usageKey]*usageDelta{}
	subjectDays := map[usageKey]*usageDelta{}
	subjects := map[usageKey]*usageDelta{}
	subjectTotals := map[usageKey]*usageDelta{}
	totals := map[usageKey]*usageDelta{}
	add := func(m map[usageKey]*usageDelta, k usageKey, e UsageEvent) *usageDelta {
		d := m[k]
		if d == nil {
			d = &usageDelta{first: e.Timestamp, last: e.Timestamp, firstMeter: e.Meter}
			m[k] = d
		}
		d.events++
		d.quantity += e.Quantity
		if e.Timestamp.Before(d.first) {
			d.first = e.Timestamp
		}
		if e.Timestamp.After(d.last) {
			d.last = e.Timestamp
		}
		return d
	}
	shard := callShard()
	for _, e := range fresh {
		day := UsageDay(e.Timestamp)
		p := e.ProjectID
		add(daily, usageKey{project: p, env: e.EnvironmentID, subject: e.SubjectID, day: day, meter: e.Meter}, e)
		add(subjectDays, usageKey{project: p, env: e.EnvironmentID, subject: e.SubjectID, day: day}, e)
		add(subjects, usageKey{project: p, env: e.EnvironmentID, subject: e.SubjectID}, e)
		add(subjectTotals, usageKey{project: p, subject: e.SubjectID}, e)
		add(totals, usageKey{project: p, env: e.EnvironmentID, day: day, meter: e.Meter, shard: shard}, e)
	}

	// Subject-days first: a row whose count after the upsert equals what this call added is
	// new, the subject's first event of that day, counted in usage_totals.new_subjects.
	keys := sortedKeys(subjectDays)
	args := make([]any, 0, len(keys)*5)
	for _, k := range keys {
		args = append(args, k.project, k.subject, k.day, k.env, subjectDays[k].events)
	}
	var after []struct {
		ProjectID     string `db:"project_id"`
		SubjectID     string `db:"subject_id"`
		Day           string `db:"day"`
		EnvironmentID string `db:"environment_id"`
		Events        int64  `db:"events"`
	}
	err := tx.tx.SelectContext(ctx, &after, tx.tx.Rebind(`INSERT INTO usage_subject_days (project_id, subject_id, day, environment_id, events) VALUES `+
		valuesList(len(keys), 5)+` ON CONFLICT (project_id, subject_id, day, environment_id) DO UPDATE SET events = usage_subject_days.events + excluded.events
		RETURNING project_id, subject_id, day, environment_id, events`), args...)
	if err != nil {
		return err
	}
	for _, r := range after {
		k := usageKey{project: r.ProjectID, env: r.EnvironmentID, subject: r.SubjectID, day: r.Day}
		if d := subjectDays[k]; d != nil && r.Events == d.events {
			totals[usageKey{project: k.project, env: k.env, day: k.day, meter: d.firstMeter, shard: shard}].newSubjects++
		}
	}

	keys = sortedKeys(daily)
	args = args[:0]
	for _, k := range keys {
		d := daily[k]
		args = append(args, k.project, k.subject, k.day, k.meter, k.env, d.events, d.quantity)
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO usage_daily (project_id, subject_id, day, meter, environment_id, events, quantity) VALUES `+
		valuesList(len(keys), 7)+` ON CONFLICT (project_id, subject_id, day, meter, environment_id) DO UPDATE SET
		events = usage_daily.events + excluded.events, quantity = usage_daily.quantity + excluded.quantity`), args...)
	if err != nil {
		return err
	}

	keys = sortedKeys(subjects)
	args = args[:0]
	for _, k := range keys {
		d := subjects[k]
		args = append(args, k.project, k.subject, k.env, sqlTime(d.first), sqlTime(d.last), d.events, d.quantity)
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity) VALUES `+
		valuesList(len(keys), 7)+` ON CONFLICT (project_id, subject_id, environment_id) DO UPDATE SET
		first_seen = CASE WHEN excluded.first_seen < usage_subjects.first_seen THEN excluded.first_seen ELSE usage_subjects.first_seen END,
		last_seen = CASE WHEN excluded.last_seen > usage_subjects.last_seen THEN excluded.last_seen ELSE usage_subjects.last_seen END,
		events = usage_subjects.events + excluded.events, quantity = usage_subjects.quantity + excluded.quantity`), args...)
	if err != nil {
		return err
	}

	keys = sortedKeys(subjectTotals)
	args = args[:0]
	for _, k := range keys {
		d := subjectTotals[k]
		args = append(args, k.project, k.subject, sqlTime(d.first), sqlTime(d.last), d.events, d.quantity, 0)
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO usage_subject_totals (project_id, subject_id, first_seen, last_seen, events, quantity, revenue) VALUES `+
		valuesList(len(keys), 7)+` ON CONFLICT (project_id, subject_id) DO UPDATE SET
		first_seen = CASE WHEN excluded.first_seen < usage_subject_totals.first_seen THEN excluded.first_seen ELSE usage_subject_totals.first_seen END,
		last_seen = CASE WHEN excluded.last_seen > usage_subject_totals.last_seen THEN excluded.last_seen ELSE usage_subject_totals.last_seen END,
		events = usage_subject_totals.events + excluded.events, quantity = usage_subject_totals.quantity + excluded.quantity`), args...)
	if err != nil {
		return err
	}

	keys = sortedKeys(totals)
	args = args[:0]
	for _, k := range keys {
		d := totals[k]
		args = append(args, k.project, k.day, k.env, k.meter, k.shard, d.events, d.quantity, d.newSubjects)
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO usage_totals (project_id, day, environment_id, meter, shard, events, quantity, new_subjects) VALUES `+
		valuesList(len(keys), 8)+` ON CONFLICT (project_id, day, environment_id, meter, shard) DO UPDATE SET
		events = usage_totals.events + excluded.events, quantity = usage_totals.quantity + excluded.quantity,
		new_subjects = usage_totals.new_subjects + excluded.new_subjects`), args...)
	return err
}

func sortedKeys(m map[usageKey]*usageDelta) []usageKey {
	keys := make([]usageKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUsageKeys)
	return keys
}

// valuesList is rows groups of cols placeholders: "(?, ?), (?, ?)".
func valuesList(rows, cols int) string {
	group := "(?" + strings.Repeat(", ?", cols-1) + ")"
	return group + strings.Repeat(", "+group, rows-1)
}

// EnvironmentProject returns the id of the project an environment belongs to, or ErrNotFound.
func (s *Store) EnvironmentProject(ctx context.Context, environmentID string) (string, error) {
	stmt, err := s.readStatement(ctx, `SELECT project_id FROM environments WHERE id = ?`)
	if err != nil {
		return "", wrapError("environment project", err)
	}
	var projectID string
	if err := stmt.GetContext(ctx, &projectID, environmentID); err != nil {
		return "", wrapError("environment project", err)
	}
	return projectID, nil
}
