package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Project RBAC: the roles and role bindings a product defines per project (the decisions made
// from them are in v1_rbac_decisions.go). Every role and binding mutation writes its audit row
// in its transaction.

var (
	errRoleSlugTaken = Conflict("Project role slug already taken")
	errRoleInUse     = Conflict("Project role is bound; delete its bindings or pass force=true")
	errBindingExists = Conflict("Role binding already exists")
)

// ListProjectRoles lists a project's roles, the seeded ones first.
func (s *Server) ListProjectRoles(ctx context.Context, req gen.ListProjectRolesRequestObject) (gen.ListProjectRolesResponseObject, error) {
	roles, err := s.store.ListProjectRoles(ctx, req.ProjectId)
	if err != nil {
		return nil, err
	}
	out := make([]gen.ProjectRole, len(roles))
	for i, r := range roles {
		out[i] = projectRoleJSON(r)
	}
	return gen.ListProjectRoles200JSONResponse{Data: out}, nil
}

// CreateProjectRole creates a role; its slug defaults to the slugified name.
func (s *Server) CreateProjectRole(ctx context.Context, req gen.CreateProjectRoleRequestObject) (gen.CreateProjectRoleResponseObject, error) {
	slug, err := slugOrName(req.Body.Slug, req.Body.Name)
	if err != nil {
		return nil, err
	}
	r := store.ProjectRole{ProjectID: req.ProjectId, Name: req.Body.Name, Slug: slug, Permissions: req.Body.Permissions}
	if req.Body.Description != nil {
		r.Description = *req.Body.Description
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateProjectRole(ctx, &r); err != nil {
			return err
		}
		return audit(ctx, tx, roleEvent(ctx, "project_role.create", r.ID, map[string]any{
			"name": r.Name, "slug": r.Slug, "permissions": len(r.Permissions)}))
	})
	if err != nil {
		return nil, roleError(err)
	}
	return gen.CreateProjectRole201JSONResponse{Data: projectRoleJSON(r)}, nil
}

// UpdateProjectRole changes a role's name, slug, description or permissions; the next decision
// uses them.
func (s *Server) UpdateProjectRole(ctx context.Context, req gen.UpdateProjectRoleRequestObject) (gen.UpdateProjectRoleResponseObject, error) {
	b := req.Body
	u := store.ProjectRoleUpdate{Name: b.Name, Slug: b.Slug, Description: b.Description, Permissions: b.Permissions}
	var r store.ProjectRole
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if r, err = tx.UpdateProjectRole(ctx, req.ProjectId, req.RoleId, u); err != nil {
			return err
		}
		return audit(ctx, tx, roleEvent(ctx, "project_role.update", r.ID, changedFields(map[string]bool{
			"name": b.Name != nil, "slug": b.Slug != nil, "description": b.Description != nil,
			"permissions": b.Permissions != nil})))
	})
	if err != nil {
		return nil, roleError(err)
	}
	return gen.UpdateProjectRole200JSONResponse{Data: projectRoleJSON(r)}, nil
}

// DeleteProjectRole deletes a role: refused with 409 while bindings name it, unless force=true,
// which deletes them in the same transaction.
func (s *Server) DeleteProjectRole(ctx context.Context, req gen.DeleteProjectRoleRequestObject) (gen.DeleteProjectRoleResponseObject, error) {
	force := req.Params.Force != nil && *req.Params.Force
	var r store.ProjectRole
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		var bindings int
		if r, bindings, err = tx.DeleteProjectRole(ctx, req.ProjectId, req.RoleId, force); err != nil {
			return err
		}
		return audit(ctx, tx, roleEvent(ctx, "project_role.delete", r.ID, map[string]any{
			"slug": r.Slug, "force": force, "bindingsDeleted": bindings}))
	})
	if err != nil {
		return nil, roleError(err)
	}
	return gen.DeleteProjectRole200JSONResponse{Data: projectRoleJSON(r)}, nil
}

// ListRoleBindings lists a project's bindings, oldest first, filtered and paginated.
func (s *Server) ListRoleBindings(ctx context.Context, req gen.ListRoleBindingsRequestObject) (gen.ListRoleBindingsResponseObject, error) {
	p := req.Params
	f := store.RoleBindingFilter{}
	if p.PrincipalType != nil {
		f.PrincipalType = string(*p.PrincipalType)
	}
	if p.PrincipalId != nil {
		f.PrincipalID = *p.PrincipalId
	}
	if p.RoleId != nil {
		f.RoleID = *p.RoleId
	}
	if p.Limit != nil {
		f.Limit = *p.Limit
	}
	if p.Offset != nil {
		f.Offset = *p.Offset
	}
	bindings, err := s.store.ListRoleBindings(ctx, req.ProjectId, f)
	if err != nil {
		return nil, err
	}
	out := make([]gen.RoleBinding, len(bindings))
	for i, b := range bindings {
		out[i] = roleBindingJSON(b)
	}
	return gen.ListRoleBindings200JSONResponse{Data: out}, nil
}

