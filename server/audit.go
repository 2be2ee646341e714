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
	meta := requestMetaFrom(ctx)
	actorType, actorID := store.ActorSystem, ""
	if p := PrincipalFrom(ctx); p != nil {
		actorType, actorID = string(p.Kind), p.ID()
	}
	return tx.AppendAudit(ctx, &store.AuditEntry{
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
	})
}
