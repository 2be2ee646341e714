package store

import (
	"context"
	"fmt"
)

// ScopeRef names the object an /api/v1 request addresses: exactly one of its
// fields is set, the most specific one the path names (an environment ID
// for /environments/{environmentId}/..., a project ID for
// /projects/{projectId}/..., an organization ID for
// /organizations/{organizationId}/...).
type ScopeRef struct {
	OrganizationID string
	ProjectID      string
	EnvironmentID  string
}

// Scope is a ScopeRef resolved to the whole chain of tenancy above it, with
// what authorization needs: whether the organization and project are
// archived, and the caller's membership role.
//
// ProjectID is empty for an organization ref, and EnvironmentID is empty
// unless the ref named an environment. MemberRole is the user's role in the
// organization (one role or several comma-joined), or "" when the user is
// not a member or no user was given.
type Scope struct {
	OrganizationID       string
	ProjectID            string
	EnvironmentID        string
	OrganizationArchived bool
	ProjectArchived      bool
	MemberRole           string
	// TwoFactorRequired is the organization's RequireTwoFactor; MemberTwoFactor whether the
	// user is a member whose second factor is on (a verified TOTP or a registered passkey).
	TwoFactorRequired bool
	MemberTwoFactor   bool
}

// Resolution queries, one per kind of ref. Each is the only query
// ResolveScope runs: it walks up from the named row to its organization and
// joins the user's membership there. A user ID of "" matches no member.
const (
	resolveEnvironmentQuery = `SELECT o.id AS organization_id, p.id AS project_id, e.id AS environment_id,
			o.archived_at IS NOT NULL AS organization_archived,
			p.archived_at IS NOT NULL AS project_archived,
			COALESCE(m.role, '') AS member_role,
			o.require_two_factor AS two_factor_required,
			(COALESCE(tf.verified, 1 = 0) OR EXISTS (SELECT 1 FROM passkeys pk WHERE pk.user_id = m.user_id)) AS member_two_factor
		FROM environments e
		JOIN projects p ON p.id = e.project_id
		JOIN organizations o ON o.id = p.organization_id
		LEFT JOIN members m ON m.organization_id = o.id AND m.user_id = ?
		LEFT JOIN two_factors tf ON tf.user_id = m.user_id
		WHERE e.id = ?`
	resolveProjectQuery = `SELECT o.id AS organization_id, p.id AS project_id, '' AS environment_id,
			o.archived_at IS NOT NULL AS organization_archived,
			p.archived_at IS NOT NULL AS project_archived,
			COALESCE(m.role, '') AS member_role,
			o.require_two_factor AS two_factor_required,
			(COALESCE(tf.verified, 1 = 0) OR EXISTS (SELECT 1 FROM passkeys pk WHERE pk.user_id = m.user_id)) AS member_two_factor
		FROM projects p
		JOIN organizations o ON o.id = p.organization_id
		LEFT JOIN members m ON m.organization_id = o.id AND m.user_id = ?
		LEFT JOIN two_factors tf ON tf.user_id = m.user_id
		WHERE p.id = ?`
	resolveOrganizationQuery = `SELECT o.id AS organization_id, '' AS project_id, '' AS environment_id,
			o.archived_at IS NOT NULL AS organization_archived,
			1 = 0 AS project_archived,
			COALESCE(m.role, '') AS member_role,
			o.require_two_factor AS two_factor_required,
			(COALESCE(tf.verified, 1 = 0) OR EXISTS (SELECT 1 FROM passkeys pk WHERE pk.user_id = m.user_id)) AS member_two_factor
		FROM organizations o
		LEFT JOIN members m ON m.organization_id = o.id AND m.user_id = ?
		LEFT JOIN two_factors tf ON tf.user_id = m.user_id
		WHERE o.id = ?`
)

// ResolveScope resolves ref for userID (which may be "", e.g. for a service
// account) with exactly one SQL query. It is on the path of every /api/v1
// request. Archived organizations and projects resolve too, with their
// Archived flags set: callers decide what an archived scope allows.
//
// It returns ErrInvalid unless exactly one field of ref is set, and
// ErrNotFound when the named row does not exist.
func (s *Store) ResolveScope(ctx context.Context, ref ScopeRef, userID string) (Scope, error) {
	const op = "resolve scope"
	var query, id string
	set := 0
	if ref.EnvironmentID != "" {
		query, id, set = resolveEnvironmentQuery, ref.EnvironmentID, set+1
	}
	if ref.ProjectID != "" {
		query, id, set = resolveProjectQuery, ref.ProjectID, set+1
	}
	if ref.OrganizationID != "" {
		query, id, set = resolveOrganizationQuery, ref.OrganizationID, set+1
	}
	if set != 1 {
		return Scope{}, fmt.Errorf("store: %s: %w: want exactly one of organization, project, environment", op, ErrInvalid)
	}

	var r struct {
		OrganizationID       string `db:"organization_id"`
		ProjectID            string `db:"project_id"`
		EnvironmentID        string `db:"environment_id"`
		OrganizationArchived bool   `db:"organization_archived"`
		ProjectArchived      bool   `db:"project_archived"`
		MemberRole           string `db:"member_role"`
		TwoFactorRequired    bool   `db:"two_factor_required"`
		MemberTwoFactor      bool   `db:"member_two_factor"`
	}
	stmt, err := s.readStatement(ctx, query)
	if err != nil {
		return Scope{}, wrapError(op, err)
	}
	if err := stmt.GetContext(ctx, &r, userID, id); err != nil {
		return Scope{}, wrapError(op, err)
	}
	return Scope(r), nil
}