// CreateRoleBinding binds a role of the project to a principal. A role of another project (or
// none) is 404; the same role, principal type and id twice is 409; expiresAt must lie ahead.
func (s *Server) CreateRoleBinding(ctx context.Context, req gen.CreateRoleBindingRequestObject) (gen.CreateRoleBindingResponseObject, error) {
	body := req.Body
	if body.ExpiresAt != nil && !body.ExpiresAt.After(s.store.Now()) {
		return nil, Validation(FieldError{Path: []string{"body", "expiresAt"}, Message: "must be in the future"})
	}
	b := store.RoleBinding{ProjectID: req.ProjectId, RoleID: body.RoleId, PrincipalType: string(body.PrincipalType),
		PrincipalID: body.PrincipalId, ExpiresAt: body.ExpiresAt}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateRoleBinding(ctx, &b); err != nil {
			return err
		}
		return audit(ctx, tx, bindingEvent(ctx, "role_binding.create", b))
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, errBindingExists
	}
	if err != nil {
		return nil, err
	}
	return gen.CreateRoleBinding201JSONResponse{Data: roleBindingJSON(b)}, nil
}

// DeleteRoleBinding deletes a binding; the very next decision no longer counts it.
func (s *Server) DeleteRoleBinding(ctx context.Context, req gen.DeleteRoleBindingRequestObject) (gen.DeleteRoleBindingResponseObject, error) {
	var b store.RoleBinding
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if b, err = tx.DeleteRoleBinding(ctx, req.ProjectId, req.BindingId); err != nil {
			return err
		}
		return audit(ctx, tx, bindingEvent(ctx, "role_binding.delete", b))
	})
	if err != nil {
		return nil, err
	}
	return gen.DeleteRoleBinding200JSONResponse{Data: roleBindingJSON(b)}, nil
}

// roleError maps the store's refusals of a role mutation to problems.
func roleError(err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return errRoleSlugTaken
	case errors.Is(err, store.ErrInUse):
		return errRoleInUse
	case errors.Is(err, store.ErrLimit):
		return Validation(FieldError{Path: []string{"body", "permissions"},
			Message: fmt.Sprintf("must have at most %d items", store.MaxRolePermissions)})
	}
	return err
}

func roleEvent(ctx context.Context, action, roleID string, metadata map[string]any) auditEvent {
	scope := ScopeFrom(ctx)
	return auditEvent{Action: action, TargetType: "project_role", TargetID: roleID,
		OrganizationID: scope.OrganizationID, ProjectID: scope.ProjectID, Metadata: metadata}
}

func bindingEvent(ctx context.Context, action string, b store.RoleBinding) auditEvent {
	scope := ScopeFrom(ctx)
	metadata := map[string]any{"roleId": b.RoleID, "roleSlug": b.RoleSlug,
		"principalType": b.PrincipalType, "principalId": b.PrincipalID}
	if b.ExpiresAt != nil {
		metadata["expiresAt"] = b.ExpiresAt.Format(time.RFC3339Nano)
	}
	return auditEvent{Action: action, TargetType: "role_binding", TargetID: b.ID,
		OrganizationID: scope.OrganizationID, ProjectID: b.ProjectID, Metadata: metadata}
}

func projectRoleJSON(r store.ProjectRole) gen.ProjectRole {
	return gen.ProjectRole{
		Id: r.ID, ProjectId: r.ProjectID, Name: r.Name, Slug: r.Slug, Description: r.Description,
		Permissions: r.Permissions, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func roleBindingJSON(b store.RoleBinding) gen.RoleBinding {
	return gen.RoleBinding{
		Id: b.ID, ProjectId: b.ProjectID, RoleId: b.RoleID, RoleSlug: b.RoleSlug,
		PrincipalType: gen.PrincipalType(b.PrincipalType), PrincipalId: b.PrincipalID,
		ExpiresAt: nullableOf(b.ExpiresAt), CreatedAt: b.CreatedAt,
	}
}
