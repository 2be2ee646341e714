package server

import (
	"context"

	"github.com/gatehouse-dev/gatehouse/store"
)

// auditEvent is one administrative mutation, recorded by audit in the mutation's transaction.
type auditEvent struct {
	Action         string // "<resource>.<verb>", e.g. "project.create"
	TargetType     string
	TargetID       string
	OrganizationID string
	ProjectID      string
	Metadata       map[string]any
}

// audit appends ev inside tx with the caller, request id, client IP and user agent of ctx. The
// row commits exactly when the mutation does; an error fails the mutation.
func audit(ctx context.Context, tx *store.Tx, ev auditEvent) error {
	e := auditEntry(ctx, ev)
	return tx.AppendAudit(ctx, &e)
}

// auditEntry is the row audit appends for ev, for callers that hand it to a function that
// appends it (identity.ClaimEmail).
func auditEntry(ctx context.Context, ev auditEvent) store.AuditEntry {
	meta := requestMetaFrom(ctx)
	actorType, actorID := actor(ctx)
	return store.AuditEntry{
		ActorType:      actorType,
		ActorID:        actorID,
		Action:         ev.Action,
		TargetType:     ev.TargetType,
		TargetID:       ev.TargetID,
		OrganizationID: ev.OrganizationID,
		ProjectID:      ev.ProjectID,
		RequestID:      meta.ID,
		IPAddress:      meta.IP,
		UserAgent:      meta.UserAgent,
		Metadata:       ev.Metadata,
	}
}

// actor is who the request of ctx acts as, for audit rows and config versions: the caller's
// principal kind and id, or store.ActorSystem and "" when there is no caller.
func actor(ctx context.Context) (actorType, actorID string) {
	if p := PrincipalFrom(ctx); p != nil {
		return string(p.Kind), p.ID()
	}
	return store.ActorSystem, ""
}
