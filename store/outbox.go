package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The outbox: messages that must leave the process later (a mail today, a webhook delivery
// later), written in the transaction of the change that causes them and delivered by a worker
// (identity/outbox). A row is pending until it is delivered (SentAt) or given up (FailedAt).
// A worker claims due rows by moving their NextAttemptAt a lease ahead and counting the
// attempt, in one statement; on PostgreSQL the rows are picked FOR UPDATE SKIP LOCKED, so
// concurrent workers on several replicas claim disjoint rows without waiting for each other,
// and on SQLite the one writer connection serialises claims. Attempts is the claim's fencing
// token: a worker completes, retries, fails or releases a row only while Attempts is still
// the count its claim returned.

// OutboxMessage is one row of the outbox.
type OutboxMessage struct {
	ID string
	// Kind names the payload's handler ("mail", "webhook").
	Kind string
	// PartitionKey orders rows: a worker attempts the rows of one key one after the other,
	// oldest first ("" for none: the row is independent).
	PartitionKey string
	// Payload is the sealed payload (empty once delivered).
	Payload string
	// Attempts counts the claims so far.
	Attempts int
	// NextAttemptAt is when the row is due (or, while claimed, when its lease ends).
	NextAttemptAt time.Time
	CreatedAt     time.Time
	SentAt        *time.Time
	FailedAt      *time.Time
	// LastError is the latest failure, "" when none.
	LastError string
}

// OutboxPayloadAAD is the additional data that binds a sealed outbox payload to its row.
func OutboxPayloadAAD(id, kind string) []byte { return []byte("outbox:" + kind + ":" + id) }

type outboxRow struct {
	ID            string   `db:"id"`
	Kind          string   `db:"kind"`
	Payload       string   `db:"payload"`
	Attempts      int      `db:"attempts"`
	NextAttemptAt sqlTime  `db:"next_attempt_at"`
	CreatedAt     sqlTime  `db:"created_at"`
	SentAt        *sqlTime `db:"sent_at"`
	FailedAt      *sqlTime `db:"failed_at"`
	LastError     *string  `db:"last_error"`
	PartitionKey  *string  `db:"partition_key"`
}

const outboxColumns = `id, kind, payload, attempts, next_attempt_at, created_at, sent_at, failed_at, last_error, partition_key`

func (r outboxRow) message() OutboxMessage {
	m := OutboxMessage{ID: r.ID, Kind: r.Kind, Payload: r.Payload, Attempts: r.Attempts,
		NextAttemptAt: time.Time(r.NextAttemptAt), CreatedAt: time.Time(r.CreatedAt)}
	if r.SentAt != nil {
		t := time.Time(*r.SentAt)
		m.SentAt = &t
	}
	if r.FailedAt != nil {
		t := time.Time(*r.FailedAt)
		m.FailedAt = &t
	}
	if r.LastError != nil {
		m.LastError = *r.LastError
	}
	if r.PartitionKey != nil {
		m.PartitionKey = *r.PartitionKey
	}
	return m
}

// NewOutboxID returns a new outbox row id ("out_" + a ULID), for callers that seal the
// payload to the id before they enqueue it.
func NewOutboxID() string { return NewID("out") }

// EnqueueOutbox writes m as a pending row, due at m.NextAttemptAt (Store.Now when zero), with
// no attempts. m.ID, m.Kind and m.Payload are required (ErrInvalid). CreatedAt is set.
func (tx *Tx) EnqueueOutbox(ctx context.Context, m *OutboxMessage) error {
	const op = "enqueue outbox"
	if m.ID == "" || m.Kind == "" || m.Payload == "" {
		return fmt.Errorf("store: %s: %w: id, kind and payload are required", op, ErrInvalid)
	}
	now := tx.store.Now()
	if m.NextAttemptAt.IsZero() {
		m.NextAttemptAt = now
	}
	m.CreatedAt, m.Attempts, m.SentAt, m.FailedAt, m.LastError = now, 0, nil, nil, ""
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO outbox (id, kind, payload, attempts,
		next_attempt_at, created_at, partition_key) VALUES (?, ?, ?, 0, ?, ?, ?)`),
		m.ID, m.Kind, m.Payload, sqlTime(m.NextAttemptAt), sqlTime(now), nullString(m.PartitionKey))
	if err != nil {
		return wrapError(op, err)
	}
	return nil
}

// OutboxDue reports whether a pending row of one of kinds is due at now. It only reads, so a
// worker polls with it and opens a write transaction (ClaimOutbox) only when there is work.
func (s *Store) OutboxDue(ctx context.Context, now time.Time, kinds []string) (bool, error) {
	if len(kinds) == 0 {
		return false, nil
	}
	var one int
	args := append([]any{sqlTime(now)}, anySlice(kinds)...)
	err := s.reader.QueryRowxContext(ctx, s.reader.Rebind(`SELECT 1 FROM outbox
		WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND kind IN (`+
		placeholders(len(kinds))+`) LIMIT 1`), args...).Scan(&one)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return false, wrapError("outbox due", err)
	}
	return true, nil
}

// ClaimOutbox claims up to limit pending rows of one of kinds due at now (a worker claims only
// the kinds it can deliver), oldest due first, skipping the rows whose PartitionKey is one of
// skip (partitions the worker is still attempting): each one's
// Attempts grows by one and its NextAttemptAt moves to now+lease, so that no other worker
// claims it until the lease ends (a worker that stopped without finishing leaves it to be
// claimed again then). It returns the claimed rows as they are after the claim. Concurrent
// claims, on any number of connections or processes, never return the same row twice within
// one lease.
func (s *Store) ClaimOutbox(ctx context.Context, now time.Time, lease time.Duration, limit int, kinds []string, skip ...string) ([]OutboxMessage, error) {
	const op = "claim outbox"
	if limit < 1 || lease <= 0 || len(kinds) == 0 {
		return nil, fmt.Errorf("store: %s: %w: limit and lease must be positive, kinds not empty", op, ErrInvalid)
	}
	skipClause := ""
	if len(skip) > 0 {
		skipClause = ` AND (partition_key IS NULL OR partition_key NOT IN (` + placeholders(len(skip)) + `))`
	}
	query := `UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?
		WHERE id IN (SELECT id FROM outbox
			WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND kind IN (` + placeholders(len(kinds)) + `)` +
		skipClause + `
			ORDER BY next_attempt_at, id LIMIT ?` + s.dialect.skipLockedClause() + `)
		RETURNING ` + outboxColumns
	args := append(append(append([]any{sqlTime(now.Add(lease)), sqlTime(now)}, anySlice(kinds)...), anySlice(skip)...), limit)
	var rows []outboxRow
	err := s.InTx(ctx, func(tx *Tx) error {
		return tx.tx.SelectContext(ctx, &rows, tx.tx.Rebind(query), args...)
	})
	if err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]OutboxMessage, len(rows))
	for i, r := range rows {
		out[i] = r.message()
	}
	// RETURNING gives no order; hand them out oldest first, as they were picked.
	slices.SortFunc(out, func(a, b OutboxMessage) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// CompleteOutbox records the delivery of row id at now, under the claim that returned
// attempts: SentAt is set, the payload emptied and LastError cleared. ErrNotFound when the row
// is not pending under that claim (another worker claimed it after the lease ended, or it was
// finished already).
func (s *Store) CompleteOutbox(ctx context.Context, id string, attempts int, now time.Time) error {
	return s.finishOutbox(ctx, "complete outbox", `sent_at = ?, payload = '', last_error = NULL`,
		id, attempts, sqlTime(now))
}

// RetryOutbox records a failed attempt of row id under the claim that returned attempts: the
// row is due again at next, with lastError. ErrNotFound as for CompleteOutbox.
func (s *Store) RetryOutbox(ctx context.Context, id string, attempts int, next time.Time, lastError string) error {
	return s.finishOutbox(ctx, "retry outbox", `next_attempt_at = ?, last_error = ?`,
		id, attempts, sqlTime(next), lastError)
}

// FailOutbox gives row id up at now under the claim that returned attempts: FailedAt and
// lastError are set and the payload emptied; it is never attempted again. ErrNotFound as for
// CompleteOutbox.
func (s *Store) FailOutbox(ctx context.Context, id string, attempts int, now time.Time, lastError string) error {
	return s.finishOutbox(ctx, "fail outbox", `failed_at = ?, payload = '', last_error = ?`,
		id, attempts, sqlTime(now), lastError)
}

// RenewOutbox moves the lease of row id, claimed with attempts, to until (its worker is about
// to attempt it). ErrNotFound as for CompleteOutbox.
func (s *Store) RenewOutbox(ctx context.Context, id string, attempts int, until time.Time) error {
	return s.finishOutbox(ctx, "renew outbox", `next_attempt_at = ?`, id, attempts, sqlTime(until))
}

// ReleaseOutbox hands back row id, claimed with attempts but not attempted (its worker is
// stopping): it is due at dueAt again and the claim does not count as an attempt. ErrNotFound
// as for CompleteOutbox.
func (s *Store) ReleaseOutbox(ctx context.Context, id string, attempts int, dueAt time.Time) error {
	return s.finishOutbox(ctx, "release outbox", `next_attempt_at = ?, attempts = attempts - 1`,
		id, attempts, sqlTime(dueAt))
}

// finishOutbox applies set (with args) to row id while it is pending under the claim that
// returned attempts.
func (s *Store) finishOutbox(ctx context.Context, op, set, id string, attempts int, args ...any) error {
	args = append(args, id, attempts)
	return s.InTx(ctx, func(tx *Tx) error {
		res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE outbox SET `+set+`
			WHERE id = ? AND attempts = ? AND sent_at IS NULL AND failed_at IS NULL`), args...)
		return oneRowAffected(op, res, err)
	})
}

