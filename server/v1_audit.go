package server

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// auditQuery is the query of the two audit-log listings (their generated parameter types
// differ only in name).
type auditQuery struct {
	Action, ActorID, TargetID *string
	Since, Until              *time.Time
	Cursor                    *string
}

// auditPage lists one page (store.MaxAuditPage) of the entries that base and q select, newest
// first, and returns the cursor of the next page (nil on the last one). A cursor this API did
// not issue is a 400 on query.cursor; an until not after since is a 400 on query.until.
func (s *Server) auditPage(ctx context.Context, base store.AuditFilter, q auditQuery) ([]gen.AuditLogEntry, *string, error) {
	f := base
	f.Limit = store.MaxAuditPage
	f.Action, f.ActorID, f.TargetID = deref(q.Action), deref(q.ActorID), deref(q.TargetID)
	if q.Since != nil {
		f.Since = *q.Since
	}
	if q.Until != nil {
		f.Until = *q.Until
	}
	var errs []FieldError
	if q.Since != nil && q.Until != nil && !q.Until.After(*q.Since) {
		errs = append(errs, FieldError{Path: []string{"query", "until"}, Message: "must be after since"})
	}
	if q.Cursor != nil {
		pos, ok := decodeAuditCursor(*q.Cursor)
		if !ok {
			errs = append(errs, FieldError{Path: []string{"query", "cursor"}, Message: "is not a cursor of this list"})
		}
		f.After = &pos
	}
	if len(errs) > 0 {
		return nil, nil, Validation(errs...)
	}
	entries, more, err := s.store.ListAuditPage(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	var next *string
	if more {
		last := entries[len(entries)-1]
		c := encodeAuditCursor(store.AuditPosition{OccurredAt: last.OccurredAt, ID: last.ID})
		next = &c
	}
	return auditJSON(entries), next, nil
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// An audit cursor is the last entry of the page before, opaque to callers: the unpadded
// base64url encoding of its OccurredAt (RFC 3339 with nanoseconds, UTC), a NUL byte and its id.

func encodeAuditCursor(last store.AuditPosition) string {
	return base64.RawURLEncoding.EncodeToString([]byte(last.OccurredAt.UTC().Format(time.RFC3339Nano) + "\x00" + last.ID))
}

// decodeAuditCursor reads a cursor made by encodeAuditCursor; ok is false for anything else.
func decodeAuditCursor(cursor string) (store.AuditPosition, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return store.AuditPosition{}, false
	}
	at, id, found := strings.Cut(string(raw), "\x00")
	if !found || id == "" || len(id) > 255 {
		return store.AuditPosition{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return store.AuditPosition{}, false
	}
	return store.AuditPosition{OccurredAt: t, ID: id}, true
}
