package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Deleting one's own account (better-auth's delete-user): the same deletion as subject deletion,
// asked for by the user instead of a project.

// freshSessionAge is how recently a session must have started for an account without a
// password to delete itself without one (better-auth's default freshAge, a day).
const freshSessionAge = 24 * time.Hour

// Errors of delete-user, with better-auth's codes and messages.
var (
	errPasswordRequired = authError(http.StatusBadRequest, kindClientError,
		"USER_ALREADY_HAS_PASSWORD", "User already has a password. Provide that to delete the account.")
	errSessionNotFresh = authError(http.StatusBadRequest, kindClientError,
		"SESSION_EXPIRED", "Session expired. Re-authenticate to perform this action.")
)

// errSoleOwner is the 409 for the only owner of organizations that are not archived; the
// message names them, so that the user knows where to go.
func errSoleOwner(orgs []store.Organization) *Error {
	names := make([]string, len(orgs))
	for i, o := range orgs {
		names[i] = o.Name
	}
	what := "the organization"
	if len(orgs) > 1 {
		what = "each of them"
	}
	return &Error{Status: http.StatusConflict, Kind: kindConflict,
		Title: "You are the only owner of an organization",
		Code:  "YOU_CANNOT_DELETE_YOUR_ACCOUNT_AS_THE_ONLY_OWNER",
		Message: "You are the only owner of " + joinNames(names) + ". Make another member an owner or archive " +
			what + ", then delete your account."}
}

// joinNames joins names as a sentence does: "A", "A and B", "A, B and C".
func joinNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// DeleteUser deletes the caller's account once they proved it is theirs: its password (checked
// and throttled as change-password does it), or for an account without one a session started
// within freshSessionAge. The only owner of an organization that is not archived is refused.
// The user goes with store.Tx.DeleteSubject, audited as user.delete in the same transaction, and
// the session cookie is expired.
func (s *Server) DeleteUser(ctx context.Context, request gen.DeleteUserRequestObject) (gen.DeleteUserResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	var password *string
	if request.Body != nil {
		password = request.Body.Password
	}
	if err := s.checkDeletionProof(ctx, p, password); err != nil {
		return nil, err
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		sole, err := tx.SoleOwnedOrganizations(ctx, p.ID())
		if err != nil {
			return err
		}
		if len(sole) > 0 {
			return errSoleOwner(sole)
		}
		d, err := tx.DeleteSubject(ctx, p.ID())
		if err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.delete", TargetType: "user", TargetID: p.ID(),
			Metadata: map[string]any{"roleBindings": d.RoleBindings, "oauthTokens": d.OAuthTokens, "consents": d.Consents}})
	})
	if errors.Is(err, store.ErrNotFound) {
		// Deleted by a request that raced this one: the session is gone with it.
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	s.expireSessionCookies(ctx)
	return gen.DeleteUser200JSONResponse{Body: struct {
		Message gen.DeleteUser200JSONResponseBodyMessage `json:"message"`
		Success bool                                     `json:"success"`
	}{Message: gen.UserDeleted, Success: true}}, nil
}

// checkDeletionProof checks that the caller may delete the account: with its password when it
// has one (a wrong one counts against the account's throttle), otherwise with a fresh session.
func (s *Server) checkDeletionProof(ctx context.Context, p *Principal, password *string) error {
	if password != nil {
		return s.checkCurrentPassword(ctx, p.ID(), *password)
	}
	hash, err := s.store.PasswordHash(ctx, p.ID())
	if err != nil {
		return err
	}
	if hash != "" {
		return errPasswordRequired
	}
	if s.store.Now().Sub(p.Session.CreatedAt) >= freshSessionAge {
		return errSessionNotFresh
	}
	return nil
}