// OutboxMessageByID returns row id as it is stored (for tests and diagnostics), or
// ErrNotFound.
func (s *Store) OutboxMessageByID(ctx context.Context, id string) (OutboxMessage, error) {
	var r outboxRow
	err := s.reader.GetContext(ctx, &r, s.reader.Rebind(`SELECT `+outboxColumns+` FROM outbox WHERE id = ?`), id)
	if err != nil {
		return OutboxMessage{}, wrapError("outbox message", err)
	}
	return r.message(), nil
}

// DeleteFinishedOutbox deletes up to limit rows delivered or given up that were created before
// before, and returns how many it deleted; workers call it from time to time so that the table
// keeps only recent history.
func (s *Store) DeleteFinishedOutbox(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.InTx(ctx, func(tx *Tx) error {
		var err error
		n, err = tx.execCount(ctx, "delete finished outbox", `DELETE FROM outbox WHERE id IN (SELECT id FROM outbox
			WHERE (sent_at IS NOT NULL OR failed_at IS NOT NULL) AND created_at < ? ORDER BY created_at LIMIT ?)`,
			sqlTime(before), limit)
		return err
	})
	return n, err
}

// placeholders returns n comma-separated ? placeholders.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// anySlice converts values to query arguments.
func anySlice[T any](values []T) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}
