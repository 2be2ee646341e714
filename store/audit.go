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
	// Limit is the page size: values outside 1..MaxAuditPage mean
	// MaxAuditPage.
	Limit int
}

// AppendAudit writes e within the transaction of the mutation it records, so
// the entry exists exactly when the mutation commits. It fills in an empty
// e.ID (NewID("aud")) and a zero e.OccurredAt (Store.Now); a given
// OccurredAt is stored in UTC at microsecond precision.
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
	return nil
}

// ListAudit returns the entries matching f, newest first (by OccurredAt, then
// ID), at most f.Limit of them (see AuditFilter). No match is an empty slice,
// not ErrNotFound.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var where []string
	var args []any
	if f.OrganizationID != "" {
		where = append(where, "organization_id = ?")
		args = append(args, f.OrganizationID)
	}
	if f.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, f.ProjectID)
	}
	limit := f.Limit
	if limit <= 0 || limit > MaxAuditPage {
		limit = MaxAuditPage
	}
	args = append(args, limit)

	query := `SELECT id, occurred_at, actor_type, actor_id, action, target_type, target_id,
		organization_id, project_id, request_id, ip_address, user_agent, metadata
		FROM audit_logs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY occurred_at DESC, id DESC LIMIT ?"

	var rows []auditRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), args...); err != nil {
		return nil, wrapError("list audit", err)
	}
	entries := make([]AuditEntry, len(rows))
	for i, r := range rows {
		var err error
		if entries[i], err = r.entry(); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
	}
	return entries, nil
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
