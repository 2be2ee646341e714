package server

import (
	"context"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// errSubjectNotHeld refuses to delete an identity the project never served.
var errSubjectNotHeld = &Error{Status: http.StatusForbidden, Kind: kindForbidden,
	Title: "No OIDC client of this project holds a consent or refresh token from this subject"}

// DeleteSubject deletes the user behind a subject id when one of the project's OIDC clients
// holds a grant from them (store.Tx.SubjectHeldByProject), with their sessions, memberships,
// tokens and role bindings, audited in the same transaction.
func (s *Server) DeleteSubject(ctx context.Context, req gen.DeleteSubjectRequestObject) (gen.DeleteSubjectResponseObject, error) {
	scope := ScopeFrom(ctx)
	if _, err := s.store.User(ctx, req.SubjectId); err != nil {
		return nil, err // ErrNotFound: unknown, or deleted already
	}
	var d store.SubjectDeletion
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		held, err := tx.SubjectHeldByProject(ctx, scope.ProjectID, req.SubjectId, s.store.Now())
		if err != nil {
			return err
		}
		if !held {
			return errSubjectNotHeld
		}
		if d, err = tx.DeleteSubject(ctx, req.SubjectId); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "subject.delete", TargetType: "subject", TargetID: req.SubjectId,
			OrganizationID: scope.OrganizationID, ProjectID: scope.ProjectID,
			Metadata: map[string]any{"roleBindings": d.RoleBindings, "oauthTokens": d.OAuthTokens, "consents": d.Consents}})
	})
	if err != nil {
		return nil, err
	}
	return gen.DeleteSubject200JSONResponse{Data: gen.SubjectDeletion{SubjectId: req.SubjectId, Deleted: true,
		RoleBindings: int(d.RoleBindings), OauthTokens: int(d.OAuthTokens), Consents: int(d.Consents)}}, nil
}
