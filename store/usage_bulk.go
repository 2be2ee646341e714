package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Bulk loading of usage events (`gatehouse dev seed-usage`): on PostgreSQL a chunk of events is
// streamed with COPY into a temporary table and recorded by one set-based statement, the same
// postgresUsageSQL that ingest runs, so usage_event_ids, the partitions and every rollup come
// out exactly as if the events had been ingested, at a fraction of the per-row cost.

// BulkUsageChunk is how many events BulkIngestUsage takes at most per call: large enough that
// the statement's fixed cost vanishes, small enough that a chunk's sort fits in memory.
const BulkUsageChunk = 200_000

// postgresBulkIngest records the events of usage_stage (filled by COPY) for project $1 in
// shard $2 and returns how many were new.
var postgresBulkIngest = postgresUsageSQL(`input AS (
	SELECT $1::text AS project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties, day,
		NULL::text AS key_id, n FROM usage_stage
), ok AS (SELECT * FROM input)`, "$2", false, `SELECT count(*) FROM fresh`)

// BulkIngestUsage records events of one project (at most BulkUsageChunk, without API keys) like
// IngestUsage, in one transaction, and returns how many were new; replays are skipped. On
// SQLite it calls IngestUsage in batches of MaxUsageBatch.
func (s *Store) BulkIngestUsage(ctx context.Context, events []UsageEvent) (int, error) {
	const op = "bulk ingest usage"
	if len(events) > BulkUsageChunk {
		return 0, fmt.Errorf("store: %s: %w: %d events (at most %d)", op, ErrInvalid, len(events), BulkUsageChunk)
	}
	if s.dialect != Postgres || s.usageLegacy.Load() {
		fresh := 0
		for from := 0; from < len(events); from += MaxUsageBatch {
			results, err := s.IngestUsage(ctx, events[from:min(from+MaxUsageBatch, len(events))])
			if err != nil {
				return fresh, err
			}
			for _, r := range results {
				if !r.Duplicate {
					fresh++
				}
			}
		}
		return fresh, nil
	}
	now := s.Now()
	for i := range events {
		if events[i].KeyID != "" || events[i].ProjectID != events[0].ProjectID {
			return 0, fmt.Errorf("store: %s: %w: event %d has an API key or another project", op, ErrInvalid, i)
		}
		if err := prepareUsageEvent(&events[i], now); err != nil {
			return 0, fmt.Errorf("store: %s: %w", op, err)
		}
	}
	var fresh int
	var err error
	// Concurrent chunks meet on rollup rows; a deadlock rolls one back, which is run again.
	for attempt := 0; attempt < 3; attempt++ {
		if fresh, err = s.bulkIngestPostgres(ctx, events); err == nil || !isRetryableWrite(err) {
			break
		}
	}
	if err != nil {
		return 0, wrapError(op, err)
	}
	return fresh, nil
}

// bulkIngestPostgres records prepared events with COPY and postgresBulkIngest in one transaction.
func (s *Store) bulkIngestPostgres(ctx context.Context, events []UsageEvent) (int, error) {
	var fresh int
	err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.tx.ExecContext(ctx, `CREATE TEMPORARY TABLE usage_stage (event_id text, id text, environment_id text,
			subject_id text, meter text, quantity float8, occurred_at timestamptz, received_at timestamptz, properties text,
			day text, n bigint) ON COMMIT DROP`); err != nil {
			return err
		}
		// lib/pq runs a prepared COPY … FROM STDIN as a copy: each Exec sends a row, the last
		// (without arguments) ends it.
		stmt, err := tx.tx.PrepareContext(ctx, `COPY usage_stage (event_id, id, environment_id, subject_id, meter, quantity,
			occurred_at, received_at, properties, day, n) FROM STDIN`)
		if err != nil {
			return err
		}
		for i, e := range events {
			if _, err := stmt.ExecContext(ctx, e.EventID, e.ID, e.EnvironmentID, e.SubjectID, e.Meter, strconv.FormatFloat(e.Quantity, 'g', -1, 64),
				sqlTime(e.Timestamp).text(), sqlTime(e.ReceivedAt).text(), nullString(e.Properties), UsageDay(e.Timestamp), i+1); err != nil {
				_ = stmt.Close()
				return err
			}
		}
		if _, err := stmt.ExecContext(ctx); err != nil {
			_ = stmt.Close()
			return err
		}
		if err := stmt.Close(); err != nil {
			return err
		}
		// A temporary table has no statistics until analysed (autovacuum never sees it), and
		// the statement's sorts and hashes of a whole chunk spill to disk at the default
		// work_mem: planned blind and spilling, a chunk took about twice as long. The planner
		// overestimates the joins of the CTEs a hundredfold, which crosses jit_above_cost: JIT
		// compilation then took more than half of each chunk's statement (EXPLAIN ANALYZE of a
		// 25,000-event chunk: 1.17 s of JIT in 2.23 s), for a plan that runs once.
		for _, stmt := range []string{`ANALYZE usage_stage`, `SET LOCAL work_mem = '256MB'`, `SET LOCAL jit = off`} {
			if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return tx.tx.GetContext(ctx, &fresh, postgresBulkIngest, events[0].ProjectID, callShard())
	})
	return fresh, err
}

// AnalyzeUsage refreshes the planner's statistics of the usage tables (PostgreSQL's ANALYZE, which
// reads a sample of each), as PostgreSQL's guide advises after a bulk load: until autovacuum
// gets to them, which it may not for minutes while it works through a large load, the planner
// takes tables of millions of rows for the handful they held when last analysed. On SQLite it
// does nothing.
func (s *Store) AnalyzeUsage(ctx context.Context) error {
	if s.dialect != Postgres {
		return nil
	}
	if _, err := s.writer.ExecContext(ctx, `ANALYZE usage_events, usage_event_ids, usage_daily, usage_subject_days, usage_subjects, usage_subject_totals, usage_totals`); err != nil {
		return wrapError("analyze usage", err)
	}
	return nil
}

// prepareUsageEvent validates one event and fills in its id, received time and precision
// (received now when unset).
func prepareUsageEvent(e *UsageEvent, now time.Time) error {
	switch {
	case e.ProjectID == "" || e.EnvironmentID == "" || e.EventID == "" || e.SubjectID == "" || e.Meter == "":
		return fmt.Errorf("%w: event %q lacks an id field", ErrInvalid, e.EventID)
	case !(e.Quantity >= 0):
		return fmt.Errorf("%w: event %q has a negative quantity", ErrInvalid, e.EventID)
	}
	if e.ID == "" {
		e.ID = NewID("uev")
	}
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = now
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = e.ReceivedAt
	}
	e.Timestamp = e.Timestamp.UTC().Truncate(time.Microsecond)
	e.ReceivedAt = e.ReceivedAt.UTC().Truncate(time.Microsecond)
	return nil
}
