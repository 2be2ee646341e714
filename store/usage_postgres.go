package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/lib/pq"
)

// Usage ingest on PostgreSQL: a whole call (one event, a batch, or a group-commit flush that
// carries the events of several projects) is one prepared statement with one round trip,
// committed on its own. The events, each with its project, travel as parallel arrays, so the
// statement text never changes with the call's size and each pooled connection parses and
// plans it once; the multi-statement path (Tx.ingestUsage) instead sends ~7 statements of
// varying arity per call, each parsed and planned again.
// SQLite has no data-modifying WITH and keeps Tx.ingestUsage.

// postgresIngest records the events given as arrays ($1…$11 and $13, one element per event,
// in call order), of one project or several ($1 is each event's project), and maintains the
// four rollups for the events it inserted, like Tx.ingestUsage per project:
//
//   - usable is the events' API keys that may still authenticate at $14 (usableKeyCondition,
//     read from the keys outwards: usableKeyJoinPostgres),
//     and ok the events that carry no key or a usable one; the others are refused;
//   - ids inserts the ok events' ids into usage_event_ids in (project, event id) order (the
//     lock order every call follows) and skips an event id already stored in its project, also
//     earlier in the same call (only its first occurrence is inserted, ORDER BY n): its
//     primary key is the replay detection, since the partitioned usage_events can hold no
//     unique (project, event id);
//   - fresh is the inserted events with their call position n, and ev writes them to
//     usage_events (the partition of their received_at month);
//   - sd upserts the subject-days; a row whose count after the upsert equals what this call
//     added is new, the subject's first event that day, counted in usage_totals.new_subjects
//     under the meter of that subject-day's first new event in the call;
//   - ud, us, ust and ut upsert usage_daily, usage_subjects, usage_subject_totals and
//     usage_totals (in shard $12), each in key order: project first, so that a call of
//     several projects takes each table's row locks in the same order as calls of one.
//
// It returns one row per event, in call order: the id this call gave the event (also to a
// later occurrence of an event id it inserted), or for a replay the stored id as the
// statement's snapshot shows it in usage_event_ids under the event's project (prior: one
// primary-key probe, so a replay costs one round trip like a new event), or NULL when the
// snapshot does not show it (a racing transaction committed it after the snapshot was taken,
// or it is in usage_events_legacy), which ingestPostgres then reads with a second statement;
// whether this call inserted it; and whether its key was refused.
//
// Parameters: arrays of project, event id, id, environment, subject, meter, quantity,
// timestamp, received at, properties (NULL for none) and day; the call's shard; the array of
// API key ids (NULL for none); the time keys are judged at.
//
// postgresIngestSQL builds postgresIngest; with legacy, an event id still in
// usage_events_legacy (a conversion under way: usage_partitions.go) counts as stored.
func postgresIngestSQL(legacy bool) string {
	return postgresUsageSQL(`input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
		$8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[], $13::text[]) WITH ORDINALITY
		AS t(project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties, day, key_id, n)
), usable AS (
	SELECT k.id FROM `+usableKeyJoinPostgres+`
	WHERE k.id = ANY($13::text[]) AND `+strings.Replace(usableKeyCondition, "?", "$14::timestamptz", 1)+`
), ok AS (
	SELECT input.* FROM input WHERE input.key_id IS NULL OR input.key_id IN (SELECT id FROM usable)
)`, "$12", legacy, `SELECT coalesce(fresh.id, prior.id) AS id, coalesce(fresh.n = input.n, false) AS inserted, ok.n IS NULL AS refused
FROM input LEFT JOIN fresh ON fresh.project_id = input.project_id AND fresh.event_id = input.event_id
LEFT JOIN ok ON ok.n = input.n
LEFT JOIN LATERAL (SELECT e.id FROM usage_event_ids e
	WHERE fresh.id IS NULL AND ok.n IS NOT NULL AND e.project_id = input.project_id AND e.event_id = input.event_id LIMIT 1) prior ON true
ORDER BY input.n`)
}

