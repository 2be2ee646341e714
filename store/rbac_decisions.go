package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// Project RBAC beyond one decision: several checks at once, each with the
// bindings that explain it (DecideBatch), a principal's effective permissions
// (EffectivePermissions) and the principals that hold a permission
// (PermissionHolders). They follow Decide's rule: a principal holds a
// permission when any of its bindings that has not expired (ExpiresAt nil or
// after now) names a role whose permissions contain the permission itself or
// "*". Each reads with one query, so in one snapshot, and writes nothing;
// nothing is cached, so every change shows in the next call.

// MaxChecks is the most checks one DecideBatch call takes.
const MaxChecks = 100

// DefaultHolderPage and MaxHolderPage are the default and largest page sizes
// of PermissionHolders.
const (
	DefaultHolderPage = 50
	MaxHolderPage     = 200
)

// Check is one question of DecideBatch: does the principal (PrincipalType,
// PrincipalID) hold Permission?
type Check struct {
	PrincipalType string // PrincipalUser or PrincipalServiceAccount
	PrincipalID   string
	Permission    string
}

// CheckedBinding is one binding of a checked principal in the project, as
// DecideBatch read it for one check.
type CheckedBinding struct {
	BindingID string
	RoleID    string
	RoleSlug  string
	ExpiresAt *time.Time
	// Expired is true when ExpiresAt is at or before the decision's time: the
	// binding no longer counts.
	Expired bool
	// Matched is the role's permission that matches the check: the checked
	// permission itself when the role holds it, else "*" when the role holds
	// that, else "" (the role does not grant it).
	Matched string
}

// CheckResult is the answer to one Check: the decision (Allowed, and Roles,
// the sorted slugs of the principal's unexpired bindings) and Bindings, every
// binding of the principal in the project, expired ones included, sorted by
// role slug, then binding id (an empty slice, never nil, for none; nil when
// DecideBatch was not asked to explain).
type CheckResult struct {
	Decision
	Bindings []CheckedBinding
	// Until is the earliest expiry of the principal's unexpired bindings (nil when none
	// expires), as DecideUntil reports it: from then the same rows may give another answer.
	Until *time.Time
}

// DenialReason says why a check is denied (see CheckResult.DenialReason).
type DenialReason string

// The denial reasons.
const (
	// DeniedNoBindings: the principal has no binding in the project.
	DeniedNoBindings DenialReason = "no_bindings"
	// DeniedBindingsExpired: at least one expired binding would have granted
	// the permission.
	DeniedBindingsExpired DenialReason = "bindings_expired"
	// DeniedNotGranted: the principal has bindings, but no role of an
	// unexpired one holds the permission, and no expired one would have.
	DeniedNotGranted DenialReason = "permission_not_granted"
)

// GrantedBy returns the bindings that grant the permission: every unexpired
// binding whose role matched, in Bindings' order. It is empty when the check
// is denied.
func (r CheckResult) GrantedBy() []CheckedBinding {
	out := []CheckedBinding{}
	for _, b := range r.Bindings {
		if !b.Expired && b.Matched != "" {
			out = append(out, b)
		}
	}
	return out
}

// DenialReason returns why the check is denied, or "" when it is allowed.
func (r CheckResult) DenialReason() DenialReason {
	switch {
	case r.Allowed:
		return ""
	case len(r.Bindings) == 0:
		return DeniedNoBindings
	}
	for _, b := range r.Bindings {
		if b.Expired && b.Matched != "" {
			return DeniedBindingsExpired
		}
	}
	return DeniedNotGranted
}

// decideBatchQuery reads, in one statement, every binding (expired ones
// included) in the project of every principal id a batch names: type, id,
// binding id, role id, expiry, and its role's slug and permissions (the
// project_roles.permissions copy: one value, however many permissions).
// role_bindings_decision_idx answers the WHERE clause (two principal types
// times the listed ids) and covers the bindings' columns but their id, which
// explain needs (%[2]s: b.id, or NULL without explain); each binding costs a
// primary-key probe into project_roles. %[1]s is Dialect.stringList: the
// principal ids.
const decideBatchQuery = `SELECT b.principal_type, b.principal_id, %[2]s, b.role_id, b.expires_at, r.slug, r.permissions
	FROM role_bindings b
		JOIN project_roles r ON r.id = b.role_id
	WHERE b.project_id = ? AND b.principal_type IN ('user', 'service_account') AND b.principal_id IN %[1]s`

