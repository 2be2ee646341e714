package server

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ---- Members ----

// AuthListMembers returns a page of the organization's members with their users, and how
// many match the filter. Any member may list them.
func (s *Server) AuthListMembers(ctx context.Context, req gen.AuthListMembersRequestObject) (gen.AuthListMembersResponseObject, error) {
	q := req.Params
	om, err := s.callerOrganization(ctx, q.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	page := store.MemberPage{Limit: defaultMembersLimit}
	if q.Limit != nil {
		page.Limit = *q.Limit
	}
	if q.Offset != nil {
		page.Offset = *q.Offset
	}
	if q.SortBy != nil {
		page.SortBy = string(*q.SortBy)
	}
	page.SortDesc = q.SortDirection != nil && *q.SortDirection == "desc"
	if q.FilterField != nil {
		page.FilterField = string(*q.FilterField)
		if q.FilterValue != nil {
			page.FilterValue = *q.FilterValue
		}
		if q.FilterOperator != nil {
			page.FilterOperator = string(*q.FilterOperator)
		}
	}
	members, total, err := s.store.ListMembers(ctx, om.org.ID, page)
	if err != nil {
		return nil, err
	}
	out := gen.AuthListMembers200JSONResponse{Members: make([]gen.AuthMemberWithUser, len(members)), Total: total}
	for i, m := range members {
		out.Members[i] = authMemberWithUserJSON(m)
	}
	return out, nil
}

// AuthUpdateMemberRole replaces a member's roles. It needs member:manage; only an owner may
// grant owner or change an owner's roles, and the last owner cannot be demoted (400
// YOU_CANNOT_LEAVE_THE_ORGANIZATION_WITHOUT_AN_OWNER). The checks run on the member as the
// transaction sees it, with the organization locked.
func (s *Server) AuthUpdateMemberRole(ctx context.Context, req gen.AuthUpdateMemberRoleRequestObject) (gen.AuthUpdateMemberRoleResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotUpdateMember
	}
	roles, err := roleInput(b.Role)
	if err != nil {
		return nil, err
	}
	var updated store.Member
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		owners, err := tx.CountOwners(ctx, om.org.ID)
		if err != nil {
			return err
		}
		target, err := tx.MemberByID(ctx, om.org.ID, b.MemberId)
		if errors.Is(err, store.ErrNotFound) {
			return errMemberNotFound
		} else if err != nil {
			return err
		}
		if err := checkRoles(roles, txRoleExists(ctx, tx, om.org.ID)); err != nil {
			return err
		}
		wasOwner, staysOwner := hasRole(target.Role, RoleOwner), slices.Contains(roles, RoleOwner)
		switch {
		case (wasOwner || staysOwner) && !om.isOwner():
			return errCannotUpdateMember
		case wasOwner && !staysOwner && owners <= 1:
			return errWithoutOwner
		}
		if updated, err = tx.UpdateMemberRole(ctx, target.ID, strings.Join(roles, ",")); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "member.update_role", TargetType: "member", TargetID: target.ID,
			OrganizationID: om.org.ID, Metadata: map[string]any{"userId": target.UserID, "from": target.Role, "to": updated.Role}})
	})
	if err != nil {
		return nil, err
	}
	return gen.AuthUpdateMemberRole200JSONResponse(authMemberJSON(updated)), nil
}

