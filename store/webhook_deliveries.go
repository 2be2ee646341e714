package store

import (
	"context"
	"database/sql"
	"time"
)

// WebhookEvent is an event as delivered: Body is the exact JSON that is signed and sent.
type WebhookEvent struct {
	ID        string
	ProjectID string
	Type      string
	Body      string
	CreatedAt time.Time
}

// InsertWebhookEvent writes ev (CreatedAt set to Store.Now) in the transaction of the change
// it reports. An id already taken is ErrConflict.
func (tx *Tx) InsertWebhookEvent(ctx context.Context, ev *WebhookEvent) error {
	ev.CreatedAt = tx.store.Now()
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO webhook_events (id, project_id, type, body, created_at)
		VALUES (?, ?, ?, ?, ?)`), ev.ID, ev.ProjectID, ev.Type, ev.Body, sqlTime(ev.CreatedAt))
	return wrapErrorOrNil("insert webhook event", err)
}

// WebhookEvent returns event id, or ErrNotFound.
func (s *Store) WebhookEvent(ctx context.Context, id string) (WebhookEvent, error) {
	var r struct {
		ID        string  `db:"id"`
		ProjectID string  `db:"project_id"`
		Type      string  `db:"type"`
		Body      string  `db:"body"`
		CreatedAt sqlTime `db:"created_at"`
	}
	err := s.reader.GetContext(ctx, &r, s.reader.Rebind(`SELECT id, project_id, type, body, created_at
		FROM webhook_events WHERE id = ?`), id)
	if err != nil {
		return WebhookEvent{}, wrapError("webhook event", err)
	}
	return WebhookEvent{ID: r.ID, ProjectID: r.ProjectID, Type: r.Type, Body: r.Body, CreatedAt: time.Time(r.CreatedAt)}, nil
}

// WebhookDelivery is one attempt (made or scheduled) to deliver an event to an endpoint.
type WebhookDelivery struct {
	ID         string
	EndpointID string
	EventID    string
	EventType  string
	// OutboxID is the outbox row carrying the delivery; Attempt counts its attempts from 1.
	OutboxID string
	Attempt  int
	// Status is DeliveryPending, DeliverySucceeded or DeliveryFailed.
	Status string
	// ResponseCode (0: no response), LatencyMs, ResponseBody (at most 4 KiB) and Error
	// describe a made attempt.
	ResponseCode int
	LatencyMs    int64
	ResponseBody string
	Error        string
	// NextAttemptAt is when a pending attempt is due, or when the next follows a failed one.
	NextAttemptAt *time.Time
	CreatedAt     time.Time
}

type webhookDeliveryRow struct {
	ID            string         `db:"id"`
	EndpointID    string         `db:"endpoint_id"`
	EventID       string         `db:"event_id"`
	EventType     string         `db:"event_type"`
	OutboxID      string         `db:"outbox_id"`
	Attempt       int            `db:"attempt"`
	Status        string         `db:"status"`
	ResponseCode  sql.NullInt64  `db:"response_code"`
	LatencyMs     sql.NullInt64  `db:"latency_ms"`
	ResponseBody  sql.NullString `db:"response_body"`
	Error         sql.NullString `db:"error"`
	NextAttemptAt *sqlTime       `db:"next_attempt_at"`
	CreatedAt     sqlTime        `db:"created_at"`
}

const webhookDeliveryColumns = `id, endpoint_id, event_id, event_type, outbox_id, attempt, status, response_code,
	latency_ms, response_body, error, next_attempt_at, created_at`

func (r webhookDeliveryRow) delivery() WebhookDelivery {
	return WebhookDelivery{ID: r.ID, EndpointID: r.EndpointID, EventID: r.EventID, EventType: r.EventType,
		OutboxID: r.OutboxID, Attempt: r.Attempt, Status: r.Status, ResponseCode: int(r.ResponseCode.Int64),
		LatencyMs: r.LatencyMs.Int64, ResponseBody: r.ResponseBody.String, Error: r.Error.String,
		NextAttemptAt: timePtr(r.NextAttemptAt), CreatedAt: time.Time(r.CreatedAt)}
}

// InsertWebhookDelivery writes d as a pending attempt (ID and CreatedAt set).
func (tx *Tx) InsertWebhookDelivery(ctx context.Context, d *WebhookDelivery) error {
	d.ID, d.CreatedAt, d.Status = NewID("whd"), tx.store.Now(), DeliveryPending
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO webhook_deliveries (id, endpoint_id, event_id,
		event_type, outbox_id, attempt, status, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		d.ID, d.EndpointID, d.EventID, d.EventType, d.OutboxID, d.Attempt, d.Status, sqlTimePtr(d.NextAttemptAt), sqlTime(d.CreatedAt))
	return wrapErrorOrNil("insert webhook delivery", err)
}

// RecordWebhookAttempt records the outcome of attempt d.Attempt of outbox row d.OutboxID
// (d.Status succeeded or failed, with its response): the pending row of that attempt is
// completed, or written when there is none (a worker died before). When retryAt is set, the
// next attempt is written as pending, due then. An endpoint deleted meanwhile is ErrNotFound.
func (s *Store) RecordWebhookAttempt(ctx context.Context, d WebhookDelivery, retryAt *time.Time) error {
	const op = "record webhook attempt"
	now := s.Now()
	return s.InTx(ctx, func(tx *Tx) error {
		var code, latency sql.NullInt64
		if d.ResponseCode > 0 {
			code = sql.NullInt64{Int64: int64(d.ResponseCode), Valid: true}
		}
		latency = sql.NullInt64{Int64: d.LatencyMs, Valid: true}
		_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO webhook_deliveries (id, endpoint_id, event_id,
			event_type, outbox_id, attempt, status, response_code, latency_ms, response_body, error, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (outbox_id, attempt) DO UPDATE SET status = excluded.status, response_code = excluded.response_code,
			latency_ms = excluded.latency_ms, response_body = excluded.response_body, error = excluded.error,
			next_attempt_at = excluded.next_attempt_at`),
			NewID("whd"), d.EndpointID, d.EventID, d.EventType, d.OutboxID, d.Attempt, d.Status, code, latency,
			nullString(d.ResponseBody), nullString(d.Error), sqlTimePtr(retryAt), sqlTime(now))
		if err != nil {
			return wrapError(op, err)
		}
		if retryAt == nil {
			return nil
		}
		next := WebhookDelivery{EndpointID: d.EndpointID, EventID: d.EventID, EventType: d.EventType,
			OutboxID: d.OutboxID, Attempt: d.Attempt + 1, NextAttemptAt: retryAt}
		next.ID, next.Status = NewID("whd"), DeliveryPending
		_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO webhook_deliveries (id, endpoint_id, event_id,
			event_type, outbox_id, attempt, status, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (outbox_id, attempt) DO NOTHING`),
			next.ID, next.EndpointID, next.EventID, next.EventType, next.OutboxID, next.Attempt, next.Status,
			sqlTimePtr(retryAt), sqlTime(now.Add(time.Microsecond)))
		return wrapErrorOrNil(op, err)
	})
}

// DeliveryPosition is a delivery's place in the newest-first order of WebhookDeliveries.
type DeliveryPosition struct {
	CreatedAt time.Time
	ID        string
}

// WebhookDeliveries returns up to limit attempts of endpointID, newest first (by CreatedAt,
// then ID), after the position after when set, and whether more follow.
func (s *Store) WebhookDeliveries(ctx context.Context, endpointID string, after *DeliveryPosition, limit int) ([]WebhookDelivery, bool, error) {
	query := `SELECT ` + webhookDeliveryColumns + ` FROM webhook_deliveries WHERE endpoint_id = ?`
	args := []any{endpointID}
	if after != nil {
		at := sqlTime(after.CreatedAt.UTC().Truncate(time.Microsecond))
		query += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, at, at, after.ID)
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1)
	var rows []webhookDeliveryRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), args...); err != nil {
		return nil, false, wrapError("webhook deliveries", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = r.delivery()
	}
	return out, more, nil
}

// WebhookDeliveryByID returns attempt id of endpointID, or ErrNotFound.
func (s *Store) WebhookDeliveryByID(ctx context.Context, endpointID, id string) (WebhookDelivery, error) {
	var r webhookDeliveryRow
	err := s.reader.GetContext(ctx, &r, s.reader.Rebind(`SELECT `+webhookDeliveryColumns+` FROM webhook_deliveries
		WHERE endpoint_id = ? AND id = ?`), endpointID, id)
	if err != nil {
		return WebhookDelivery{}, wrapError("webhook delivery", err)
	}
	return r.delivery(), nil
}

// OutboxDepth counts the outbox's pending rows by kind.
func (s *Store) OutboxDepth(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	err := s.reader.SelectContext(ctx, &rows, `SELECT kind, COUNT(*) AS n FROM outbox
		WHERE sent_at IS NULL AND failed_at IS NULL GROUP BY kind`)
	if err != nil {
		return nil, wrapError("outbox depth", err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Kind] = r.N
	}
	return out, nil
}

// DeleteOldWebhookHistory deletes up to limit events and up to limit attempts created before
// before, and returns how many rows it deleted.
func (s *Store) DeleteOldWebhookHistory(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	err := s.InTx(ctx, func(tx *Tx) error {
		for _, table := range []string{"webhook_deliveries", "webhook_events"} {
			m, err := tx.execCount(ctx, "delete old webhook history", `DELETE FROM `+table+` WHERE id IN (SELECT id FROM `+table+`
				WHERE created_at < ? ORDER BY created_at LIMIT ?)`, sqlTime(before), limit)
			if err != nil {
				return err
			}
			n += m
		}
		return nil
	})
	return n, err
}