// DecideBatch answers checks in project projectID at time now, one
// CheckResult per check, in order, each by Decide's rule. It runs exactly one
// read query whatever the number of checks (all of them read in one
// snapshot) and writes nothing. A check may repeat another. An unknown
// project or principal is a deny with no bindings, not ErrNotFound. With
// explain false the results have no Bindings (nil: the decision and its roles
// do not need them, and the query is cheaper without their ids).
//
// It returns ErrInvalid for no checks or more than MaxChecks.
func (s *Store) DecideBatch(ctx context.Context, projectID string, checks []Check, now time.Time, explain bool) ([]CheckResult, error) {
	const op = "decide batch"
	if len(checks) == 0 || len(checks) > MaxChecks {
		return nil, fmt.Errorf("store: %s: %w: %d checks, want 1 to %d", op, ErrInvalid, len(checks), MaxChecks)
	}
	permissions := make([]string, 0, len(checks)+1)
	ids := make([]string, 0, len(checks))
	permissions = append(permissions, "*")
	for _, c := range checks {
		permissions = append(permissions, c.Permission)
		ids = append(ids, c.PrincipalID)
	}
	permissions, ids = sortedUnique(permissions), sortedUnique(ids)
	idArg, err := s.dialect.stringListArg(ids)
	if err != nil {
		return nil, wrapError(op, err)
	}
	query := rbacQueriesOf[s.dialect].decideBatch.decide
	if explain {
		query = rbacQueriesOf[s.dialect].decideBatch.explain
	}
	stmt, err := s.readStatement(ctx, query)
	if err != nil {
		return nil, wrapError(op, err)
	}
	rows, err := stmt.QueryContext(ctx, projectID, idArg)
	if err != nil {
		return nil, wrapError(op, err)
	}
	defer rows.Close()

	// Each principal's bindings, each bound role's slug, and the asked
	// permissions (or "*") each bound role holds, decoded once per role.
	asked := make(map[string]bool, len(permissions))
	for _, p := range permissions {
		asked[p] = true
	}
	principals := map[principalKey][]CheckedBinding{}
	slugs := map[string]string{}
	held := map[string][]string{}
	var typ, principal, roleID, slug string
	var bindingID sql.NullString
	var expires *sqlTime
	var rolePermissions sql.RawBytes // only read before the next row (decodeStringArray copies)
	for rows.Next() {
		if err := rows.Scan(&typ, &principal, &bindingID, &roleID, &expires, &slug, &rolePermissions); err != nil {
			return nil, wrapError(op, err)
		}
		if _, seen := slugs[roleID]; !seen {
			slugs[roleID] = slug
			perms, err := decodeStringArray(rolePermissions)
			if err != nil {
				return nil, wrapError(op, err)
			}
			for _, p := range perms {
				if asked[p] {
					held[roleID] = append(held[roleID], p)
				}
			}
		}
		b := CheckedBinding{BindingID: bindingID.String, RoleID: roleID, ExpiresAt: timePtr(expires)}
		b.Expired = b.ExpiresAt != nil && !b.ExpiresAt.After(now)
		key := principalKey{typ, principal}
		principals[key] = append(principals[key], b)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapError(op, err)
	}
	roles := make(map[principalKey][]string, len(principals))
	for k, list := range principals {
		for i := range list {
			list[i].RoleSlug = slugs[list[i].RoleID]
		}
		slices.SortFunc(list, func(a, b CheckedBinding) int {
			return cmp.Or(cmp.Compare(a.RoleSlug, b.RoleSlug), cmp.Compare(a.BindingID, b.BindingID))
		})
		names := []string{}
		for _, b := range list {
			if !b.Expired {
				names = append(names, b.RoleSlug)
			}
		}
		roles[k] = slices.Compact(names) // sorted by slug already
	}

	out := make([]CheckResult, len(checks))
	for i, c := range checks {
		k := principalKey{c.PrincipalType, c.PrincipalID}
		list := principals[k]
		res := CheckResult{Decision: Decision{Roles: roles[k]}}
		if res.Roles == nil {
			res.Roles = []string{}
		}
		if explain {
			res.Bindings = make([]CheckedBinding, len(list))
		}
		for j, b := range list {
			if !b.Expired && b.ExpiresAt != nil && (res.Until == nil || b.ExpiresAt.Before(*res.Until)) {
				res.Until = b.ExpiresAt
			}
			switch perms := held[b.RoleID]; {
			case slices.Contains(perms, c.Permission):
				b.Matched = c.Permission
			case slices.Contains(perms, "*"):
				b.Matched = "*"
			}
			res.Allowed = res.Allowed || (b.Matched != "" && !b.Expired)
			if explain {
				res.Bindings[j] = b
			}
		}
		out[i] = res
	}
	return out, nil
}

