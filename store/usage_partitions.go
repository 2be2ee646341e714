package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
)

// Usage events on PostgreSQL are partitioned by month of received_at (migration 0032, which
// says why that key): usage_events_pYYYYMM holds [the 1st of the month, the 1st of the next)
// in UTC, and usage_events_default whatever falls outside every partition, so that an event
// is never refused or lost for want of a partition. Gatehouse creates the partitions itself
// (MaintainUsage, at start-up and then periodically from every replica); PostgreSQL needs no
// extension. Replay detection lives in usage_event_ids, one row per accepted event, kept for
// the replay window. SQLite keeps one usage_events table whose primary key detects replays
// forever, and has no retention.

// UsagePartitionsAhead is how many months after the current one MaintainUsage keeps created,
// so that a month's partition exists long before its first event (and a replica whose
// maintenance stops still has two months of partitions).
const UsagePartitionsAhead = 2

// DefaultUsageReplayWindow is how long after an event was received a replay of its eventId is
// still recognised on PostgreSQL unless WithUsageReplayWindow says otherwise: a billing month
// and a few days of slack for senders that retry from a backlog.
const DefaultUsageReplayWindow = 35 * 24 * time.Hour

// usageMaintenanceBatch is how many rows one statement deletes or moves, so that no statement
// holds its locks or builds its WAL for long.
const usageMaintenanceBatch = 10_000

// WithUsageRetention makes MaintainUsage drop raw usage events received more than d ago, by
// whole monthly partitions (PostgreSQL). Zero, the default, keeps them forever. The rollups are
// never dropped.
func WithUsageRetention(d time.Duration) Option {
	return func(s *Store) { s.usageRetention = d }
}

// WithUsageReplayWindow sets how long a replayed eventId is recognised on PostgreSQL (at least
// d after the original was received, and until MaintainUsage next runs after that);
// DefaultUsageReplayWindow when unset or zero.
func WithUsageReplayWindow(d time.Duration) Option {
	return func(s *Store) { s.usageReplayWindow = d }
}

// UsageMaintenance reports what one MaintainUsage call did.
type UsageMaintenance struct {
	// Created and Dropped name the partitions created and dropped (for retention).
	Created, Dropped []string
	// ExpiredIDs is how many usage_event_ids rows left the replay window; ExpiredDefault how
	// many default-partition rows left the retention.
	ExpiredIDs, ExpiredDefault int64
}

// usagePartition is the partition of the month starting at from (UTC).
func usagePartition(from time.Time) string { return "usage_events_p" + from.Format("200601") }

// monthStart is the first instant of t's month in UTC.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// MaintainUsage keeps the usage partitions on PostgreSQL (it does nothing on SQLite): it creates
// the partitions of the current month and the UsagePartitionsAhead after it that are missing
// (moving into each the default partition's rows of its month), drops the partitions wholly
// older than the retention (WithUsageRetention) and the default partition's rows older than
// it, and deletes the usage_event_ids rows older than the replay window. The partitions are
// changed in one transaction under an advisory lock of the schema, so that several replicas
// running it at once wait for each other and find nothing left to do; the expiry runs after,
// in batches. Times come from the store clock.
func (s *Store) MaintainUsage(ctx context.Context) (UsageMaintenance, error) {
	return s.maintainUsage(ctx, true)
}

