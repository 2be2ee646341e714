package server

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ---- Dynamic roles ----

// AuthCreateRole defines a dynamic role. It needs member:manage. Fixed role names are
// reserved (400); the organization's 26th role is 400 TOO_MANY_ROLES; a duplicate name 409.
func (s *Server) AuthCreateRole(ctx context.Context, req gen.AuthCreateRoleRequestObject) (gen.AuthCreateRoleResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotCreateRole
	}
	if IsFixedRole(b.Role) {
		return nil, errRoleNameReserved
	}
	r := store.OrgRole{OrganizationID: om.org.ID, Role: b.Role, Permission: b.Permission}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		switch err := tx.CreateOrgRole(ctx, &r); {
		case errors.Is(err, store.ErrLimit):
			return errTooManyRoles
		case errors.Is(err, store.ErrConflict):
			return errRoleNameTaken
		case err != nil:
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "org_role.create", TargetType: "org_role", TargetID: r.ID,
			OrganizationID: om.org.ID, Metadata: map[string]any{"role": r.Role, "permission": r.Permission}})
	})
	if err != nil {
		return nil, err
	}
	return gen.AuthCreateRole200JSONResponse{Success: true, RoleData: authRoleJSON(r), Statements: r.Permission}, nil
}

// AuthListRoles lists the organization's dynamic roles, oldest first. Any member may list them.
func (s *Server) AuthListRoles(ctx context.Context, req gen.AuthListRolesRequestObject) (gen.AuthListRolesResponseObject, error) {
	om, err := s.callerOrganization(ctx, req.Params.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	roles, err := s.store.ListOrgRoles(ctx, om.org.ID)
	if err != nil {
		return nil, err
	}
	out := make(gen.AuthListRoles200JSONResponse, len(roles))
	for i, r := range roles {
		out[i] = authRoleJSON(r)
	}
	return out, nil
}

// AuthGetRole returns one dynamic role by roleId or roleName (404 ROLE_NOT_FOUND).
func (s *Server) AuthGetRole(ctx context.Context, req gen.AuthGetRoleRequestObject) (gen.AuthGetRoleResponseObject, error) {
	q := req.Params
	om, err := s.callerOrganization(ctx, q.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	ref, err := newRoleRef(q.RoleId, q.RoleName, "query")
	if err != nil {
		return nil, err
	}
	r, err := s.store.OrgRole(ctx, om.org.ID, ref.key())
	if err != nil || !ref.matches(r) {
		return nil, orgRoleLookupError(err)
	}
	return gen.AuthGetRole200JSONResponse(authRoleJSON(r)), nil
}

// AuthUpdateRole renames a dynamic role and/or replaces its permission. It needs
// member:manage. A rename also renames the role in the role lists of the members and pending
// invitations that hold it, in the same transaction; fixed role names are reserved.
func (s *Server) AuthUpdateRole(ctx context.Context, req gen.AuthUpdateRoleRequestObject) (gen.AuthUpdateRoleResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotUpdateRole
	}
	ref, err := newRoleRef(b.RoleId, b.RoleName, "body")
	if err != nil {
		return nil, err
	}
	if ref.name != "" && IsFixedRole(ref.name) {
		return nil, errCannotUpdateFixed
	}
	newName := b.Data.RoleName
	if newName != nil && IsFixedRole(*newName) {
		return nil, errRoleNameReserved
	}
	var permission map[string][]string
	if b.Data.Permission != nil {
		permission = *b.Data.Permission
	}
	var updated store.OrgRole
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.LockOrganization(ctx, om.org.ID); err != nil {
			return err
		}
		current, err := tx.OrgRole(ctx, om.org.ID, ref.key())
		if err != nil || !ref.matches(current) {
			return orgRoleLookupError(err)
		}
		if updated, err = tx.UpdateOrgRole(ctx, om.org.ID, current.ID, newName, permission); errors.Is(err, store.ErrConflict) {
			return errRoleNameTaken
		} else if err != nil {
			return err
		}
		md := changedFields(map[string]bool{"name": newName != nil, "permissions": permission != nil})
		md["role"] = updated.Role
		if updated.Role != current.Role {
			n, err := tx.RenameRoleHolders(ctx, om.org.ID, current.Role, updated.Role)
			if err != nil {
				return err
			}
			md["renamedFrom"], md["membersRenamed"] = current.Role, n
		}
		return audit(ctx, tx, auditEvent{Action: "org_role.update", TargetType: "org_role", TargetID: updated.ID,
			OrganizationID: om.org.ID, Metadata: md})
	})
	if err != nil {
		return nil, err
	}
	return gen.AuthUpdateRole200JSONResponse{Success: true, RoleData: authRoleJSON(updated)}, nil
}

