package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Actor types of an audit entry.
const (
	ActorUser           = "user"
	ActorServiceAccount = "service_account"
	ActorSystem         = "system"
)

// MaxAuditPage is the most entries ListAudit returns at once.
const MaxAuditPage = 100

// AuditEntry records one mutation: who (actor) did what (action, e.g.
// "project.create") to which object (target), in which organization and
// project, from which request.
//
// OrganizationID and ProjectID are empty when the entry belongs to no
// organization or project; empty is stored as NULL. Entries about a project
// carry its organization too, so organization listings include them.
// Metadata is a JSON object; nil or empty is stored as NULL and read back as
// nil, and numbers read back as float64.
type AuditEntry struct {
	ID             string
	ActorType      string // ActorUser, ActorServiceAccount or ActorSystem
	ActorID        string
	Action         string
	TargetType     string
	TargetID       string
	OrganizationID string
	ProjectID      string
	RequestID      string
	IPAddress      string
	UserAgent      string
	Metadata       map[string]any
	OccurredAt     time.Time
}

// AuditFilter selects audit entries. Empty fields do not filter; set fields
// must all match.
type AuditFilter struct {
	OrganizationID string
	ProjectID      string
	// Action, ActorID and TargetID match exactly.
	Action   string
	ActorID  string
	TargetID string
	// Since (inclusive) and Until (exclusive) bound OccurredAt; zero does not
	// bound.
	Since, Until time.Time
	// After continues a listing: only entries older than it, in the order of
	// ListAudit (OccurredAt, then ID, both descending).
	After *AuditPosition
	// Limit is the page size: values outside 1..MaxAuditPage mean
	// MaxAuditPage.
	Limit int
}

// AuditPosition is an entry's place in the newest-first order of ListAudit:
// the last entry of a page, from which the next page continues.
type AuditPosition struct {
	OccurredAt time.Time
	ID         string
}

// AuditHook runs in the transaction of each audit entry, after the entry is written; an error
// fails the transaction. Outbound events hang here: every audit entry is also an event.
type AuditHook func(ctx context.Context, tx *Tx, e AuditEntry) error

// OnAudit makes h run after every audit entry AppendAudit writes, in its transaction. Call it
// once while wiring, before the store serves requests.
func (s *Store) OnAudit(h AuditHook) { s.auditHook = h }