// principalKey names a principal of a project.
type principalKey struct{ typ, id string }

// sortedUnique sorts values and drops repeats, in place.
func sortedUnique(values []string) []string {
	slices.Sort(values)
	return slices.Compact(values)
}

// EffectiveRole is one unexpired binding of a principal, with its role.
type EffectiveRole struct {
	BindingID string
	RoleID    string
	Slug      string
	ExpiresAt *time.Time
}

// Permissions is what a principal holds in a project: Roles, its unexpired
// bindings sorted by slug, then binding id; Permissions, the union of their
// roles' permissions, sorted bytewise and unique ("*" included when held);
// and Wildcard, true when "*" is held (Permissions is then not exhaustive:
// every permission is granted). Slices are empty, never nil.
type Permissions struct {
	Roles       []EffectiveRole
	Permissions []string
	Wildcard    bool
}

// effectivePermissionsQuery is the principal's unexpired bindings, one row
// each, with its role's slug and permissions (the project_roles.permissions
// copy): the decision's index range, then a primary-key probe into
// project_roles per binding.
const effectivePermissionsQuery = `SELECT b.id, b.role_id, r.slug, b.expires_at, r.permissions
	FROM role_bindings b
		JOIN project_roles r ON r.id = b.role_id
	WHERE b.project_id = ? AND b.principal_type = ? AND b.principal_id = ?
		AND (b.expires_at IS NULL OR b.expires_at > ?)`

// EffectivePermissions returns what principal (principalType, principalID)
// holds in project projectID at time now: the roles of its unexpired
// bindings and the union of their permissions (see Permissions). It runs one
// read query. A principal with no binding (or an unknown project) has empty
// lists, not ErrNotFound.
func (s *Store) EffectivePermissions(ctx context.Context, projectID, principalType, principalID string, now time.Time) (Permissions, error) {
	const op = "effective permissions"
	stmt, err := s.readStatement(ctx, effectivePermissionsQuery)
	if err != nil {
		return Permissions{}, wrapError(op, err)
	}
	rows, err := stmt.QueryContext(ctx, projectID, principalType, principalID, sqlTime(now))
	if err != nil {
		return Permissions{}, wrapError(op, err)
	}
	defer rows.Close()
	out := Permissions{Roles: []EffectiveRole{}, Permissions: []string{}}
	var r EffectiveRole
	var expires *sqlTime
	var permissions sql.RawBytes // only read before the next row (decodeStringArray copies)
	for rows.Next() {
		if err := rows.Scan(&r.BindingID, &r.RoleID, &r.Slug, &expires, &permissions); err != nil {
			return Permissions{}, wrapError(op, err)
		}
		r.ExpiresAt = timePtr(expires)
		out.Roles = append(out.Roles, r)
		held, err := decodeStringArray(permissions)
		if err != nil {
			return Permissions{}, wrapError(op, err)
		}
		out.Permissions = append(out.Permissions, held...)
	}
	if err := rows.Err(); err != nil {
		return Permissions{}, wrapError(op, err)
	}
	slices.SortFunc(out.Roles, func(a, b EffectiveRole) int {
		return cmp.Or(cmp.Compare(a.Slug, b.Slug), cmp.Compare(a.BindingID, b.BindingID))
	})
	out.Permissions = sortedUnique(out.Permissions)
	_, out.Wildcard = slices.BinarySearch(out.Permissions, "*")
	return out, nil
}