// AuthDeleteRole deletes a dynamic role. It needs member:manage, and is refused with 400
// ROLE_IS_ASSIGNED_TO_MEMBERS while a member holds the role.
func (s *Server) AuthDeleteRole(ctx context.Context, req gen.AuthDeleteRoleRequestObject) (gen.AuthDeleteRoleResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotDeleteRole
	}
	ref, err := newRoleRef(b.RoleId, b.RoleName, "body")
	if err != nil {
		return nil, err
	}
	if ref.name != "" && IsFixedRole(ref.name) {
		return nil, errCannotDeleteFixed
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.LockOrganization(ctx, om.org.ID); err != nil {
			return err
		}
		r, err := tx.OrgRole(ctx, om.org.ID, ref.key())
		if err != nil || !ref.matches(r) {
			return orgRoleLookupError(err)
		}
		holders, err := tx.CountRoleHolders(ctx, om.org.ID, r.Role)
		if err != nil {
			return err
		}
		if holders > 0 {
			return errRoleAssigned
		}
		if err := tx.DeleteOrgRole(ctx, om.org.ID, r.ID); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "org_role.delete", TargetType: "org_role", TargetID: r.ID,
			OrganizationID: om.org.ID, Metadata: map[string]any{"role": r.Role}})
	})
	if err != nil {
		return nil, err
	}
	return gen.AuthDeleteRole200JSONResponse{Success: true}, nil
}

// roleRef names a dynamic role by id or by name, as get-, update- and delete-role take it.
type roleRef struct{ id, name string }

// newRoleRef prefers roleId; naming neither is a validation error under in (body or query).
func newRoleRef(id, name *string, in string) (roleRef, error) {
	switch {
	case id != nil && *id != "":
		return roleRef{id: *id}, nil
	case name != nil && *name != "":
		return roleRef{name: *name}, nil
	}
	return roleRef{}, Validation(FieldError{Path: []string{in, "roleName"}, Message: "roleName or roleId is required"})
}

func (r roleRef) key() string {
	if r.id != "" {
		return r.id
	}
	return r.name
}

// matches reports whether role is the one r names: the store looks a key up as an id first,
// then as a name, so a name that happens to be another role's id must not pass.
func (r roleRef) matches(role store.OrgRole) bool {
	if r.id != "" {
		return role.ID == r.id
	}
	return role.Role == r.name
}

// orgRoleLookupError maps a failed or mismatched role lookup to 404 ROLE_NOT_FOUND.
func orgRoleLookupError(err error) error {
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return errOrgRoleNotFound
	}
	return err
}

// ---- Role lists ----

// roleInput returns the role names of a role input (one name, or an array), without
// duplicates, in the given order.
func roleInput(in gen.AuthRoleInput) ([]string, error) {
	if name, err := in.AsAuthRoleName(); err == nil {
		return splitRoles(name), nil
	}
	names, err := in.AsAuthRoleInput1()
	if err != nil {
		return nil, Validation(FieldError{Path: []string{"body", "role"}, Message: "must be a role name or an array of role names"})
	}
	return splitRoles(strings.Join(names, ",")), nil
}

// splitRoles returns the roles of a comma-joined list, trimmed, without empties or duplicates.
func splitRoles(list string) []string {
	var out []string
	for r := range store.RoleNames(list) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// hasRole reports whether a comma-joined role list holds role.
func hasRole(list, role string) bool {
	for r := range store.RoleNames(list) {
		if r == role {
			return true
		}
	}
	return false
}

// checkRoles refuses (400 ROLE_NOT_FOUND) an empty list or one holding a role that is neither
// fixed nor, according to exists, one of the organization's dynamic roles.
func checkRoles(roles []string, exists func(name string) (bool, error)) error {
	if len(roles) == 0 {
		return errRoleNotFound
	}
	for _, r := range roles {
		if IsFixedRole(r) {
			continue
		}
		ok, err := exists(r)
		if err != nil {
			return err
		}
		if !ok {
			return errRoleNotFound
		}
	}
	return nil
}

// storeRoleExists looks dynamic roles of orgID up outside a transaction.
func (s *Server) storeRoleExists(ctx context.Context, orgID string) func(string) (bool, error) {
	return func(name string) (bool, error) {
		r, err := s.store.OrgRole(ctx, orgID, name)
		return roleNamed(r, err, name)
	}
}

// txRoleExists looks dynamic roles of orgID up inside tx.
func txRoleExists(ctx context.Context, tx *store.Tx, orgID string) func(string) (bool, error) {
	return func(name string) (bool, error) {
		r, err := tx.OrgRole(ctx, orgID, name)
		return roleNamed(r, err, name)
	}
}

// roleNamed interprets an OrgRole lookup of name: found only when the role has that name (the
// store also matches ids).
func roleNamed(r store.OrgRole, err error, name string) (bool, error) {
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && r.Role == name, err
}