// postgresUsageSQL is the statement that records the events of ok (CTEs input and ok, with
// columns project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at,
// received_at, properties, day, key_id and n; n unique in the call) into usage_event_ids,
// usage_events and the rollups of each event's project, in shard parameter shard, and ends
// with final. Every CTE carries project_id: in its select list, first in its GROUP BY and
// ORDER BY, and in its joins.
func postgresUsageSQL(sources, shard string, legacy bool, final string) string {
	notLegacy := ""
	if legacy {
		notLegacy = ` AND NOT EXISTS (SELECT 1 FROM usage_events_legacy l WHERE l.project_id = ok.project_id AND l.event_id = ok.event_id)`
	}
	return `WITH ` + sources + `, ids AS (
	INSERT INTO usage_event_ids (project_id, event_id, id, received_at)
	SELECT project_id, event_id, id, received_at FROM ok WHERE true` + notLegacy + `
	ORDER BY project_id, event_id, n
	ON CONFLICT (project_id, event_id) DO NOTHING
	RETURNING id
), fresh AS (
	SELECT input.* FROM input JOIN ids USING (id)
), ev AS (
	INSERT INTO usage_events (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
	SELECT project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties FROM fresh
), sd_in AS (
	SELECT project_id, subject_id, day, environment_id, count(*) AS events, (array_agg(meter ORDER BY n))[1] AS first_meter
	FROM fresh GROUP BY project_id, subject_id, day, environment_id
), sd AS (
	INSERT INTO usage_subject_days (project_id, subject_id, day, environment_id, events)
	SELECT project_id, subject_id, day, environment_id, events FROM sd_in ORDER BY project_id, subject_id, day, environment_id
	ON CONFLICT (project_id, subject_id, day, environment_id) DO UPDATE SET events = usage_subject_days.events + excluded.events
	RETURNING project_id, subject_id, day, environment_id, events
), new_sd AS (
	SELECT sd_in.project_id, sd_in.day, sd_in.environment_id, sd_in.first_meter AS meter, count(*) AS subjects
	FROM sd JOIN sd_in USING (project_id, subject_id, day, environment_id)
	WHERE sd.events = sd_in.events
	GROUP BY sd_in.project_id, sd_in.day, sd_in.environment_id, sd_in.first_meter
), ud AS (
	INSERT INTO usage_daily (project_id, subject_id, day, meter, environment_id, events, quantity)
	SELECT project_id, subject_id, day, meter, environment_id, count(*), sum(quantity)
	FROM fresh GROUP BY project_id, subject_id, day, meter, environment_id ORDER BY project_id, subject_id, day, meter, environment_id
	ON CONFLICT (project_id, subject_id, day, meter, environment_id) DO UPDATE SET
		events = usage_daily.events + excluded.events, quantity = usage_daily.quantity + excluded.quantity
), us AS (
	INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity)
	SELECT project_id, subject_id, environment_id, min(occurred_at), max(occurred_at), count(*), sum(quantity)
	FROM fresh GROUP BY project_id, subject_id, environment_id ORDER BY project_id, subject_id, environment_id
	ON CONFLICT (project_id, subject_id, environment_id) DO UPDATE SET
		first_seen = LEAST(usage_subjects.first_seen, excluded.first_seen),
		last_seen = GREATEST(usage_subjects.last_seen, excluded.last_seen),
		events = usage_subjects.events + excluded.events, quantity = usage_subjects.quantity + excluded.quantity
), ust AS (
	INSERT INTO usage_subject_totals (project_id, subject_id, first_seen, last_seen, events, quantity, revenue)
	SELECT project_id, subject_id, min(occurred_at), max(occurred_at), count(*), sum(quantity), 0
	FROM fresh GROUP BY project_id, subject_id ORDER BY project_id, subject_id
	ON CONFLICT (project_id, subject_id) DO UPDATE SET
		first_seen = LEAST(usage_subject_totals.first_seen, excluded.first_seen),
		last_seen = GREATEST(usage_subject_totals.last_seen, excluded.last_seen),
		events = usage_subject_totals.events + excluded.events, quantity = usage_subject_totals.quantity + excluded.quantity
), ut AS (
	INSERT INTO usage_totals (project_id, day, environment_id, meter, shard, events, quantity, new_subjects)
	SELECT t.project_id, t.day, t.environment_id, t.meter, ` + shard + `::int2, t.events, t.quantity, coalesce(new_sd.subjects, 0)
	FROM (SELECT project_id, day, environment_id, meter, count(*) AS events, sum(quantity) AS quantity
		FROM fresh GROUP BY project_id, day, environment_id, meter) t
	LEFT JOIN new_sd USING (project_id, day, environment_id, meter)
	ORDER BY t.project_id, t.day, t.environment_id, t.meter
	ON CONFLICT (project_id, day, environment_id, meter, shard) DO UPDATE SET
		events = usage_totals.events + excluded.events, quantity = usage_totals.quantity + excluded.quantity,
		new_subjects = usage_totals.new_subjects + excluded.new_subjects
)
` + final
}

// The two forms of postgresIngest: without and with the legacy table.
var postgresIngest, postgresIngestLegacy = postgresIngestSQL(false), postgresIngestSQL(true)

