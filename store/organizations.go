package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// State selects rows of an archivable resource (organizations, projects) by
// their archive timestamp. The values are those of the `state` query
// parameter of interface.md.
type State string

// The states a list can select.
const (
	// StateActive selects rows that are not archived. The zero State means
	// StateActive too.
	StateActive State = "active"
	// StateArchived selects archived rows only.
	StateArchived State = "archived"
	// StateAll selects both.
	StateAll State = "all"
)

// condition returns the SQL condition on the archive-timestamp column that
// selects st, or an error wrapping ErrInvalid for an unknown state.
func (st State) condition(column string) (string, error) {
	switch st {
	case StateActive, "":
		return column + " IS NULL", nil
	case StateArchived:
		return column + " IS NOT NULL", nil
	case StateAll:
		return "1 = 1", nil
	default:
		return "", fmt.Errorf("%w: state %q", ErrInvalid, string(st))
	}
}

// Organization is a tenant: it holds members and projects. Slug is unique
// across all organizations, archived ones included.
//
// Logo is nil when the organization has none (an empty string is stored as
// none). Metadata is a JSON object; nil or empty is stored as NULL and read
// back as nil, and numbers read back as float64. ArchivedAt is nil unless
// the organization is archived.
type Organization struct {
	ID       string
	Name     string
	Slug     string
	Logo     *string
	Metadata map[string]any
	// RequireTwoFactor refuses the organization's /api/v1 routes to members without a second
	// factor (the server enforces it; see Scope).
	RequireTwoFactor bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
	ArchivedAt       *time.Time
}

// OrganizationMembership is an organization as one of its members sees it:
// with the member's role (one role or several comma-joined).
type OrganizationMembership struct {
	Organization
	Role string
}

// OrganizationUpdate lists the fields UpdateOrganization changes; a nil
// field is left unchanged. A Logo pointing to "" removes the logo, and a
// Metadata pointing to a nil or empty map removes the metadata.
type OrganizationUpdate struct {
	Name     *string
	Slug     *string
	Logo     *string
	Metadata *map[string]any
	// RequireTwoFactor, when set, sets Organization.RequireTwoFactor.
	RequireTwoFactor *bool
}

