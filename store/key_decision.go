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
// index on project_id and filtered the project's other bindings). It reads the decision epoch
// in the same statement (epochColumn), and so in the same snapshot as the key and the decision.
func apiKeyDecisionQuery(d Dialect) string {
	return `SELECT k.id AS key_id, k.public_id, k.secret_hash,
		k.expires_at, k.revoked_at, k.last_used_at,
		a.id AS account_id, a.name AS account_name, a.project_id, p.organization_id,
		COALESCE(a.environment_id, '') AS environment_id, a.scopes, a.disabled_at,
		p.archived_at IS NOT NULL AS project_archived,
		o.archived_at IS NOT NULL AS organization_archived,
		d.slug AS role_slug, d.permission AS granted, d.expires_at AS binding_expires_at,
		` + epochColumn[d] + `
	FROM api_keys k
	JOIN service_accounts a ON a.id = k.service_account_id
	JOIN projects p ON p.id = a.project_id
	JOIN organizations o ON o.id = p.organization_id
	LEFT JOIN (SELECT r.slug, rp.permission, b.expires_at
		FROM role_bindings b
			JOIN project_roles r ON r.id = b.role_id
			LEFT JOIN project_role_permissions rp ON rp.role_id = b.role_id AND rp.permission IN (?, '*')
		WHERE b.project_id = ? AND b.principal_type = ? AND b.principal_id = ?
			AND (b.expires_at IS NULL OR b.expires_at > ?)) d ON a.project_id = ?
	WHERE k.public_id = ?`
}

// The two forms of apiKeyDecisionQuery.
var apiKeyDecisionQueries = map[Dialect]string{SQLite: apiKeyDecisionQuery(SQLite), Postgres: apiKeyDecisionQuery(Postgres)}

// Decision is the answer of Decide: whether the permission is held, and the
// sorted slugs of the roles bound (never nil).
type Decision struct {
	Allowed bool
	Roles   []string
}

// KeyDecision is what APIKeyDecision read in one statement.
type KeyDecision struct {
	// Key is the key, not judged (as APIKeyByPublicID returns it).
	Key APIKeyAuth
	// Decision is the decision, or nil when the key belongs to another project than the one
	// asked about: the caller then resolves the request as usual.
	Decision *Decision
	// Until is the earliest expiry of the bindings the decision read (nil when none expires,
	// or no decision): from then the same rows may give another answer.
	Until *time.Time
	// Epoch is the decision epoch of the key's project (DecisionEpoch), read
	// with the key and the decision.
	Epoch Epoch
}

// APIKeyDecision is APIKeyByPublicID(publicID) and, when the key's project is
// projectID, DecideUntil(projectID, principalType, principalID, permission, now),
// with the decision epoch of the key's project, read with one SQL
// query (and so in one snapshot). Like APIKeyByPublicID it does not judge the key,
// and it returns ErrNotFound when no key has that public id; the caller must check
// the key (its secret, APIKeyUsable, its scopes) before it uses the decision.
func (s *Store) APIKeyDecision(ctx context.Context, publicID, projectID, principalType, principalID, permission string, now time.Time) (KeyDecision, error) {
	const op = "api key decision"
	stmt, err := s.readStatement(ctx, apiKeyDecisionQueries[s.dialect])
	if err != nil {
		return KeyDecision{}, wrapError(op, err)
	}
	rows, err := stmt.QueryxContext(ctx, permission, projectID, principalType, principalID, sqlTime(now), projectID, publicID)
	if err != nil {
		return KeyDecision{}, wrapError(op, err)
	}
	defer rows.Close()
	var r struct {
		apiKeyAuthRow
		Epoch            Epoch          `db:"decision_epoch"`
		RoleSlug         sql.NullString `db:"role_slug"`
		Granted          sql.NullString `db:"granted"`
		BindingExpiresAt *sqlTime       `db:"binding_expires_at"`
	}
	var out KeyDecision
	found := false
	d := Decision{Roles: []string{}}
	for rows.Next() {
		r.BindingExpiresAt = nil
		if err := rows.StructScan(&r); err != nil {
			return KeyDecision{}, wrapError(op, err)
		}
		found = true
		if r.RoleSlug.Valid {
			d.Roles = append(d.Roles, r.RoleSlug.String)
			d.Allowed = d.Allowed || r.Granted.Valid
		}
		if e := timePtr(r.BindingExpiresAt); e != nil && (out.Until == nil || e.Before(*out.Until)) {
			out.Until = e
		}
	}
	if err := rows.Err(); err != nil {
		return KeyDecision{}, wrapError(op, err)
	}
	if !found {
		return KeyDecision{}, wrapError(op, sql.ErrNoRows)
	}
	if out.Key, err = r.auth(op); err != nil {
		return KeyDecision{}, err
	}
	out.Epoch = r.Epoch
	if out.Key.ProjectID != projectID {
		out.Until = nil
		return out, nil
	}
	slices.Sort(d.Roles)
	d.Roles = slices.Compact(d.Roles)
	out.Decision = &d
	return out, nil
}