// AuthRemoveMember removes a member named by member id or, failing that, email. It needs
// member:manage; only an owner may remove an owner, and never the last one (400
// YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER).
func (s *Server) AuthRemoveMember(ctx context.Context, req gen.AuthRemoveMemberRequestObject) (gen.AuthRemoveMemberResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotDeleteMember
	}
	target, err := s.store.MemberByID(ctx, om.org.ID, b.MemberIdOrEmail)
	if errors.Is(err, store.ErrNotFound) && strings.Contains(b.MemberIdOrEmail, "@") {
		target, err = s.store.MemberByEmail(ctx, om.org.ID, b.MemberIdOrEmail)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, errMemberNotFound
	}
	if err != nil {
		return nil, err
	}
	removed, err := s.removeMember(ctx, om, target.ID, "member.remove", func(m store.Member) error {
		if hasRole(m.Role, RoleOwner) && !om.isOwner() {
			return errCannotDeleteMember
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gen.AuthRemoveMember200JSONResponse{Member: authMemberJSON(removed)}, nil
}

// AuthLeaveOrganization ends the caller's own membership; the last owner cannot leave.
func (s *Server) AuthLeaveOrganization(ctx context.Context, req gen.AuthLeaveOrganizationRequestObject) (gen.AuthLeaveOrganizationResponseObject, error) {
	om, err := s.callerOrganization(ctx, &req.Body.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	left, err := s.removeMember(ctx, om, om.member.ID, "member.leave", nil)
	if err != nil {
		return nil, err
	}
	return gen.AuthLeaveOrganization200JSONResponse(authMemberJSON(left)), nil
}

// removeMember deletes member memberID of om's organization in one transaction: with the
// organization locked it re-reads the member, applies check (may be nil), refuses to remove
// the last owner, clears the organization as the active one of every session of the removed
// user, and audits action.
func (s *Server) removeMember(ctx context.Context, om orgMembership, memberID, action string, check func(store.Member) error) (store.Member, error) {
	var target store.Member
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		owners, err := tx.CountOwners(ctx, om.org.ID)
		if err != nil {
			return err
		}
		if target, err = tx.MemberByID(ctx, om.org.ID, memberID); errors.Is(err, store.ErrNotFound) {
			return errMemberNotFound
		} else if err != nil {
			return err
		}
		if check != nil {
			if err := check(target); err != nil {
				return err
			}
		}
		if hasRole(target.Role, RoleOwner) && owners <= 1 {
			return errOnlyOwner
		}
		if err := tx.RemoveMember(ctx, target.ID); err != nil {
			return err
		}
		// None of the former member's sessions may keep the organization active.
		if err := tx.ClearUserActiveOrganization(ctx, target.UserID, om.org.ID); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: action, TargetType: "member", TargetID: target.ID,
			OrganizationID: om.org.ID, Metadata: map[string]any{"userId": target.UserID, "role": target.Role}})
	})
	return target, err
}

// ---- Permissions ----

// AuthHasPermission reports whether the caller's roles in the organization grant every
// requested resource:action pair (permissions, or the deprecated permission). Fixed roles grant
// their control-plane permissions split at the colon, member:manage also grants
// member:create/update/delete and invitation:create/cancel; dynamic roles grant their statements.
func (s *Server) AuthHasPermission(ctx context.Context, req gen.AuthHasPermissionRequestObject) (gen.AuthHasPermissionResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	asked := b.Permissions
	if asked == nil {
		asked = b.Permission
	}
	pairs := 0
	if asked != nil {
		for _, actions := range *asked {
			pairs += len(actions)
		}
	}
	if pairs == 0 {
		return nil, Validation(FieldError{Path: []string{"body", "permissions"}, Message: "must name at least one action"})
	}
	granted, err := s.grantedActions(ctx, om)
	if err != nil {
		return nil, err
	}
	allowed := true
	for resource, actions := range *asked {
		for _, action := range actions {
			allowed = allowed && granted[resource][action]
		}
	}
	return gen.AuthHasPermission200JSONResponse{Error: nullable.NewNullNullable[any](), Success: allowed}, nil
}

// grantedActions is what the caller's roles in om grant, as resource → action → true.
func (s *Server) grantedActions(ctx context.Context, om orgMembership) (map[string]map[string]bool, error) {
	granted := map[string]map[string]bool{}
	grant := func(resource string, actions ...string) {
		if granted[resource] == nil {
			granted[resource] = map[string]bool{}
		}
		for _, a := range actions {
			granted[resource][a] = true
		}
	}
	var dynamic []string
	for _, role := range splitRoles(om.member.Role) {
		perms, fixed := rolePermissions[role]
		if !fixed {
			dynamic = append(dynamic, role)
			continue
		}
		for perm := range perms {
			resource, action, _ := strings.Cut(perm, ":")
			grant(resource, action)
		}
		if perms[PermMemberManage] {
			grant("member", "create", "update", "delete")
			grant("invitation", "create", "cancel")
		}
	}
	if len(dynamic) == 0 {
		return granted, nil
	}
	roles, err := s.store.ListOrgRoles(ctx, om.org.ID)
	if err != nil {
		return nil, err
	}
	for _, r := range roles {
		if slices.Contains(dynamic, r.Role) {
			for resource, actions := range r.Permission {
				grant(resource, actions...)
			}
		}
	}
	return granted, nil
}