// CreateOrganization inserts o and makes ownerUserID its first member with
// the role RoleOwner, returning that membership. It fills in an empty o.ID
// (NewID("org")), sets o.CreatedAt and o.UpdatedAt (and the membership's)
// to Store.Now, and updates o to match what was stored (an empty Logo or
// Metadata becomes nil; ArchivedAt is ignored: a new organization is
// active).
//
// It returns ErrInvalid when Name, Slug or ownerUserID is empty or Metadata
// does not encode as JSON, ErrConflict when the slug (or o.ID) is taken, and
// ErrNotFound when no user has the ID ownerUserID.
func (tx *Tx) CreateOrganization(ctx context.Context, o *Organization, ownerUserID string) (Member, error) {
	const op = "create organization"
	if o.Name == "" || o.Slug == "" || ownerUserID == "" {
		return Member{}, fmt.Errorf("store: %s: %w: name, slug and owner are required", op, ErrInvalid)
	}
	metadata, err := encodeObject(o.Metadata)
	if err != nil {
		return Member{}, fmt.Errorf("store: %s: %w: metadata: %v", op, ErrInvalid, err)
	}
	if o.ID == "" {
		o.ID = NewID("org")
	}
	if o.Logo != nil && *o.Logo == "" {
		o.Logo = nil
	}
	if len(o.Metadata) == 0 {
		o.Metadata = nil
	}
	now := tx.store.Now()
	o.CreatedAt, o.UpdatedAt, o.ArchivedAt = now, now, nil

	const query = `INSERT INTO organizations (id, name, slug, logo, metadata, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		o.ID, o.Name, o.Slug, o.Logo, metadata, sqlTime(now), sqlTime(now))
	if err != nil {
		return Member{}, wrapError(op, err)
	}
	return tx.insertMember(ctx, op, o.ID, ownerUserID, RoleOwner, now)
}

// Organization returns the organization with the given ID, archived or not
// (callers decide whether an archived one is visible). It returns
// ErrNotFound when there is none.
func (s *Store) Organization(ctx context.Context, id string) (Organization, error) {
	return getOrganization(ctx, s.reader, "organization", "id = ?", id)
}

// OrganizationBySlug returns the organization with the given slug, archived
// or not. It returns ErrNotFound when there is none.
func (s *Store) OrganizationBySlug(ctx context.Context, slug string) (Organization, error) {
	return getOrganization(ctx, s.reader, "organization by slug", "slug = ?", slug)
}

// SlugTaken reports whether an organization, archived or not, has the given
// slug.
func (s *Store) SlugTaken(ctx context.Context, slug string) (bool, error) {
	var n int
	err := s.reader.GetContext(ctx, &n, s.reader.Rebind("SELECT COUNT(*) FROM organizations WHERE slug = ?"), slug)
	if err != nil {
		return false, wrapError("slug taken", err)
	}
	return n > 0, nil
}

// ListUserOrganizations returns the organizations userID is a member of,
// selected by state, oldest first (by CreatedAt, then ID), each with the
// user's role in it. No match is an empty slice, not ErrNotFound. It returns
// ErrInvalid for an unknown state.
func (s *Store) ListUserOrganizations(ctx context.Context, userID string, state State) ([]OrganizationMembership, error) {
	const op = "list user organizations"
	archived, err := state.condition("o.archived_at")
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	query := `SELECT ` + qualify("o", organizationColumns) + `, m.role
		FROM members m JOIN organizations o ON o.id = m.organization_id
		WHERE m.user_id = ? AND ` + archived + `
		ORDER BY o.created_at, o.id`
	var rows []struct {
		organizationRow
		Role string `db:"role"`
	}
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), userID); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]OrganizationMembership, len(rows))
	for i, r := range rows {
		o, err := r.organization()
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		out[i] = OrganizationMembership{Organization: o, Role: r.Role}
	}
	return out, nil
}

// UpdateOrganization changes the fields of organization id that u sets and
// bumps UpdatedAt (even when u sets nothing), returning the result.
//
// It returns ErrNotFound when there is no such organization, ErrInvalid when
// u sets an empty Name or Slug or a Metadata that does not encode as JSON,
// and ErrConflict when the new slug is taken.
func (tx *Tx) UpdateOrganization(ctx context.Context, id string, u OrganizationUpdate) (Organization, error) {
	const op = "update organization"
	var sets []string
	var args []any
	if u.Name != nil {
		if *u.Name == "" {
			return Organization{}, fmt.Errorf("store: %s: %w: empty name", op, ErrInvalid)
		}
		sets, args = append(sets, "name = ?"), append(args, *u.Name)
	}
	if u.Slug != nil {
		if *u.Slug == "" {
			return Organization{}, fmt.Errorf("store: %s: %w: empty slug", op, ErrInvalid)
		}
		sets, args = append(sets, "slug = ?"), append(args, *u.Slug)
	}
	if u.Logo != nil {
		sets, args = append(sets, "logo = ?"), append(args, nullString(*u.Logo))
	}
	if u.Metadata != nil {
		metadata, err := encodeObject(*u.Metadata)
		if err != nil {
			return Organization{}, fmt.Errorf("store: %s: %w: metadata: %v", op, ErrInvalid, err)
		}
		sets, args = append(sets, "metadata = ?"), append(args, metadata)
	}
	if u.RequireTwoFactor != nil {
		sets, args = append(sets, "require_two_factor = ?"), append(args, *u.RequireTwoFactor)
	}
	sets, args = append(sets, "updated_at = ?"), append(args, sqlTime(tx.store.Now()))
	return tx.updateOrganization(ctx, op, id, strings.Join(sets, ", "), args...)
}

// SetOrganizationArchived archives (archived true) or restores organization
// id and bumps UpdatedAt, returning the result. Archiving sets ArchivedAt to
// Store.Now, unless the organization is already archived: then the original
// ArchivedAt stays. Restoring clears it.
//
// It returns ErrNotFound when there is no such organization.
func (tx *Tx) SetOrganizationArchived(ctx context.Context, id string, archived bool) (Organization, error) {
	now := sqlTime(tx.store.Now())
	if archived {
		return tx.updateOrganization(ctx, "archive organization", id,
			"archived_at = COALESCE(archived_at, ?), updated_at = ?", now, now)
	}
	return tx.updateOrganization(ctx, "restore organization", id, "archived_at = NULL, updated_at = ?", now)
}

// updateOrganization runs UPDATE organizations SET <sets> WHERE id = ?, args
// being the arguments of sets, and returns the updated row.
func (tx *Tx) updateOrganization(ctx context.Context, op, id, sets string, args ...any) (Organization, error) {
	query := "UPDATE organizations SET " + sets + " WHERE id = ? RETURNING " + organizationColumns
	var r organizationRow
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), append(args, id)...); err != nil {
		return Organization{}, wrapError(op, err)
	}
	o, err := r.organization()
	if err != nil {
		return Organization{}, fmt.Errorf("store: %s: %w", op, err)
	}
	return o, nil
}

// lockOrganization makes sure organization orgID exists and, on PostgreSQL,
// locks its row until the transaction ends (FOR NO KEY UPDATE: it excludes
// other lockers and updates of the row, but not inserts of rows that
// reference it). Read-count-write rules over an organization's children
// (the last owner, the role limit) lock it first, so concurrent transactions
// apply them one after the other; on SQLite transactions are serialised
// already (see Dialect.lockClause).
//
// It returns sql.ErrNoRows (unwrapped) when the organization does not exist.
func (tx *Tx) lockOrganization(ctx context.Context, orgID string) error {
	query := "SELECT id FROM organizations WHERE id = ?" + tx.store.dialect.lockClause(lockForNoKeyUpdate)
	var id string
	return tx.tx.GetContext(ctx, &id, tx.tx.Rebind(query), orgID)
}

// organizationColumns are the columns organizationRow scans.
const organizationColumns = "id, name, slug, logo, metadata, require_two_factor, created_at, updated_at, archived_at"

// organizationRow is an organizations row as scanned.
type organizationRow struct {
	ID         string         `db:"id"`
	Name       string         `db:"name"`
	Slug       string         `db:"slug"`
	Logo       sql.NullString `db:"logo"`
	Metadata   sql.NullString `db:"metadata"`
	TwoFactor  bool           `db:"require_two_factor"`
	CreatedAt  sqlTime        `db:"created_at"`
	UpdatedAt  sqlTime        `db:"updated_at"`
	ArchivedAt *sqlTime       `db:"archived_at"`
}

func (r organizationRow) organization() (Organization, error) {
	o := Organization{
		ID:               r.ID,
		Name:             r.Name,
		Slug:             r.Slug,
		CreatedAt:        time.Time(r.CreatedAt),
		RequireTwoFactor: r.TwoFactor,
		UpdatedAt:        time.Time(r.UpdatedAt),
		Logo:             nullStringPtr(r.Logo),
		ArchivedAt:       timePtr(r.ArchivedAt),
	}
	if r.Metadata.Valid {
		if err := json.Unmarshal([]byte(r.Metadata.String), &o.Metadata); err != nil {
			return Organization{}, fmt.Errorf("organization %s: metadata: %w", r.ID, err)
		}
	}
	return o, nil
}

func getOrganization(ctx context.Context, q querier, op, where string, args ...any) (Organization, error) {
	var r organizationRow
	query := "SELECT " + organizationColumns + " FROM organizations WHERE " + where
	if err := q.GetContext(ctx, &r, q.Rebind(query), args...); err != nil {
		return Organization{}, wrapError(op, err)
	}
	o, err := r.organization()
	if err != nil {
		return Organization{}, fmt.Errorf("store: %s: %w", op, err)
	}
	return o, nil
}

// querier is the part of *sqlx.DB and *sqlx.Tx that reads use, so that one
// helper serves both Store methods (the reader pool) and Tx methods (inside
// the transaction).
type querier interface {
	GetContext(ctx context.Context, dest any, query string, args ...any) error
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
	Rebind(query string) string
}

// reads holds the read methods that both Store and Tx offer (MemberByID,
// OrgRole, PendingInvitation): each embeds it, so each query is written once.
// On a Store, q is the reader pool; on a Tx, the transaction.
type reads struct {
	q     querier
	store *Store
}

// qualify prefixes every column of a comma-separated list with table + ".".
func qualify(table, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = table + "." + c
	}
	return strings.Join(cols, ", ")
}

// timePtr converts a nullable scanned timestamp.
func timePtr(t *sqlTime) *time.Time {
	if t == nil {
		return nil
	}
	v := time.Time(*t)
	return &v
}

// encodeObject encodes a JSON object column: nil or empty is NULL.
func encodeObject(m map[string]any) (sql.NullString, error) {
	if len(m) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// wrapWriteError is wrapError for writes that reference other rows: a
// foreign-key violation (the referenced row does not exist) becomes
// ErrNotFound, with the driver's message in the text only.
func wrapWriteError(op string, err error) error {
	if isMissingReference(err) {
		return fmt.Errorf("store: %s: %w: %v", op, ErrNotFound, err)
	}
	return wrapError(op, err)
}

// MaxOrgRoles is the most dynamic access-control roles one organization may
// define.
const MaxOrgRoles = 25

// OrgRole is a dynamic access-control role of an organization (better-auth's
// organization role): a name unique within the organization and the actions
// it grants per resource, {"resource": ["action", ...]}. The store does not
// interpret Permission.
type OrgRole struct {
	ID             string
	OrganizationID string
	Role           string
	Permission     map[string][]string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// CreateOrgRole inserts r. It fills in an empty r.ID (NewID("orl")), turns a
// nil Permission (or nil action list) into an empty one, and sets
// r.CreatedAt and r.UpdatedAt to Store.Now. It counts the organization's
// roles inside the transaction, with the organization locked (see
// lockOrganization), so that concurrent creations cannot pass the limit.
//
// It returns ErrInvalid when r.Role is empty, ErrNotFound when the
// organization does not exist, ErrLimit when it has MaxOrgRoles roles
// already, and ErrConflict when it has a role with that name (or r.ID is
// taken).
func (tx *Tx) CreateOrgRole(ctx context.Context, r *OrgRole) error {
	const op = "create organization role"
	if r.Role == "" {
		return fmt.Errorf("store: %s: %w: empty role name", op, ErrInvalid)
	}
	permission, err := encodePermission(r.Permission)
	if err != nil {
		return fmt.Errorf("store: %s: %w: permission: %v", op, ErrInvalid, err)
	}
	if err := tx.lockOrganization(ctx, r.OrganizationID); err != nil {
		return wrapError(op, err)
	}
	var n int
	err = tx.tx.GetContext(ctx, &n, tx.tx.Rebind("SELECT COUNT(*) FROM organization_roles WHERE organization_id = ?"), r.OrganizationID)
	if err != nil {
		return wrapError(op, err)
	}
	if n >= MaxOrgRoles {
		return fmt.Errorf("store: %s: %w: an organization has at most %d roles", op, ErrLimit, MaxOrgRoles)
	}

	if r.ID == "" {
		r.ID = NewID("orl")
	}
	r.Permission = normalizePermission(r.Permission)
	now := tx.store.Now()
	r.CreatedAt, r.UpdatedAt = now, now
	const query = `INSERT INTO organization_roles (id, organization_id, role, permission, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)`
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		r.ID, r.OrganizationID, r.Role, permission, sqlTime(now), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}
	return nil
}

// ListOrgRoles returns the dynamic roles of organization orgID, oldest first
// (by CreatedAt, then ID). No match is an empty slice, not ErrNotFound.
func (s *Store) ListOrgRoles(ctx context.Context, orgID string) ([]OrgRole, error) {
	const op = "list organization roles"
	var rows []orgRoleRow
	query := "SELECT " + orgRoleColumns + " FROM organization_roles WHERE organization_id = ? ORDER BY created_at, id"
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), orgID); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]OrgRole, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = r.orgRole(); err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
	}
	return out, nil
}

// OrgRole returns the dynamic role of organization orgID whose ID or, failing
// that, name is idOrName. It returns ErrNotFound when there is none. On a Tx
// it sees the transaction's own writes.
func (r reads) OrgRole(ctx context.Context, orgID, idOrName string) (OrgRole, error) {
	return getOrgRole(ctx, r.q, "organization role", orgID, idOrName)
}

// UpdateOrgRole renames (newName not nil) and/or replaces the permission
// (permission not nil) of the dynamic role of organization orgID whose ID
// or name is idOrName, bumps its UpdatedAt and returns it. Members keep the
// role names they hold: renaming a role does not rename their roles.
//
// It returns ErrNotFound when there is no such role, ErrInvalid when newName
// is empty, and ErrConflict when the organization has a role named newName.
func (tx *Tx) UpdateOrgRole(ctx context.Context, orgID, idOrName string, newName *string, permission map[string][]string) (OrgRole, error) {
	const op = "update organization role"
	var sets []string
	var args []any
	if newName != nil {
		if *newName == "" {
			return OrgRole{}, fmt.Errorf("store: %s: %w: empty role name", op, ErrInvalid)
		}
		sets, args = append(sets, "role = ?"), append(args, *newName)
	}
	if permission != nil {
		encoded, err := encodePermission(permission)
		if err != nil {
			return OrgRole{}, fmt.Errorf("store: %s: %w: permission: %v", op, ErrInvalid, err)
		}
		sets, args = append(sets, "permission = ?"), append(args, encoded)
	}
	current, err := getOrgRole(ctx, tx.tx, op, orgID, idOrName)
	if err != nil {
		return OrgRole{}, err
	}
	sets, args = append(sets, "updated_at = ?"), append(args, sqlTime(tx.store.Now()))
	query := "UPDATE organization_roles SET " + strings.Join(sets, ", ") + " WHERE id = ? RETURNING " + orgRoleColumns
	var r orgRoleRow
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), append(args, current.ID)...); err != nil {
		return OrgRole{}, wrapError(op, err)
	}
	updated, err := r.orgRole()
	if err != nil {
		return OrgRole{}, fmt.Errorf("store: %s: %w", op, err)
	}
	return updated, nil
}

// DeleteOrgRole deletes the dynamic role of organization orgID whose ID or
// name is idOrName. It returns ErrNotFound when there is no such role.
func (tx *Tx) DeleteOrgRole(ctx context.Context, orgID, idOrName string) error {
	const op = "delete organization role"
	r, err := getOrgRole(ctx, tx.tx, op, orgID, idOrName)
	if err != nil {
		return err
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM organization_roles WHERE id = ?"), r.ID)
	return oneRowAffected(op, res, err)
}

// getOrgRole finds a role by ID first, then by name, so that a role named
// like another role's ID cannot shadow it.
func getOrgRole(ctx context.Context, q querier, op, orgID, idOrName string) (OrgRole, error) {
	query := "SELECT " + orgRoleColumns + ` FROM organization_roles
		WHERE organization_id = ? AND (id = ? OR role = ?)
		ORDER BY CASE WHEN id = ? THEN 0 ELSE 1 END LIMIT 1`
	var r orgRoleRow
	if err := q.GetContext(ctx, &r, q.Rebind(query), orgID, idOrName, idOrName, idOrName); err != nil {
		return OrgRole{}, wrapError(op, err)
	}
	role, err := r.orgRole()
	if err != nil {
		return OrgRole{}, fmt.Errorf("store: %s: %w", op, err)
	}
	return role, nil
}

// orgRoleColumns are the columns orgRoleRow scans.
const orgRoleColumns = "id, organization_id, role, permission, created_at, updated_at"

// orgRoleRow is an organization_roles row as scanned.
type orgRoleRow struct {
	ID             string  `db:"id"`
	OrganizationID string  `db:"organization_id"`
	Role           string  `db:"role"`
	Permission     string  `db:"permission"`
	CreatedAt      sqlTime `db:"created_at"`
	UpdatedAt      sqlTime `db:"updated_at"`
}

func (r orgRoleRow) orgRole() (OrgRole, error) {
	role := OrgRole{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Role:           r.Role,
		CreatedAt:      time.Time(r.CreatedAt),
		UpdatedAt:      time.Time(r.UpdatedAt),
	}
	if err := json.Unmarshal([]byte(r.Permission), &role.Permission); err != nil {
		return OrgRole{}, fmt.Errorf("organization role %s: permission: %w", r.ID, err)
	}
	role.Permission = normalizePermission(role.Permission)
	return role, nil
}

// normalizePermission returns p with nil replaced by empty values, as it
// reads back.
func normalizePermission(p map[string][]string) map[string][]string {
	out := make(map[string][]string, len(p))
	for resource, actions := range p {
		if actions == nil {
			actions = []string{}
		}
		out[resource] = actions
	}
	return out
}

// encodePermission encodes a permission column: always a JSON object whose
// values are arrays.
func encodePermission(p map[string][]string) (string, error) {
	b, err := json.Marshal(normalizePermission(p))
	return string(b), err
}