// AppendAudit writes e within the transaction of the mutation it records, so
// the entry exists exactly when the mutation commits. It fills in an empty
// e.ID (NewID("aud")) and a zero e.OccurredAt (Store.Now); a given
// OccurredAt is stored in UTC at microsecond precision. The hook set with
// OnAudit runs next, in tx.
//
// It returns ErrInvalid when ActorType is not one of the Actor constants,
// Action is empty or Metadata does not encode as JSON, and ErrConflict when
// e.ID is already taken.
func (tx *Tx) AppendAudit(ctx context.Context, e *AuditEntry) error {
	switch e.ActorType {
	case ActorUser, ActorServiceAccount, ActorSystem:
	default:
		return fmt.Errorf("store: append audit: %w: actor type %q", ErrInvalid, e.ActorType)
	}
	if e.Action == "" {
		return fmt.Errorf("store: append audit: %w: empty action", ErrInvalid)
	}
	var metadata sql.NullString
	if len(e.Metadata) > 0 {
		b, err := json.Marshal(e.Metadata)
		if err != nil {
			return fmt.Errorf("store: append audit: %w: metadata: %v", ErrInvalid, err)
		}
		metadata = sql.NullString{String: string(b), Valid: true}
	}
	if e.ID == "" {
		e.ID = NewID("aud")
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = tx.store.Now()
	} else {
		e.OccurredAt = e.OccurredAt.UTC().Truncate(time.Microsecond)
	}

	const query = `INSERT INTO audit_logs (id, occurred_at, actor_type, actor_id, action,
		target_type, target_id, organization_id, project_id, request_id, ip_address,
		user_agent, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		e.ID, sqlTime(e.OccurredAt), e.ActorType, e.ActorID, e.Action,
		e.TargetType, e.TargetID, nullString(e.OrganizationID), nullString(e.ProjectID),
		e.RequestID, e.IPAddress, e.UserAgent, metadata)
	if err != nil {
		return wrapError("append audit", err)
	}
	if h := tx.store.auditHook; h != nil {
		return h(ctx, tx, *e)
	}
	return nil
}

// ListAudit returns the entries matching f, newest first (by OccurredAt, then
// ID), at most f.Limit of them (see AuditFilter). No match is an empty slice,
// not ErrNotFound.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	entries, _, err := s.ListAuditPage(ctx, f)
	return entries, err
}

// ListAuditPage is ListAudit, and reports whether more entries match after
// the page (continue with f.After set to the last entry's position). It runs
// on the read replica that ctx carries, if any (ReplicaReads).
func (s *Store) ListAuditPage(ctx context.Context, f AuditFilter) (entries []AuditEntry, more bool, err error) {
	var where []string
	var args []any
	for _, c := range []struct{ column, value string }{
		{"organization_id", f.OrganizationID}, {"project_id", f.ProjectID}, {"action", f.Action},
		{"actor_id", f.ActorID}, {"target_id", f.TargetID},
	} {
		if c.value != "" {
			where = append(where, c.column+" = ?")
			args = append(args, c.value)
		}
	}
	if !f.Since.IsZero() {
		where = append(where, "occurred_at >= ?")
		args = append(args, sqlTime(f.Since.UTC().Truncate(time.Microsecond)))
	}
	if !f.Until.IsZero() {
		where = append(where, "occurred_at < ?")
		args = append(args, sqlTime(f.Until.UTC().Truncate(time.Microsecond)))
	}
	if f.After != nil {
		at := sqlTime(f.After.OccurredAt.UTC().Truncate(time.Microsecond))
		where = append(where, "(occurred_at < ? OR (occurred_at = ? AND id < ?))")
		args = append(args, at, at, f.After.ID)
	}
	limit := f.Limit
	if limit <= 0 || limit > MaxAuditPage {
		limit = MaxAuditPage
	}
	args = append(args, limit+1)

	query := `SELECT id, occurred_at, actor_type, actor_id, action, target_type, target_id,
		organization_id, project_id, request_id, ip_address, user_agent, metadata
		FROM audit_logs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY occurred_at DESC, id DESC LIMIT ?"

	var rows []auditRow
	if err := s.readerFor(ctx).SelectContext(ctx, &rows, s.reader.Rebind(query), args...); err != nil {
		return nil, false, wrapError("list audit", err)
	}
	if len(rows) > limit {
		rows, more = rows[:limit], true
	}
	entries = make([]AuditEntry, len(rows))
	for i, r := range rows {
		if entries[i], err = r.entry(); err != nil {
			return nil, false, fmt.Errorf("store: list audit: %w", err)
		}
	}
	return entries, more, nil
}

// auditRow is an audit_logs row as scanned.
type auditRow struct {
	ID             string         `db:"id"`
	OccurredAt     sqlTime        `db:"occurred_at"`
	ActorType      string         `db:"actor_type"`
	ActorID        string         `db:"actor_id"`
	Action         string         `db:"action"`
	TargetType     string         `db:"target_type"`
	TargetID       string         `db:"target_id"`
	OrganizationID sql.NullString `db:"organization_id"`
	ProjectID      sql.NullString `db:"project_id"`
	RequestID      string         `db:"request_id"`
	IPAddress      string         `db:"ip_address"`
	UserAgent      string         `db:"user_agent"`
	Metadata       sql.NullString `db:"metadata"`
}

func (r auditRow) entry() (AuditEntry, error) {
	e := AuditEntry{
		ID:             r.ID,
		ActorType:      r.ActorType,
		ActorID:        r.ActorID,
		Action:         r.Action,
		TargetType:     r.TargetType,
		TargetID:       r.TargetID,
		OrganizationID: r.OrganizationID.String,
		ProjectID:      r.ProjectID.String,
		RequestID:      r.RequestID,
		IPAddress:      r.IPAddress,
		UserAgent:      r.UserAgent,
		OccurredAt:     time.Time(r.OccurredAt),
	}
	if r.Metadata.Valid {
		if err := json.Unmarshal([]byte(r.Metadata.String), &e.Metadata); err != nil {
			return AuditEntry{}, fmt.Errorf("audit %s: metadata: %w", r.ID, err)
		}
	}
	return e, nil
}

// nullString stores "" as NULL.
func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}
