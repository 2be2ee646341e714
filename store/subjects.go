package store

import (
	"cmp"
	"context"
	"slices"
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

// SoleOwnedOrganizations returns the organizations, not archived, in which user userID is the
// only owner, ordered by name then id: an account that owns one of them alone must not be
// deleted, or the organization would be left without an owner. Each organization in which the
// user is an owner is counted with CountOwners, so it stays locked until the transaction ends
// and a concurrent deletion by the other owner waits and then sees this one's outcome.
func (tx *Tx) SoleOwnedOrganizations(ctx context.Context, userID string) ([]Organization, error) {
	const op = "sole owned organizations"
	// Locks are taken in id order, so two such transactions never wait on each other in a
	// cycle.
	query := `SELECT o.id FROM organizations o JOIN members m ON m.organization_id = o.id
		WHERE m.user_id = ? AND o.archived_at IS NULL AND (',' || REPLACE(m.role, ' ', '') || ',') LIKE ?
		ORDER BY o.id`
	var ids []string
	if err := tx.tx.SelectContext(ctx, &ids, tx.tx.Rebind(query), userID, "%,"+RoleOwner+",%"); err != nil {
		return nil, wrapError(op, err)
	}
	var out []Organization
	for _, id := range ids {
		n, err := tx.CountOwners(ctx, id)
		if err != nil {
			return nil, err
		}
		if n != 1 {
			continue
		}
		o, err := getOrganization(ctx, tx.tx, op, "id = ?", id)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Organization) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}