// PrincipalRef names a principal: its type and id.
type PrincipalRef struct {
	Type string // PrincipalUser or PrincipalServiceAccount
	ID   string
}

// HolderFilter selects and pages the holders PermissionHolders returns.
type HolderFilter struct {
	// PrincipalType, when set, keeps principals of that type only.
	PrincipalType string
	// After, when set, starts the page after that principal (in the order
	// of PermissionHolders); nil starts at the first.
	After *PrincipalRef
	// Limit is the page size: 0 means DefaultHolderPage, values above
	// MaxHolderPage mean MaxHolderPage.
	Limit int
}

// PermissionHolder is a principal that holds a permission, with Roles, the
// sorted slugs of the roles (bound to it by unexpired bindings) that grant
// it.
type PermissionHolder struct {
	PrincipalRef
	Roles []string
}

// Who holds a permission, one page, in one statement whose cost follows the
// page, not the project: granting is the project's roles that hold the
// permission or "*" (each role once); each granting role then yields its
// first limit+1 principals after the cursor with an unexpired binding, in
// order, from the unique index on (role_id, principal_type, principal_id);
// the rows come out ordered by principal, and PermissionHolders keeps the
// first limit+1 principals. Every role that grants one of those principals
// has yielded it (its rank in that role is no greater than its rank overall),
// so each holder's roles are complete. A permission few principals hold is
// found as fast as one every principal holds: both read at most
// (granting roles) × (limit+1) bindings.
//
// The per-role walk is the one difference between the dialects:
// PostgreSQL runs a LATERAL subquery with a LIMIT per role; SQLite, which
// has no LATERAL, a recursive walk that steps from each principal to the
// role's next one. %s is the optional principal type condition.

// holdersGranting is the granting roles' CTE (parameters: the permission,
// the project).
const holdersGranting = `granting AS (
		SELECT DISTINCT p.role_id FROM project_roles r
			JOIN project_role_permissions p ON p.role_id = r.id AND p.permission IN (?, '*')
		WHERE r.project_id = ?)`

// holdersPostgres: parameters the permission, the project, the cursor's type
// and id, [the principal type], now, limit+1.
const holdersPostgres = `WITH ` + holdersGranting + `
	SELECT x.principal_type, x.principal_id, r.slug
	FROM granting g
		JOIN project_roles r ON r.id = g.role_id
		CROSS JOIN LATERAL (SELECT x.principal_type, x.principal_id FROM role_bindings x
			WHERE x.role_id = g.role_id AND (x.principal_type, x.principal_id) > (?, ?)%[1]s
				AND (x.expires_at IS NULL OR x.expires_at > ?)
			ORDER BY x.principal_type, x.principal_id
			LIMIT ?) x
	ORDER BY x.principal_type, x.principal_id`

// holdersSQLite: parameters the permission, the project, the cursor's type
// (twice) and id, [the principal type], now, limit+1. walk follows each
// granting role's principals of each type (SQLite uses a row-value bound
// taken from another row only as a filter, so the type is fixed per walk and
// the id alone bounds the index range): step n reaches the n-th principal
// with one seek into the unique index on (role_id, principal_type,
// principal_id); a walk that runs out yields NULL and stops.
const holdersSQLite = `WITH RECURSIVE ` + holdersGranting + `,
	walk(role_id, principal_type, principal_id, n) AS (
		SELECT g.role_id, t.principal_type, CASE WHEN t.principal_type = ? THEN ? ELSE '' END, 0
		FROM granting g CROSS JOIN (SELECT 'service_account' AS principal_type UNION ALL SELECT 'user') t
		WHERE t.principal_type >= ?%[1]s
		UNION ALL
		SELECT w.role_id, w.principal_type, (SELECT x.principal_id FROM role_bindings x
				WHERE x.role_id = w.role_id AND x.principal_type = w.principal_type AND x.principal_id > w.principal_id
					AND (x.expires_at IS NULL OR x.expires_at > ?)
				ORDER BY x.principal_id
				LIMIT 1), w.n + 1
		FROM walk w
		WHERE w.n < ? AND w.principal_id IS NOT NULL)
	SELECT w.principal_type, w.principal_id, r.slug
	FROM walk w JOIN project_roles r ON r.id = w.role_id
	WHERE w.n > 0 AND w.principal_id IS NOT NULL
	ORDER BY w.principal_type, w.principal_id`