// maintainUsage is MaintainUsage; without expire it only creates partitions (Migrate).
func (s *Store) maintainUsage(ctx context.Context, expire bool) (UsageMaintenance, error) {
	var out UsageMaintenance
	if s.dialect != Postgres {
		return out, nil
	}
	now := s.Now()
	err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.usage_partitions'))`); err != nil {
			return err
		}
		var existing []string
		if err := tx.tx.SelectContext(ctx, &existing, `SELECT c.relname FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_events'::regclass`); err != nil {
			return err
		}
		have := make(map[string]bool, len(existing))
		for _, name := range existing {
			have[name] = true
		}
		for m := range UsagePartitionsAhead + 1 {
			from := monthStart(now).AddDate(0, m, 0)
			if name := usagePartition(from); !have[name] {
				if err := tx.createUsagePartition(ctx, from); err != nil {
					return fmt.Errorf("partition %s: %w", name, err)
				}
				out.Created = append(out.Created, name)
			}
		}
		if !expire || s.usageRetention <= 0 {
			return nil
		}
		cutoff := now.Add(-s.usageRetention)
		for _, name := range existing {
			from, err := time.Parse("200601", strings.TrimPrefix(name, "usage_events_p"))
			if err != nil || !strings.HasPrefix(name, "usage_events_p") {
				continue // the default partition
			}
			if !from.AddDate(0, 1, 0).After(cutoff) {
				if _, err := tx.tx.ExecContext(ctx, `DROP TABLE `+pq.QuoteIdentifier(name)); err != nil {
					return err
				}
				out.Dropped = append(out.Dropped, name)
			}
		}
		return nil
	})
	if err != nil {
		return out, wrapError("maintain usage", err)
	}
	if !expire {
		return out, nil
	}
	if s.usageRetention > 0 {
		n, err := s.deleteInBatches(ctx, `usage_events_default`, now.Add(-s.usageRetention))
		out.ExpiredDefault = n
		if err != nil {
			return out, wrapError("maintain usage", err)
		}
	}
	window := s.usageReplayWindow
	if window <= 0 {
		window = DefaultUsageReplayWindow
	}
	n, err := s.deleteInBatches(ctx, `usage_event_ids`, now.Add(-window))
	out.ExpiredIDs = n
	if err != nil {
		return out, wrapError("maintain usage", err)
	}
	return out, nil
}

