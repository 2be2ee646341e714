package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Project RBAC: the roles a product defines per project (ProjectRole, also
// seeded by CreateProject) and the bindings that give them to the product's
// principals, and Decide, which answers POST /authorize. The store does not
// interpret permission strings beyond comparing them with the requested
// permission and "*".

// ErrInUse: the row is still referenced and the operation was not forced
// (a project role that role bindings still name). Nothing was written.
var ErrInUse = errors.New("in use")

// Principal types of a role binding.
const (
	PrincipalUser           = "user"
	PrincipalServiceAccount = "service_account"
)

// Limits of project RBAC.
const (
	// MaxRolePermissions is the most permission strings one project role
	// holds.
	MaxRolePermissions = 100
	// DefaultRoleBindingPage and MaxRoleBindingPage are the default and
	// largest page sizes of ListRoleBindings.
	DefaultRoleBindingPage = 100
	MaxRoleBindingPage     = 200
)

// RoleBinding gives project role RoleID (whose slug is RoleSlug) to one
// principal of the product. ExpiresAt nil never expires; once ExpiresAt has
// passed the binding no longer counts in decisions (it is not deleted).
// (RoleID, PrincipalType, PrincipalID) is unique.
type RoleBinding struct {
	ID            string
	ProjectID     string
	RoleID        string
	RoleSlug      string
	PrincipalType string // PrincipalUser or PrincipalServiceAccount
	PrincipalID   string
	ExpiresAt     *time.Time
	CreatedAt     time.Time
}

// ProjectRoleUpdate lists the fields UpdateProjectRole changes: nil fields
// stay as they are.
type ProjectRoleUpdate struct {
	Name        *string
	Slug        *string
	Description *string
	Permissions *[]string
}

// RoleBindingFilter selects role bindings of a project. Empty fields do not
// filter; set fields must all match.
type RoleBindingFilter struct {
	PrincipalType string
	PrincipalID   string
	RoleID        string
	// Limit is the page size: 0 means DefaultRoleBindingPage, values above
	// MaxRoleBindingPage mean MaxRoleBindingPage. Offset skips that many
	// bindings (negative means 0).
	Limit  int
	Offset int
}

// CreateProjectRole inserts r into project r.ProjectID. It fills in an empty
// r.ID (NewID("role")), turns nil Permissions into an empty list and sets
// r.CreatedAt and r.UpdatedAt to Store.Now.
//
// It returns ErrInvalid when ProjectID, Name or Slug is empty or a
// permission is empty or repeated, ErrLimit when r has more than
// MaxRolePermissions permissions, ErrNotFound when the project does not
// exist, and ErrConflict when the project has a role with that slug (or
// r.ID is taken).
func (tx *Tx) CreateProjectRole(ctx context.Context, r *ProjectRole) error {
	const op = "create project role"
	if r.ProjectID == "" || r.Name == "" || r.Slug == "" {
		return fmt.Errorf("store: %s: %w: project, name and slug are required", op, ErrInvalid)
	}
	if r.Permissions == nil {
		r.Permissions = []string{}
	}
	if err := checkPermissions(r.Permissions); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if r.ID == "" {
		r.ID = NewID("role")
	}
	now := tx.store.Now()
	r.CreatedAt, r.UpdatedAt = now, now
	const query = `INSERT INTO project_roles (id, project_id, name, slug, description,
		permissions, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		r.ID, r.ProjectID, r.Name, r.Slug, r.Description, permissionsCopy(r.Permissions), sqlTime(now), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}
	if err := tx.insertPermissions(ctx, r.ID, r.Permissions); err != nil {
		return wrapError(op, err)
	}
	return nil
}

// A role's permissions are stored twice, written together by the three writers
// (CreateProject's seeded roles, CreateProjectRole, UpdateProjectRole): as rows
// of project_role_permissions (insertPermissions), which the lookups by
// permission read (Decide, PermissionHolders, the role list), and as a JSON
// array in position order in project_roles.permissions (permissionsCopy), which
// DecideBatch and EffectivePermissions read as one value with the role's row.

// permissionsCopy is the project_roles.permissions value of a role holding
// permissions, in their order: a JSON array of strings.
func permissionsCopy(permissions []string) string {
	if len(permissions) == 0 {
		return "[]"
	}
	text, err := json.Marshal(permissions)
	if err != nil {
		panic(err) // a []string always encodes
	}
	return string(text)
}

// insertPermissions stores permissions as the rows of role roleID, in their
// order, with one statement. It does not check them (see checkPermissions).
func (tx *Tx) insertPermissions(ctx context.Context, roleID string, permissions []string) error {
	if len(permissions) == 0 {
		return nil
	}
	values := make([]string, len(permissions))
	args := make([]any, 0, 3*len(permissions))
	for i, p := range permissions {
		values[i] = "(?, ?, ?)"
		args = append(args, roleID, p, i)
	}
	query := "INSERT INTO project_role_permissions (role_id, permission, position) VALUES " + strings.Join(values, ", ")
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query), args...)
	return err
}

// ProjectRole returns role roleID of project projectID. It returns
// ErrNotFound when the project has no such role.
func (s *Store) ProjectRole(ctx context.Context, projectID, roleID string) (ProjectRole, error) {
	return getProjectRole(ctx, s.reader, "project role", projectID, roleID, "")
}

// UpdateProjectRole changes the fields of role roleID of project projectID
// that u sets, bumps its UpdatedAt and returns it. The next decision uses the
// new permissions.
//
// It returns ErrNotFound when the project has no such role, ErrInvalid when
// the name or slug is set to "" or a permission is empty or repeated,
// ErrLimit for more than MaxRolePermissions permissions, and ErrConflict
// when another role of the project has the new slug.
func (tx *Tx) UpdateProjectRole(ctx context.Context, projectID, roleID string, u ProjectRoleUpdate) (ProjectRole, error) {
	const op = "update project role"
	var sets []string
	var args []any
	for _, f := range []struct {
		column string
		value  *string
	}{{"name", u.Name}, {"slug", u.Slug}} {
		if f.value == nil {
			continue
		}
		if *f.value == "" {
			return ProjectRole{}, fmt.Errorf("store: %s: %w: empty %s", op, ErrInvalid, f.column)
		}
		sets, args = append(sets, f.column+" = ?"), append(args, *f.value)
	}
	if u.Description != nil {
		sets, args = append(sets, "description = ?"), append(args, *u.Description)
	}
	var permissions []string
	if u.Permissions != nil {
		permissions = *u.Permissions
		if permissions == nil {
			permissions = []string{}
		}
		if err := checkPermissions(permissions); err != nil {
			return ProjectRole{}, fmt.Errorf("store: %s: %w", op, err)
		}
		sets, args = append(sets, "permissions = ?"), append(args, permissionsCopy(permissions))
	}
	sets, args = append(sets, "updated_at = ?"), append(args, sqlTime(tx.store.Now()))
	query := "UPDATE project_roles SET " + strings.Join(sets, ", ") +
		" WHERE id = ? AND project_id = ? RETURNING " + projectRoleColumns
	var r projectRoleRow
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), append(args, roleID, projectID)...); err != nil {
		return ProjectRole{}, wrapError(op, err)
	}
	role := r.projectRole()
	if permissions == nil {
		var err error
		if role.Permissions, err = rolePermissions(ctx, tx.tx, roleID); err != nil {
			return ProjectRole{}, wrapError(op, err)
		}
		return role, nil
	}
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM project_role_permissions WHERE role_id = ?"), roleID)
	if err == nil {
		err = tx.insertPermissions(ctx, roleID, permissions)
	}
	if err != nil {
		return ProjectRole{}, wrapError(op, err)
	}
	role.Permissions = slices.Clone(permissions)
	return role, nil
}

// DeleteProjectRole deletes role roleID of project projectID and returns it
// with the number of bindings deleted along with it. While bindings name the
// role it refuses with ErrInUse, unless force is true: then it deletes them
// first, in the same transaction. The role is locked first, so that a binding
// created concurrently cannot slip in between the check and the delete.
//
// It returns ErrNotFound when the project has no such role and ErrInUse as
// described.
func (tx *Tx) DeleteProjectRole(ctx context.Context, projectID, roleID string, force bool) (ProjectRole, int, error) {
	const op = "delete project role"
	role, err := getProjectRole(ctx, tx.tx, op, projectID, roleID, tx.store.dialect.lockClause(lockForUpdate))
	if err != nil {
		return ProjectRole{}, 0, err
	}
	var bindings int64
	if force {
		res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM role_bindings WHERE role_id = ?"), role.ID)
		if err != nil {
			return ProjectRole{}, 0, wrapError(op, err)
		}
		if bindings, err = res.RowsAffected(); err != nil {
			return ProjectRole{}, 0, wrapError(op, err)
		}
	} else {
		var n int
		err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind("SELECT COUNT(*) FROM role_bindings WHERE role_id = ?"), role.ID)
		if err != nil {
			return ProjectRole{}, 0, wrapError(op, err)
		}
		if n > 0 {
			return ProjectRole{}, 0, fmt.Errorf("store: %s: %w: %d role bindings name it", op, ErrInUse, n)
		}
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM project_roles WHERE id = ?"), role.ID)
	if isMissingReference(err) {
		// The foreign key is the backstop for a binding that the lock did not stop.
		return ProjectRole{}, 0, fmt.Errorf("store: %s: %w: %v", op, ErrInUse, err)
	}
	if err := oneRowAffected(op, res, err); err != nil {
		return ProjectRole{}, 0, err
	}
	return role, int(bindings), nil
}

// CreateRoleBinding inserts b. b.RoleID must be a role of project
// b.ProjectID. It fills in an empty b.ID (NewID("rb")), b.RoleSlug and
// b.CreatedAt (Store.Now), and stores b.ExpiresAt (which may lie in the
// past: such a binding never counts) in UTC at microsecond precision.
//
// It returns ErrInvalid when ProjectID, RoleID or PrincipalID is empty or
// PrincipalType is not a Principal constant, ErrNotFound when the project
// has no role RoleID, and ErrConflict when the role is already bound to the
// principal (or b.ID is taken).
func (tx *Tx) CreateRoleBinding(ctx context.Context, b *RoleBinding) error {
	const op = "create role binding"
	if b.ProjectID == "" || b.RoleID == "" || b.PrincipalID == "" {
		return fmt.Errorf("store: %s: %w: project, role and principal id are required", op, ErrInvalid)
	}
	if b.PrincipalType != PrincipalUser && b.PrincipalType != PrincipalServiceAccount {
		return fmt.Errorf("store: %s: %w: principal type %q", op, ErrInvalid, b.PrincipalType)
	}
	role, err := getProjectRole(ctx, tx.tx, op, b.ProjectID, b.RoleID, "")
	if err != nil {
		return err
	}
	if b.ID == "" {
		b.ID = NewID("rb")
	}
	b.RoleSlug = role.Slug
	b.CreatedAt = tx.store.Now()
	var expires *sqlTime
	if b.ExpiresAt != nil {
		t := b.ExpiresAt.UTC().Truncate(time.Microsecond)
		b.ExpiresAt = &t
		expires = (*sqlTime)(&t)
	}
	const query = `INSERT INTO role_bindings (id, project_id, role_id, principal_type, principal_id,
		expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		b.ID, b.ProjectID, b.RoleID, b.PrincipalType, b.PrincipalID, expires, sqlTime(b.CreatedAt))
	if err != nil {
		// A role deleted since it was read is a missing reference: ErrNotFound.
		return wrapWriteError(op, err)
	}
	return nil
}

// RoleBinding returns binding id of project projectID. It returns
// ErrNotFound when the project has no such binding.
func (s *Store) RoleBinding(ctx context.Context, projectID, id string) (RoleBinding, error) {
	return getRoleBinding(ctx, s.reader, "role binding", projectID, id)
}

// ListRoleBindings returns the bindings of project projectID that match f,
// expired ones included, oldest first (by CreatedAt, then ID), one page as
// f.Limit and f.Offset say. No match is an empty slice, not ErrNotFound.
func (s *Store) ListRoleBindings(ctx context.Context, projectID string, f RoleBindingFilter) ([]RoleBinding, error) {
	const op = "list role bindings"
	where, args := []string{"b.project_id = ?"}, []any{projectID}
	for _, c := range []struct{ column, value string }{
		{"b.principal_type", f.PrincipalType}, {"b.principal_id", f.PrincipalID}, {"b.role_id", f.RoleID},
	} {
		if c.value != "" {
			where, args = append(where, c.column+" = ?"), append(args, c.value)
		}
	}
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultRoleBindingPage
	case limit > MaxRoleBindingPage:
		limit = MaxRoleBindingPage
	}
	query := "SELECT " + roleBindingColumns + " FROM role_bindings b JOIN project_roles r ON r.id = b.role_id WHERE " +
		strings.Join(where, " AND ") + " ORDER BY b.created_at, b.id LIMIT ? OFFSET ?"
	var rows []roleBindingRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), append(args, limit, max(f.Offset, 0))...); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]RoleBinding, len(rows))
	for i, r := range rows {
		out[i] = r.roleBinding()
	}
	return out, nil
}

