package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// The environments every project has, created with it in this order.
const (
	EnvironmentDevelopment = "development"
	EnvironmentStaging     = "staging"
	EnvironmentProduction  = "production"
)

// The project roles CreateProject seeds.
const (
	// ProjectAdminRole grants every permission ("*").
	ProjectAdminRole = "project-admin"
	// ProjectMemberRole grants "profile:read".
	ProjectMemberRole = "member"
)

// environmentNames lists the environments in creation (and listing) order.
var environmentNames = [...]string{EnvironmentDevelopment, EnvironmentStaging, EnvironmentProduction}

// seededProjectRoles are the roles CreateProject inserts, in this order.
var seededProjectRoles = [...]struct {
	slug, name  string
	permissions []string
}{
	{ProjectAdminRole, "Project admin", []string{"*"}},
	{ProjectMemberRole, "Member", []string{"profile:read"}},
}

// Project belongs to an organization; Slug is unique within it (archived
// projects included). ArchivedAt is nil unless the project is archived.
// Environments is filled by Project, CreateProject, UpdateProject and
// SetProjectArchived (in the order development, staging, production) and
// left nil by ListProjects.
type Project struct {
	ID             string
	OrganizationID string
	Name           string
	Slug           string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ArchivedAt     *time.Time
	Environments   []Environment
}

// Environment is one of a project's three environments; Name is one of the
// Environment constants.
type Environment struct {
	ID        string
	ProjectID string
	Name      string
	CreatedAt time.Time
}

