package store

import (
	"context"
	"database/sql"
	"slices"
	"time"
)

// apiKeyDecisionQuery is the authentication lookup of apiKeyByPublicIDQuery and
// the decision of decideQuery in one statement, for POST /api/v1/authorize
// called with an API key, its hot path: one round trip instead of three (key,
// scope, decision). The key's row is repeated once per row of the decision
// (one row with NULL role and permission when the principal has no unexpired
// binding, or when the decision's project is not the key's own, where the
// decision is not made at all). The decision's subquery names the project by parameter, not
// through the join, so that PostgreSQL's generic plan for the prepared statement answers it from
// role_bindings_decision_idx alone, as decideQuery does (joined on a.project_id it chose an
// index on project_id and filtered the project's other bindings).
const apiKeyDecisionQuery = `SELECT k.id AS key_id, k.public_id, k.secret_hash,
		k.expires_at, k.revoked_at, k.last_used_at,
		a.id AS account_id, a.name AS account_name, a.project_id, p.organization_id,
		COALESCE(a.environment_id, '') AS environment_id, a.scopes, a.disabled_at,
		p.archived_at IS NOT NULL AS project_archived,
		o.archived_at IS NOT NULL AS organization_archived,
		d.slug AS role_slug, d.permission AS granted
	FROM api_keys k
	JOIN service_accounts a ON a.id = k.service_account_id
	JOIN projects p ON p.id = a.project_id
	JOIN organizations o ON o.id = p.organization_id
	LEFT JOIN (SELECT r.slug, rp.permission
		FROM role_bindings b
			JOIN project_roles r ON r.id = b.role_id
			LEFT JOIN project_role_permissions rp ON rp.role_id = b.role_id AND rp.permission IN (?, '*')
		WHERE b.project_id = ? AND b.principal_type = ? AND b.principal_id = ?
			AND (b.expires_at IS NULL OR b.expires_at > ?)) d ON a.project_id = ?
	WHERE k.public_id = ?`

// Decision is the answer of Decide: whether the permission is held, and the
// sorted slugs of the roles bound (never nil).
type Decision struct {
	Allowed bool
	Roles   []string
}

// APIKeyDecision is APIKeyByPublicID(publicID) and, when the key's project is
// projectID, Decide(projectID, principalType, principalID, permission, now),
// read with one SQL query (and so in one snapshot). decision is nil when the
// key belongs to another project: the caller then resolves the request as
// usual. Like APIKeyByPublicID it does not judge the key, and it returns
// ErrNotFound when no key has that public id; the caller must check the key
// (its secret, APIKeyUsable, its scopes) before it uses the decision.
func (s *Store) APIKeyDecision(ctx context.Context, publicID, projectID, principalType, principalID, permission string, now time.Time) (key APIKeyAuth, decision *Decision, err error) {
	const op = "api key decision"
	stmt, err := s.readStatement(ctx, apiKeyDecisionQuery)
	if err != nil {
		return APIKeyAuth{}, nil, wrapError(op, err)
	}
	rows, err := stmt.QueryxContext(ctx, permission, projectID, principalType, principalID, sqlTime(now), projectID, publicID)
	if err != nil {
		return APIKeyAuth{}, nil, wrapError(op, err)
	}
	defer rows.Close()
	var r struct {
		apiKeyAuthRow
		RoleSlug sql.NullString `db:"role_slug"`
		Granted  sql.NullString `db:"granted"`
	}
	found := false
	d := Decision{Roles: []string{}}
	for rows.Next() {
		if err := rows.StructScan(&r); err != nil {
			return APIKeyAuth{}, nil, wrapError(op, err)
		}
		found = true
		if r.RoleSlug.Valid {
			d.Roles = append(d.Roles, r.RoleSlug.String)
			d.Allowed = d.Allowed || r.Granted.Valid
		}
	}
	if err := rows.Err(); err != nil {
		return APIKeyAuth{}, nil, wrapError(op, err)
	}
	if !found {
		return APIKeyAuth{}, nil, wrapError(op, sql.ErrNoRows)
	}
	if key, err = r.auth(op); err != nil {
		return APIKeyAuth{}, nil, err
	}
	if key.ProjectID != projectID {
		return key, nil, nil
	}
	slices.Sort(d.Roles)
	d.Roles = slices.Compact(d.Roles)
	return key, &d, nil
}
