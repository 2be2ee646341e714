package store

import (
	"context"
	"time"
)

// A subject is a product's end user as the OAuth provider knows it: a user, whose id is the
// sub of the tokens issued to them.

// SubjectDeletion counts what DeleteSubject removed besides the user row and what cascades
// with it (sessions, linked accounts, memberships, invitations they sent).
type SubjectDeletion struct {
	RoleBindings int64
	OAuthTokens  int64
	Consents     int64
}

// SubjectHeldByProject reports whether one of project projectID's OIDC clients holds a grant
// from user userID at now: an active refresh token that has not expired, or a consent. A
// deletion is allowed only then, so that one project cannot delete an identity it never served.
func (tx *Tx) SubjectHeldByProject(ctx context.Context, projectID, userID string, now time.Time) (bool, error) {
	var held bool
	err := tx.tx.GetContext(ctx, &held, tx.tx.Rebind(`SELECT EXISTS (
		SELECT 1 FROM oauth_tokens t JOIN oidc_clients c ON c.id = t.client_id
		WHERE t.kind = ? AND t.subject = ? AND t.active = ? AND t.expires_at > ? AND c.project_id = ?
	) OR EXISTS (
		SELECT 1 FROM oauth_consents oc JOIN oidc_clients c ON c.id = oc.client_id
		WHERE oc.user_id = ? AND c.project_id = ?)`),
		OAuthRefresh, userID, true, sqlTime(now), projectID, userID, projectID)
	if err != nil {
		return false, wrapError("subject held by project", err)
	}
	return held, nil
}

// DeleteSubject deletes user userID with every role binding naming it (in every project), every
// OAuth code and token issued to it and every consent it gave; sessions, linked accounts and memberships go with the
// user row (ON DELETE CASCADE). Audit rows and accounting stay. It returns ErrNotFound when
// there is no such user.
func (tx *Tx) DeleteSubject(ctx context.Context, userID string) (SubjectDeletion, error) {
	var d SubjectDeletion
	var err error
	if d.RoleBindings, err = tx.execCount(ctx, "delete subject",
		`DELETE FROM role_bindings WHERE principal_type = ? AND principal_id = ?`, PrincipalUser, userID); err != nil {
		return d, err
	}
	if d.OAuthTokens, err = tx.execCount(ctx, "delete subject",
		`DELETE FROM oauth_tokens WHERE subject = ?`, userID); err != nil {
		return d, err
	}
	if d.Consents, err = tx.execCount(ctx, "delete subject",
		`DELETE FROM oauth_consents WHERE user_id = ?`, userID); err != nil {
		return d, err
	}
	if err := tx.DeleteUser(ctx, userID); err != nil {
		return d, err
	}
	return d, nil
}