// ProjectRole is a role of project RBAC: a set of permission strings that the
// product binds to its principals. Slug is unique within the project. The
// store does not interpret Permissions.
type ProjectRole struct {
	ID          string
	ProjectID   string
	Name        string
	Slug        string
	Description string
	Permissions []string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// CreateProject inserts p with its three environments (development, staging,
// production, in that order) and the two seeded project roles
// (ProjectAdminRole with ["*"], ProjectMemberRole with ["profile:read"]). It
// fills in an empty p.ID (NewID("prj")), sets p.CreatedAt and p.UpdatedAt to
// Store.Now and p.Environments to the new environments; p's ArchivedAt is
// ignored (a new project is active).
//
// It returns ErrInvalid when OrganizationID, Name or Slug is empty,
// ErrConflict when the organization has a project with that slug (or p.ID is
// taken), and ErrNotFound when the organization does not exist.
func (tx *Tx) CreateProject(ctx context.Context, p *Project) error {
	const op = "create project"
	if p.OrganizationID == "" || p.Name == "" || p.Slug == "" {
		return fmt.Errorf("store: %s: %w: organization, name and slug are required", op, ErrInvalid)
	}
	if p.ID == "" {
		p.ID = NewID("prj")
	}
	now := tx.store.Now()
	p.CreatedAt, p.UpdatedAt, p.ArchivedAt = now, now, nil

	const insertProject = `INSERT INTO projects (id, organization_id, name, slug, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insertProject),
		p.ID, p.OrganizationID, p.Name, p.Slug, sqlTime(now), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}

	environments := make([]Environment, len(environmentNames))
	const insertEnvironment = `INSERT INTO environments (id, project_id, name, created_at) VALUES (?, ?, ?, ?)`
	for i, name := range environmentNames {
		e := Environment{ID: NewID("env"), ProjectID: p.ID, Name: name, CreatedAt: now}
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insertEnvironment), e.ID, e.ProjectID, e.Name, sqlTime(now)); err != nil {
			return wrapError(op, err)
		}
		environments[i] = e
	}

	const insertRole = `INSERT INTO project_roles (id, project_id, name, slug, description,
		permissions, created_at, updated_at) VALUES (?, ?, ?, ?, '', ?, ?, ?)`
	for _, r := range seededProjectRoles {
		id := NewID("role")
		_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(insertRole), id, p.ID, r.name, r.slug, permissionsCopy(r.permissions), sqlTime(now), sqlTime(now))
		if err == nil {
			err = tx.insertPermissions(ctx, id, r.permissions)
		}
		if err != nil {
			return wrapError(op, err)
		}
	}
	p.Environments = environments
	return nil
}

// Project returns the project with the given ID with its environments,
// archived or not (callers decide whether an archived one is visible). It
// returns ErrNotFound when there is none.
func (s *Store) Project(ctx context.Context, id string) (Project, error) {
	return getProject(ctx, s.reader, "project", id)
}

// ListProjects returns the projects of organization orgID selected by state,
// oldest first (by CreatedAt, then ID), without their environments. No match
// is an empty slice, not ErrNotFound. It returns ErrInvalid for an unknown
// state.
func (s *Store) ListProjects(ctx context.Context, orgID string, state State) ([]Project, error) {
	const op = "list projects"
	archived, err := state.condition("archived_at")
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	query := "SELECT " + projectColumns + " FROM projects WHERE organization_id = ? AND " + archived +
		" ORDER BY created_at, id"
	var rows []projectRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), orgID); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]Project, len(rows))
	for i, r := range rows {
		out[i] = r.project()
	}
	return out, nil
}

// UpdateProject renames (name not nil) and/or re-slugs (slug not nil)
// project id, bumps its UpdatedAt and returns it with its environments.
//
// It returns ErrNotFound when there is no such project, ErrInvalid when name
// or slug is empty, and ErrConflict when another project of the organization
// has the new slug.
func (tx *Tx) UpdateProject(ctx context.Context, id string, name, slug *string) (Project, error) {
	const op = "update project"
	var sets []string
	var args []any
	if name != nil {
		if *name == "" {
			return Project{}, fmt.Errorf("store: %s: %w: empty name", op, ErrInvalid)
		}
		sets, args = append(sets, "name = ?"), append(args, *name)
	}
	if slug != nil {
		if *slug == "" {
			return Project{}, fmt.Errorf("store: %s: %w: empty slug", op, ErrInvalid)
		}
		sets, args = append(sets, "slug = ?"), append(args, *slug)
	}
	sets, args = append(sets, "updated_at = ?"), append(args, sqlTime(tx.store.Now()))
	return tx.updateProject(ctx, op, id, strings.Join(sets, ", "), args...)
}

// SetProjectArchived archives (archived true) or restores project id, bumps
// its UpdatedAt and returns it with its environments. Archiving sets
// ArchivedAt to Store.Now unless the project is archived already (the
// original ArchivedAt stays); restoring clears it.
//
// It returns ErrNotFound when there is no such project.
func (tx *Tx) SetProjectArchived(ctx context.Context, id string, archived bool) (Project, error) {
	now := sqlTime(tx.store.Now())
	if archived {
		return tx.updateProject(ctx, "archive project", id,
			"archived_at = COALESCE(archived_at, ?), updated_at = ?", now, now)
	}
	return tx.updateProject(ctx, "restore project", id, "archived_at = NULL, updated_at = ?", now)
}

// updateProject runs UPDATE projects SET <sets> WHERE id = ?, args being the
// arguments of sets, and returns the project with its environments.
func (tx *Tx) updateProject(ctx context.Context, op, id, sets string, args ...any) (Project, error) {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("UPDATE projects SET "+sets+" WHERE id = ?"), append(args, id)...)
	if err := oneRowAffected(op, res, err); err != nil {
		return Project{}, err
	}
	return getProject(ctx, tx.tx, op, id)
}

// ListProjectRoles returns the roles of project projectID, oldest first (by
// CreatedAt, then ID; the seeded ProjectAdminRole and ProjectMemberRole come
// first). No match is an empty slice, not ErrNotFound.
func (s *Store) ListProjectRoles(ctx context.Context, projectID string) ([]ProjectRole, error) {
	const op = "list project roles"
	roles, err := queryProjectRoles(ctx, s.reader, "r.project_id = ?", projectID)
	if err != nil {
		return nil, wrapError(op, err)
	}
	return roles, nil
}

// projectColumns are the columns projectRow scans.
const projectColumns = "id, organization_id, name, slug, created_at, updated_at, archived_at"

// projectRow is a projects row as scanned.
type projectRow struct {
	ID             string   `db:"id"`
	OrganizationID string   `db:"organization_id"`
	Name           string   `db:"name"`
	Slug           string   `db:"slug"`
	CreatedAt      sqlTime  `db:"created_at"`
	UpdatedAt      sqlTime  `db:"updated_at"`
	ArchivedAt     *sqlTime `db:"archived_at"`
}

func (r projectRow) project() Project {
	return Project{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Name:           r.Name,
		Slug:           r.Slug,
		CreatedAt:      time.Time(r.CreatedAt),
		UpdatedAt:      time.Time(r.UpdatedAt),
		ArchivedAt:     timePtr(r.ArchivedAt),
	}
}

// getProject reads a project and its environments in one query: one row per
// environment (a project always has three; the LEFT JOIN still finds one
// without).
func getProject(ctx context.Context, q querier, op, id string) (Project, error) {
	query := "SELECT " + qualify("p", projectColumns) + `,
			e.id AS environment_id, e.name AS environment_name, e.created_at AS environment_created_at
		FROM projects p LEFT JOIN environments e ON e.project_id = p.id
		WHERE p.id = ?
		ORDER BY CASE e.name WHEN 'development' THEN 0 WHEN 'staging' THEN 1 ELSE 2 END, e.id`
	var rows []struct {
		projectRow
		EnvironmentID        sql.NullString `db:"environment_id"`
		EnvironmentName      sql.NullString `db:"environment_name"`
		EnvironmentCreatedAt *sqlTime       `db:"environment_created_at"`
	}
	if err := q.SelectContext(ctx, &rows, q.Rebind(query), id); err != nil {
		return Project{}, wrapError(op, err)
	}
	if len(rows) == 0 {
		return Project{}, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	p := rows[0].project()
	p.Environments = []Environment{}
	for _, r := range rows {
		if r.EnvironmentID.Valid {
			p.Environments = append(p.Environments, Environment{
				ID:        r.EnvironmentID.String,
				ProjectID: p.ID,
				Name:      r.EnvironmentName.String,
				CreatedAt: *timePtr(r.EnvironmentCreatedAt),
			})
		}
	}
	return p, nil
}
