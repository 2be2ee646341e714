package server

import (
	"context"
	"errors"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// errProjectSlugTaken answers a duplicate project slug within an organization.
var errProjectSlugTaken = Conflict("Project slug already taken")

// ListProjects lists an organization's projects by archive state.
func (s *Server) ListProjects(ctx context.Context, req gen.ListProjectsRequestObject) (gen.ListProjectsResponseObject, error) {
	state := store.StateActive
	if req.Params.State != nil {
		state = store.State(*req.Params.State)
	}
	projects, err := s.store.ListProjects(ctx, req.OrganizationId, state)
	if err != nil {
		return nil, err
	}
	out := make([]gen.Project, len(projects))
	for i, p := range projects {
		out[i] = gen.Project{
			Id: p.ID, OrganizationId: p.OrganizationID, Name: p.Name, Slug: p.Slug,
			CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, ArchivedAt: nullableOf(p.ArchivedAt),
		}
	}
	return gen.ListProjects200JSONResponse{Data: out}, nil
}

// CreateProject creates a project with its environments and seeded roles in one transaction.
func (s *Server) CreateProject(ctx context.Context, req gen.CreateProjectRequestObject) (gen.CreateProjectResponseObject, error) {
	slug, err := slugOrName(req.Body.Slug, req.Body.Name)
	if err != nil {
		return nil, err
	}
	p := store.Project{OrganizationID: req.OrganizationId, Name: req.Body.Name, Slug: slug}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateProject(ctx, &p); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "project.create", TargetType: "project", TargetID: p.ID,
			OrganizationID: p.OrganizationID, ProjectID: p.ID, Metadata: map[string]any{"name": p.Name, "slug": p.Slug}})
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, errProjectSlugTaken
	}
	if err != nil {
		return nil, err
	}
	return gen.CreateProject201JSONResponse{Data: projectJSON(p)}, nil
}

// GetProject returns a project with its environments.
func (s *Server) GetProject(ctx context.Context, req gen.GetProjectRequestObject) (gen.GetProjectResponseObject, error) {
	p, err := s.store.Project(ctx, req.ProjectId)
	if err != nil {
		return nil, err
	}
	return gen.GetProject200JSONResponse{Data: projectJSON(p)}, nil
}

// UpdateProject renames a project or changes its slug.
func (s *Server) UpdateProject(ctx context.Context, req gen.UpdateProjectRequestObject) (gen.UpdateProjectResponseObject, error) {
	p, err := s.mutateProject(ctx, req.ProjectId, "project.update",
		changedFields(map[string]bool{"name": req.Body.Name != nil, "slug": req.Body.Slug != nil}),
		func(tx *store.Tx) (store.Project, error) {
			return tx.UpdateProject(ctx, req.ProjectId, req.Body.Name, req.Body.Slug)
		})
	if err != nil {
		return nil, err
	}
	return gen.UpdateProject200JSONResponse{Data: projectJSON(p)}, nil
}

// ArchiveProject archives a project.
func (s *Server) ArchiveProject(ctx context.Context, req gen.ArchiveProjectRequestObject) (gen.ArchiveProjectResponseObject, error) {
	p, err := s.mutateProject(ctx, req.ProjectId, "project.archive", nil,
		func(tx *store.Tx) (store.Project, error) { return tx.SetProjectArchived(ctx, req.ProjectId, true) })
	if err != nil {
		return nil, err
	}
	return gen.ArchiveProject200JSONResponse{Data: projectJSON(p)}, nil
}

// RestoreProject restores an archived project.
func (s *Server) RestoreProject(ctx context.Context, req gen.RestoreProjectRequestObject) (gen.RestoreProjectResponseObject, error) {
	p, err := s.mutateProject(ctx, req.ProjectId, "project.restore", nil,
		func(tx *store.Tx) (store.Project, error) { return tx.SetProjectArchived(ctx, req.ProjectId, false) })
	if err != nil {
		return nil, err
	}
	return gen.RestoreProject200JSONResponse{Data: projectJSON(p)}, nil
}

// ListProjectAuditLogs returns one page of the project's audit entries, newest first, filtered
// by the query (auditPage).
func (s *Server) ListProjectAuditLogs(ctx context.Context, req gen.ListProjectAuditLogsRequestObject) (gen.ListProjectAuditLogsResponseObject, error) {
	p := req.Params
	entries, next, err := s.auditPage(ctx, store.AuditFilter{ProjectID: req.ProjectId},
		auditQuery{p.Action, p.ActorId, p.TargetId, p.Since, p.Until, p.Cursor})
	if err != nil {
		return nil, err
	}
	res := gen.ListProjectAuditLogs200JSONResponse{Body: gen.AuditLogList{Data: entries}}
	res.Headers.XNextCursor = next
	return res, nil
}

// mutateProject runs one project mutation and its audit row in a transaction.
func (s *Server) mutateProject(ctx context.Context, projectID, action string, metadata map[string]any,
	mutate func(tx *store.Tx) (store.Project, error)) (store.Project, error) {
	var p store.Project
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if p, err = mutate(tx); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: action, TargetType: "project", TargetID: projectID,
			OrganizationID: p.OrganizationID, ProjectID: projectID, Metadata: metadata})
	})
	if errors.Is(err, store.ErrConflict) {
		return p, errProjectSlugTaken
	}
	return p, err
}

func projectJSON(p store.Project) gen.ProjectWithEnvironments {
	envs := make([]gen.Environment, len(p.Environments))
	for i, e := range p.Environments {
		envs[i] = gen.Environment{Id: e.ID, ProjectId: e.ProjectID, Name: gen.EnvironmentName(e.Name), CreatedAt: e.CreatedAt}
	}
	return gen.ProjectWithEnvironments{
		Id: p.ID, OrganizationId: p.OrganizationID, Name: p.Name, Slug: p.Slug,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, ArchivedAt: nullableOf(p.ArchivedAt),
		Environments: envs,
	}
}