// DeleteRoleBinding deletes binding id of project projectID and returns it.
// The next decision no longer counts it. It returns ErrNotFound when the
// project has no such binding.
func (tx *Tx) DeleteRoleBinding(ctx context.Context, projectID, id string) (RoleBinding, error) {
	const op = "delete role binding"
	b, err := getRoleBinding(ctx, tx.tx, op, projectID, id)
	if err != nil {
		return RoleBinding{}, err
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM role_bindings WHERE id = ? AND project_id = ?"), id, projectID)
	if err := oneRowAffected(op, res, err); err != nil {
		return RoleBinding{}, err
	}
	return b, nil
}

// decideQuery is the whole decision, one join: the slugs of the roles bound
// to the principal in the project by bindings that have not expired at now,
// each with its permission row that is the requested permission or "*"
// (NULL when it has neither; two rows when it has both).
// role_bindings_decision_idx answers the WHERE clause alone (it covers
// role_id and expires_at); each binding then costs a primary-key probe into
// project_roles and two into project_role_permissions (role_id, permission).
// Nothing is aggregated or sorted in SQL: Decide sorts the few slugs itself,
// bytewise on both dialects, and drops the repeat.
const decideQuery = `SELECT r.slug, p.permission, b.expires_at
	FROM role_bindings b
		JOIN project_roles r ON r.id = b.role_id
		LEFT JOIN project_role_permissions p ON p.role_id = b.role_id AND p.permission IN (?, '*')
	WHERE b.project_id = ? AND b.principal_type = ? AND b.principal_id = ?
		AND (b.expires_at IS NULL OR b.expires_at > ?)`

// Decide answers whether principal (principalType, principalID) holds
// permission in project projectID at time now: allowed is true when any of
// its bindings that has not expired (ExpiresAt nil or after now) names a
// role whose permissions contain permission itself or "*". Several roles
// give the union of their permissions. roles lists the slugs of those
// bindings' roles, sorted, whether or not they granted it (never nil).
//
// Decide runs exactly one read query and writes nothing. Allow and deny cost
// the same: every binding and its role's matching permission rows are read.
// An unknown project or principal is a deny, not ErrNotFound.
func (s *Store) Decide(ctx context.Context, projectID, principalType, principalID, permission string, now time.Time) (allowed bool, roles []string, err error) {
	d, _, err := s.DecideUntil(ctx, projectID, principalType, principalID, permission, now)
	return d.Allowed, d.Roles, err
}

// DecideUntil is Decide, with the earliest expiry of the bindings it read (nil
// when none of them expires): the time from which the same rows may give
// another answer, because a binding has expired. Until then, the answer
// changes only when a row it read changes (see DecisionEpoch).
func (s *Store) DecideUntil(ctx context.Context, projectID, principalType, principalID, permission string, now time.Time) (d Decision, until *time.Time, err error) {
	const op = "decide"
	stmt, err := s.readStatement(ctx, decideQuery)
	if err != nil {
		return Decision{}, nil, wrapError(op, err)
	}
	rows, err := stmt.QueryContext(ctx, permission, projectID, principalType, principalID, sqlTime(now))
	if err != nil {
		return Decision{}, nil, wrapError(op, err)
	}
	defer rows.Close()
	d.Roles = []string{}
	var slug string
	var granted sql.RawBytes
	var expires *sqlTime
	for rows.Next() {
		if err := rows.Scan(&slug, &granted, &expires); err != nil {
			return Decision{}, nil, wrapError(op, err)
		}
		d.Allowed = d.Allowed || granted != nil
		d.Roles = append(d.Roles, slug)
		if e := timePtr(expires); e != nil && (until == nil || e.Before(*until)) {
			until = e
		}
	}
	if err := rows.Err(); err != nil {
		return Decision{}, nil, wrapError(op, err)
	}
	slices.Sort(d.Roles)
	d.Roles = slices.Compact(d.Roles)
	return d, until, nil
}

// checkPermissions checks a role's permission list: at most
// MaxRolePermissions (ErrLimit), none empty or repeated (ErrInvalid).
func checkPermissions(permissions []string) error {
	if len(permissions) > MaxRolePermissions {
		return fmt.Errorf("%w: a project role holds at most %d permissions", ErrLimit, MaxRolePermissions)
	}
	seen := make(map[string]bool, len(permissions))
	for _, p := range permissions {
		if p == "" {
			return fmt.Errorf("%w: empty permission", ErrInvalid)
		}
		if seen[p] {
			return fmt.Errorf("%w: permission %q repeated", ErrInvalid, p)
		}
		seen[p] = true
	}
	return nil
}

// rolePermissions reads the permissions of role roleID in their order (an
// empty list, never nil, for none).
func rolePermissions(ctx context.Context, q querier, roleID string) ([]string, error) {
	permissions := []string{}
	const query = "SELECT permission FROM project_role_permissions WHERE role_id = ? ORDER BY position"
	if err := q.SelectContext(ctx, &permissions, q.Rebind(query), roleID); err != nil {
		return nil, err
	}
	return permissions, nil
}

// projectRoleColumns are the columns projectRoleRow scans.
const projectRoleColumns = "id, project_id, name, slug, description, created_at, updated_at"

// projectRoleRow is a project_roles row as scanned (its permissions are rows
// of project_role_permissions).
type projectRoleRow struct {
	ID          string  `db:"id"`
	ProjectID   string  `db:"project_id"`
	Name        string  `db:"name"`
	Slug        string  `db:"slug"`
	Description string  `db:"description"`
	CreatedAt   sqlTime `db:"created_at"`
	UpdatedAt   sqlTime `db:"updated_at"`
}

// projectRole returns the role without its permissions (Permissions nil).
func (r projectRoleRow) projectRole() ProjectRole {
	return ProjectRole{
		ID:          r.ID,
		ProjectID:   r.ProjectID,
		Name:        r.Name,
		Slug:        r.Slug,
		Description: r.Description,
		CreatedAt:   time.Time(r.CreatedAt),
		UpdatedAt:   time.Time(r.UpdatedAt),
	}
}

// getProjectRole reads role roleID of project projectID. A non-empty lock (a
// Dialect.lockClause) first locks the role's row until the transaction ends:
// lockForUpdate also blocks new bindings of the role.
func getProjectRole(ctx context.Context, q querier, op, projectID, roleID, lock string) (ProjectRole, error) {
	if lock != "" {
		var id string
		query := "SELECT id FROM project_roles WHERE id = ? AND project_id = ?" + lock
		if err := q.GetContext(ctx, &id, q.Rebind(query), roleID, projectID); err != nil {
			return ProjectRole{}, wrapError(op, err)
		}
	}
	roles, err := queryProjectRoles(ctx, q, "r.id = ? AND r.project_id = ?", roleID, projectID)
	if err != nil {
		return ProjectRole{}, wrapError(op, err)
	}
	if len(roles) == 0 {
		return ProjectRole{}, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	return roles[0], nil
}

// queryProjectRoles reads the project roles matching where (on project_roles
// r) with their permissions, in one query: oldest first (by CreatedAt, then
// ID), each role's permissions in their order (an empty list, never nil, for
// none). No match is an empty slice.
func queryProjectRoles(ctx context.Context, q querier, where string, args ...any) ([]ProjectRole, error) {
	query := "SELECT " + qualify("r", projectRoleColumns) + `, p.permission
		FROM project_roles r LEFT JOIN project_role_permissions p ON p.role_id = r.id
		WHERE ` + where + " ORDER BY r.created_at, r.id, p.position"
	var rows []struct {
		projectRoleRow
		Permission sql.NullString `db:"permission"`
	}
	if err := q.SelectContext(ctx, &rows, q.Rebind(query), args...); err != nil {
		return nil, err
	}
	roles := []ProjectRole{}
	for _, row := range rows {
		if len(roles) == 0 || roles[len(roles)-1].ID != row.ID {
			role := row.projectRoleRow.projectRole()
			role.Permissions = []string{}
			roles = append(roles, role)
		}
		if row.Permission.Valid {
			last := &roles[len(roles)-1]
			last.Permissions = append(last.Permissions, row.Permission.String)
		}
	}
	return roles, nil
}

// roleBindingColumns are the columns roleBindingRow scans, from role_bindings
// b joined with project_roles r.
const roleBindingColumns = `b.id, b.project_id, b.role_id, r.slug AS role_slug, b.principal_type,
	b.principal_id, b.expires_at, b.created_at`

// roleBindingRow is a role_bindings row with its role's slug, as scanned.
type roleBindingRow struct {
	ID            string   `db:"id"`
	ProjectID     string   `db:"project_id"`
	RoleID        string   `db:"role_id"`
	RoleSlug      string   `db:"role_slug"`
	PrincipalType string   `db:"principal_type"`
	PrincipalID   string   `db:"principal_id"`
	ExpiresAt     *sqlTime `db:"expires_at"`
	CreatedAt     sqlTime  `db:"created_at"`
}

func (r roleBindingRow) roleBinding() RoleBinding {
	return RoleBinding{
		ID:            r.ID,
		ProjectID:     r.ProjectID,
		RoleID:        r.RoleID,
		RoleSlug:      r.RoleSlug,
		PrincipalType: r.PrincipalType,
		PrincipalID:   r.PrincipalID,
		ExpiresAt:     timePtr(r.ExpiresAt),
		CreatedAt:     time.Time(r.CreatedAt),
	}
}

func getRoleBinding(ctx context.Context, q querier, op, projectID, id string) (RoleBinding, error) {
	query := "SELECT " + roleBindingColumns +
		" FROM role_bindings b JOIN project_roles r ON r.id = b.role_id WHERE b.id = ? AND b.project_id = ?"
	var r roleBindingRow
	if err := q.GetContext(ctx, &r, q.Rebind(query), id, projectID); err != nil {
		return RoleBinding{}, wrapError(op, err)
	}
	return r.roleBinding(), nil
}
