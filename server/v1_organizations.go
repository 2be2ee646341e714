package server

import (
	"context"
	"slices"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ListOrganizations lists the caller's organizations by archive state.
func (s *Server) ListOrganizations(ctx context.Context, req gen.ListOrganizationsRequestObject) (gen.ListOrganizationsResponseObject, error) {
	state := store.StateActive
	if req.Params.State != nil {
		state = store.State(*req.Params.State)
	}
	orgs, err := s.store.ListUserOrganizations(ctx, PrincipalFrom(ctx).ID(), state)
	if err != nil {
		return nil, err
	}
	out := make([]gen.Organization, len(orgs))
	for i, o := range orgs {
		out[i] = organizationJSON(o.Organization, o.Role)
	}
	return gen.ListOrganizations200JSONResponse{Data: out}, nil
}

// CreateOrganization creates an organization owned by the caller.
func (s *Server) CreateOrganization(ctx context.Context, req gen.CreateOrganizationRequestObject) (gen.CreateOrganizationResponseObject, error) {
	slug, err := slugOrName(req.Body.Slug, req.Body.Name)
	if err != nil {
		return nil, err
	}
	org, _, err := s.createOrganization(ctx, store.Organization{Name: req.Body.Name, Slug: slug})
	if err != nil {
		return nil, err
	}
	return gen.CreateOrganization201JSONResponse{Data: organizationJSON(org, RoleOwner)}, nil
}

// GetOrganization returns an organization the caller is a member of.
func (s *Server) GetOrganization(ctx context.Context, req gen.GetOrganizationRequestObject) (gen.GetOrganizationResponseObject, error) {
	org, err := s.store.Organization(ctx, req.OrganizationId)
	if err != nil {
		return nil, err
	}
	return gen.GetOrganization200JSONResponse{Data: organizationJSON(org, ScopeFrom(ctx).MemberRole)}, nil
}

// GetMyOrganizationPermissions returns the caller's role in the organization and the
// control-plane permissions its fixed roles grant (roleGrants, the authorizer's own rule), sorted.
func (s *Server) GetMyOrganizationPermissions(ctx context.Context, req gen.GetMyOrganizationPermissionsRequestObject) (gen.GetMyOrganizationPermissionsResponseObject, error) {
	role := ScopeFrom(ctx).MemberRole
	perms := []string{}
	for _, p := range allPermissions {
		if roleGrants(role, p) {
			perms = append(perms, p)
		}
	}
	slices.Sort(perms)
	return gen.GetMyOrganizationPermissions200JSONResponse{Data: gen.MemberPermissions{Role: role, Permissions: perms}}, nil
}

// UpdateOrganization renames an organization, changes its slug or whether it requires a second
// factor of its members: that only an owner changes, and only an owner whose own factor is on
// turns it on.
func (s *Server) UpdateOrganization(ctx context.Context, req gen.UpdateOrganizationRequestObject) (gen.UpdateOrganizationResponseObject, error) {
	if rt := req.Body.RequireTwoFactor; rt != nil {
		scope := ScopeFrom(ctx)
		if !hasRole(scope.MemberRole, RoleOwner) {
			return nil, ErrPermission
		}
		if *rt && !scope.MemberTwoFactor {
			return nil, ErrTwoFactorRequired
		}
	}
	org, err := s.updateOrganization(ctx, req.OrganizationId, store.OrganizationUpdate{Name: req.Body.Name, Slug: req.Body.Slug,
		RequireTwoFactor: req.Body.RequireTwoFactor})
	if err != nil {
		return nil, err
	}
	return gen.UpdateOrganization200JSONResponse{Data: organizationJSON(org, ScopeFrom(ctx).MemberRole)}, nil
}

// ArchiveOrganization archives an organization.
func (s *Server) ArchiveOrganization(ctx context.Context, req gen.ArchiveOrganizationRequestObject) (gen.ArchiveOrganizationResponseObject, error) {
	org, err := s.setOrganizationArchived(ctx, req.OrganizationId, true)
	if err != nil {
		return nil, err
	}
	return gen.ArchiveOrganization200JSONResponse{Data: organizationJSON(org, ScopeFrom(ctx).MemberRole)}, nil
}

// RestoreOrganization restores an archived organization.
func (s *Server) RestoreOrganization(ctx context.Context, req gen.RestoreOrganizationRequestObject) (gen.RestoreOrganizationResponseObject, error) {
	org, err := s.setOrganizationArchived(ctx, req.OrganizationId, false)
	if err != nil {
		return nil, err
	}
	return gen.RestoreOrganization200JSONResponse{Data: organizationJSON(org, ScopeFrom(ctx).MemberRole)}, nil
}

// ListOrganizationAuditLogs returns one page of the organization's audit entries, newest first, filtered
// by the query (auditPage).
func (s *Server) ListOrganizationAuditLogs(ctx context.Context, req gen.ListOrganizationAuditLogsRequestObject) (gen.ListOrganizationAuditLogsResponseObject, error) {
	p := req.Params
	entries, next, err := s.auditPage(ctx, store.AuditFilter{OrganizationID: req.OrganizationId},
		auditQuery{p.Action, p.ActorId, p.TargetId, p.Since, p.Until, p.Cursor})
	if err != nil {
		return nil, err
	}
	res := gen.ListOrganizationAuditLogs200JSONResponse{Body: gen.AuditLogList{Data: entries}}
	res.Headers.XNextCursor = next
	return res, nil
}

// slugOrName returns the given slug, or the slugified name; a name with nothing usable for a
// slug must come with one.
func slugOrName(slug *string, name string) (string, error) {
	if slug != nil {
		return *slug, nil
	}
	if s := slugify(name); s != "" {
		return s, nil
	}
	return "", Validation(FieldError{Path: []string{"body", "slug"}, Message: "is required when the name has no letters or digits"})
}

func organizationJSON(o store.Organization, role string) gen.Organization {
	return gen.Organization{
		Id: o.ID, Name: o.Name, Slug: o.Slug, Role: role, RequireTwoFactor: o.RequireTwoFactor,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, ArchivedAt: nullableOf(o.ArchivedAt),
	}
}

func auditJSON(entries []store.AuditEntry) []gen.AuditLogEntry {
	out := make([]gen.AuditLogEntry, len(entries))
	for i, e := range entries {
		md := nullable.NewNullNullable[map[string]any]()
		if len(e.Metadata) > 0 {
			md = nullable.NewNullableWithValue(e.Metadata)
		}
		out[i] = gen.AuditLogEntry{
			Id: e.ID, OccurredAt: e.OccurredAt, Action: e.Action,
			Actor:          gen.AuditRef{Type: e.ActorType, Id: e.ActorID},
			Target:         gen.AuditRef{Type: e.TargetType, Id: e.TargetID},
			OrganizationId: nullableString(e.OrganizationID), ProjectId: nullableString(e.ProjectID),
			RequestId: e.RequestID, IpAddress: e.IPAddress, UserAgent: e.UserAgent, Metadata: md,
		}
	}
	return out
}