// createUsagePartition creates the partition of the month from, first as a plain table
// holding the default partition's rows of that month (normally none), then attached: creating
// it straight as a partition fails while the default partition holds rows of its range.
func (tx *Tx) createUsagePartition(ctx context.Context, from time.Time) error {
	name := pq.QuoteIdentifier(usagePartition(from))
	lo, hi := pq.QuoteLiteral(from.Format(time.RFC3339)), pq.QuoteLiteral(from.AddDate(0, 1, 0).Format(time.RFC3339))
	for _, stmt := range []string{
		`CREATE TABLE ` + name + ` (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
		// The range as a constraint lets ATTACH skip scanning the new table.
		`ALTER TABLE ` + name + ` ADD CONSTRAINT ` + pq.QuoteIdentifier(usagePartition(from)+"_range") +
			` CHECK (received_at >= ` + lo + ` AND received_at < ` + hi + `)`,
		`WITH moved AS (DELETE FROM usage_events_default WHERE received_at >= ` + lo + ` AND received_at < ` + hi + ` RETURNING *)
			INSERT INTO ` + name + ` SELECT * FROM moved`,
		`ALTER TABLE usage_events ATTACH PARTITION ` + name + ` FOR VALUES FROM (` + lo + `) TO (` + hi + `)`,
		`ALTER TABLE ` + name + ` DROP CONSTRAINT ` + pq.QuoteIdentifier(usagePartition(from)+"_range"),
	} {
		if _, err := tx.tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// deleteInBatches deletes table's rows received before cutoff, usageMaintenanceBatch rows per
// statement, and returns how many it deleted.
func (s *Store) deleteInBatches(ctx context.Context, table string, cutoff time.Time) (int64, error) {
	var total int64
	for {
		res, err := s.writer.ExecContext(ctx, `DELETE FROM `+table+` WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM `+table+` WHERE received_at < $1 LIMIT $2))`, cutoff, usageMaintenanceBatch)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < usageMaintenanceBatch {
			return total, nil
		}
	}
}

// refreshUsageLegacy records whether usage_events_legacy exists (a conversion under way).
func (s *Store) refreshUsageLegacy(ctx context.Context) error {
	if s.dialect != Postgres {
		return nil
	}
	var exists bool
	if err := s.reader.GetContext(ctx, &exists, `SELECT to_regclass('usage_events_legacy') IS NOT NULL`); err != nil {
		return err
	}
	s.usageLegacy.Store(exists)
	return nil
}

// isUndefinedTable reports PostgreSQL's undefined_table error (42P01).
func isUndefinedTable(err error) bool {
	pqErr, ok := errors.AsType[*pq.Error](err)
	return ok && pqErr.Code == "42P01"
}

// ConvertUsageBatch moves up to limit events from usage_events_legacy (the unpartitioned table
// migration 0032 renamed) into the partitioned usage_events and their ids into usage_event_ids,
// in primary-key order, in one transaction that also commits the cursor
// (usage_events_conversion): an interruption loses at most the batch in flight, which is then
// moved again. It creates the partitions of the batch's months first. When nothing is left it
// drops the legacy table and returns done. It returns at once, having moved nothing, while
// another replica holds the conversion's advisory lock, and on SQLite or with no conversion to
// do (done). Ingest and the replay lookup read the legacy table while it exists, so an event
// id in either table is a replay and every event keeps exactly one row.
func (s *Store) ConvertUsageBatch(ctx context.Context, limit int) (moved int64, done bool, err error) {
	if s.dialect != Postgres {
		return 0, true, nil
	}
	if err := s.refreshUsageLegacy(ctx); err != nil {
		return 0, false, wrapError("convert usage", err)
	}
	if !s.usageLegacy.Load() {
		return 0, true, nil
	}
	err = s.InTx(ctx, func(tx *Tx) error {
		var locked bool
		if err := tx.tx.GetContext(ctx, &locked, `SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '.usage_conversion'))`); err != nil {
			return err
		}
		if !locked {
			return nil
		}
		var exists bool
		if err := tx.tx.GetContext(ctx, &exists, `SELECT to_regclass('usage_events_legacy') IS NOT NULL`); err != nil {
			return err
		}
		if !exists { // another replica finished it
			done = true
			return nil
		}
		var cursor struct {
			ProjectID string `db:"project_id"`
			EventID   string `db:"event_id"`
		}
		err := tx.tx.GetContext(ctx, &cursor, `SELECT project_id, event_id FROM usage_events_conversion`)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// The batch's span of months, to create their partitions before moving it.
		var span struct {
			Rows int64        `db:"rows"`
			From sql.NullTime `db:"from_at"`
			To   sql.NullTime `db:"to_at"`
		}
		batch := `SELECT * FROM usage_events_legacy WHERE (project_id, event_id) > ($1, $2) ORDER BY project_id, event_id LIMIT $3`
		if err := tx.tx.GetContext(ctx, &span, `SELECT count(*) AS rows, min(received_at) AS from_at, max(received_at) AS to_at
			FROM (`+batch+`) b`, cursor.ProjectID, cursor.EventID, limit); err != nil {
			return err
		}
		if span.Rows == 0 {
			if _, err := tx.tx.ExecContext(ctx, `DROP TABLE usage_events_legacy`); err != nil {
				return err
			}
			_, err := tx.tx.ExecContext(ctx, `DELETE FROM usage_events_conversion`)
			done = true
			return err
		}
		var have []string
		if err := tx.tx.SelectContext(ctx, &have, `SELECT c.relname FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_events'::regclass`); err != nil {
			return err
		}
		for m := monthStart(span.From.Time); !m.After(span.To.Time); m = m.AddDate(0, 1, 0) {
			if !slices.Contains(have, usagePartition(m)) {
				if err := tx.createUsagePartition(ctx, m); err != nil {
					return err
				}
			}
		}
		var last struct {
			ProjectID string `db:"project_id"`
			EventID   string `db:"event_id"`
			Moved     int64  `db:"moved"`
		}
		err = tx.tx.GetContext(ctx, &last, `WITH b AS (`+batch+`),
			gone AS (DELETE FROM usage_events_legacy l USING b WHERE l.project_id = b.project_id AND l.event_id = b.event_id RETURNING l.*),
			ev AS (INSERT INTO usage_events SELECT * FROM gone),
			ids AS (INSERT INTO usage_event_ids (project_id, event_id, id, received_at)
				SELECT project_id, event_id, id, received_at FROM gone ON CONFLICT (project_id, event_id) DO NOTHING)
			SELECT project_id, event_id, (SELECT count(*) FROM gone) AS moved FROM b ORDER BY project_id DESC, event_id DESC LIMIT 1`,
			cursor.ProjectID, cursor.EventID, limit)
		if err != nil {
			return err
		}
		moved = last.Moved
		_, err = tx.tx.ExecContext(ctx, `INSERT INTO usage_events_conversion (project_id, event_id, moved) VALUES ($1, $2, $3)
			ON CONFLICT (singleton) DO UPDATE SET project_id = excluded.project_id, event_id = excluded.event_id,
			moved = usage_events_conversion.moved + excluded.moved`, last.ProjectID, last.EventID, last.Moved)
		return err
	})
	if err != nil {
		return 0, false, wrapError("convert usage", err)
	}
	if done {
		s.usageLegacy.Store(false)
	}
	return moved, done, nil
}