// ingestPostgres records prepared events, of one project or several (a group commit:
// usage_batch.go), with one postgresIngest statement that commits on its own; see IngestUsage
// for the contract. It returns one result per event, in call order.
func (s *Store) ingestPostgres(ctx context.Context, events []UsageEvent) ([]IngestResult, error) {
	n := len(events)
	projects, eventIDs, ids, envs, subjects, meters := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	occurred, received, days := make([]string, n), make([]string, n), make([]string, n)
	quantities := make([]float64, n)
	properties, keys := make([]sql.NullString, n), make([]sql.NullString, n)
	for i, e := range events {
		projects[i], eventIDs[i], ids[i], envs[i], subjects[i], meters[i] = e.ProjectID, e.EventID, e.ID, e.EnvironmentID, e.SubjectID, e.Meter
		quantities[i] = e.Quantity
		// RFC 3339 text in UTC; PostgreSQL reads it as timestamptz exactly (microseconds).
		occurred[i], received[i] = sqlTime(e.Timestamp).text(), sqlTime(e.ReceivedAt).text()
		properties[i], keys[i] = nullString(e.Properties), nullString(e.KeyID)
		days[i] = UsageDay(e.Timestamp)
	}
	var rows []struct {
		ID       sql.NullString `db:"id"`
		Inserted bool           `db:"inserted"`
		Refused  bool           `db:"refused"`
	}
	run := func() error {
		query := postgresIngest
		if s.usageLegacy.Load() {
			query = postgresIngestLegacy
		}
		stmt, err := s.readStatement(ctx, query)
		if err != nil {
			return err
		}
		return stmt.SelectContext(ctx, &rows, pq.Array(projects), pq.Array(eventIDs), pq.Array(ids), pq.Array(envs),
			pq.Array(subjects), pq.Array(meters), pq.Array(quantities), pq.Array(occurred), pq.Array(received),
			pq.GenericArray{A: properties}, pq.Array(days), callShard(), pq.GenericArray{A: keys}, sqlTime(s.Now()).text())
	}
	err := run()
	if isUndefinedTable(err) {
		// Another replica finished the conversion and dropped usage_events_legacy (or this
		// one has not yet seen it start): look again, then once more.
		if err = s.refreshUsageLegacy(ctx); err == nil {
			err = run()
		}
	}
	if err != nil {
		return nil, err
	}
	if len(rows) != n {
		return nil, fmt.Errorf("%d results for %d events", len(rows), n)
	}
	results := make([]IngestResult, n)
	var replayProjects, replays []string
	for i, r := range rows {
		if r.Refused {
			results[i].KeyRefused = true
			continue
		}
		results[i] = IngestResult{ID: r.ID.String, Duplicate: !r.Inserted}
		if !r.ID.Valid {
			replayProjects, replays = append(replayProjects, events[i].ProjectID), append(replays, events[i].EventID)
		}
	}
	if len(replays) == 0 {
		return results, nil
	}
	// The stored ids of replays, each looked up in its own event's project: a statement of
	// their own, so that it also sees an event a racing transaction committed while ours
	// waited on the unique index. Its shape is chosen for a table that grows faster than its
	// statistics: one primary-key probe per replay (a LATERAL subquery with LIMIT is never
	// flattened into a join that could scan the project's events), planned on each call
	// rather than prepared (a prepared plan is made once per connection, often while
	// usage_events is nearly empty, and then read replays through the subject index or a
	// sequential scan as the table grew: replays fell from ~3,000 to ~400 events/s within
	// seconds in the load benchmark, and an = ANY read of a batch's 500 replays scanned the
	// whole project through a bitmap). The values are quoted into the text by lib/pq
	// (QuoteLiteral over the driver's own array encoding) because a statement without
	// parameters is lib/pq's simple protocol, one round trip; with parameters an unprepared
	// statement takes two.
	var arrays [2]string
	for i, values := range [][]string{replayProjects, replays} {
		text, err := pq.Array(values).Value()
		if err != nil {
			return nil, err
		}
		arrays[i] = pq.QuoteLiteral(text.(string))
	}
	var stored []struct {
		ProjectID string `db:"project_id"`
		EventID   string `db:"event_id"`
		ID        string `db:"id"`
	}
	// The id from usage_event_ids, or while a conversion is under way from the legacy table.
	lookup := func(legacy bool) error {
		from := `SELECT id FROM usage_event_ids WHERE project_id = r.project_id AND event_id = r.event_id`
		if legacy {
			from += ` UNION ALL SELECT id FROM usage_events_legacy WHERE project_id = r.project_id AND event_id = r.event_id`
		}
		return s.reader.SelectContext(ctx, &stored, `SELECT r.project_id, r.event_id, e.id
		FROM unnest(`+arrays[0]+`::text[], `+arrays[1]+`::text[]) AS r(project_id, event_id)
		CROSS JOIN LATERAL (`+from+` LIMIT 1) e`)
	}
	err = lookup(s.usageLegacy.Load())
	if isUndefinedTable(err) {
		stored = stored[:0]
		err = lookup(false)
	}
	if err != nil {
		return nil, err
	}
	type eventKey struct{ project, event string }
	storedIDs := make(map[eventKey]string, len(stored))
	for _, r := range stored {
		storedIDs[eventKey{r.ProjectID, r.EventID}] = r.ID
	}
	for i := range results {
		if results[i].ID == "" && !results[i].KeyRefused {
			if results[i].ID = storedIDs[eventKey{events[i].ProjectID, events[i].EventID}]; results[i].ID == "" {
				return nil, fmt.Errorf("duplicate event %q of project %q has no stored row", events[i].EventID, events[i].ProjectID)
			}
		}
	}
	return results, nil
}