// rbacQueries are the statements of this file that differ by dialect.
type rbacQueries struct {
	decideBatch                                batchQuery
	permissionHolders, permissionHoldersOfType string
}

// batchQuery is decideBatchQuery with binding ids (explain) and without (decide).
type batchQuery struct{ explain, decide string }

// newBatchQuery is decideBatchQuery in dialect d.
func newBatchQuery(d Dialect) batchQuery {
	return batchQuery{
		explain: fmt.Sprintf(decideBatchQuery, d.stringList(), "b.id"),
		decide:  fmt.Sprintf(decideBatchQuery, d.stringList(), "NULL"),
	}
}

// rbacQueriesOf holds each dialect's rbacQueries, written out once.
var rbacQueriesOf = map[Dialect]rbacQueries{SQLite: newRBACQueries(SQLite), Postgres: newRBACQueries(Postgres)}

func newRBACQueries(d Dialect) rbacQueries {
	q := rbacQueries{
		decideBatch:             newBatchQuery(d),
		permissionHolders:       fmt.Sprintf(holdersSQLite, ""),
		permissionHoldersOfType: fmt.Sprintf(holdersSQLite, " AND t.principal_type = ?"),
	}
	if d == Postgres {
		q.permissionHolders = fmt.Sprintf(holdersPostgres, "")
		q.permissionHoldersOfType = fmt.Sprintf(holdersPostgres, " AND x.principal_type = ?")
	}
	return q
}

// PermissionHolders returns one page of the principals that hold permission
// in project projectID at time now, directly or through "*": ordered by
// principal type, then principal id (bytewise), starting after f.After, at
// most f.Limit of them. more is true when holders follow the page (the next
// page starts after its last holder). It runs one read query; an unknown
// project or permission has no holders, not ErrNotFound.
func (s *Store) PermissionHolders(ctx context.Context, projectID, permission string, f HolderFilter, now time.Time) (holders []PermissionHolder, more bool, err error) {
	const op = "permission holders"
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultHolderPage
	case limit > MaxHolderPage:
		limit = MaxHolderPage
	}
	after := PrincipalRef{}
	if f.After != nil {
		after = *f.After
	}
	queries := rbacQueriesOf[s.dialect]
	query := queries.permissionHolders
	args := []any{permission, projectID, after.Type, after.ID}
	if s.dialect == SQLite {
		args = []any{permission, projectID, after.Type, after.ID, after.Type}
	}
	if f.PrincipalType != "" {
		query = queries.permissionHoldersOfType
		args = append(args, f.PrincipalType)
	}
	args = append(args, sqlTime(now), limit+1)
	stmt, err := s.readStatement(ctx, query)
	if err != nil {
		return nil, false, wrapError(op, err)
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, false, wrapError(op, err)
	}
	defer rows.Close()
	holders = []PermissionHolder{}
	var ref PrincipalRef
	var slug string
	for rows.Next() {
		if err := rows.Scan(&ref.Type, &ref.ID, &slug); err != nil {
			return nil, false, wrapError(op, err)
		}
		if n := len(holders); n == 0 || holders[n-1].PrincipalRef != ref {
			if n == limit+1 {
				break // the rest follow the page and the one after it
			}
			holders = append(holders, PermissionHolder{PrincipalRef: ref})
		}
		last := &holders[len(holders)-1]
		last.Roles = append(last.Roles, slug)
	}
	if err := rows.Err(); err != nil {
		return nil, false, wrapError(op, err)
	}
	for i := range holders {
		holders[i].Roles = sortedUnique(holders[i].Roles)
	}
	if len(holders) > limit {
		return holders[:limit], true, nil
	}
	return holders, false, nil
}
