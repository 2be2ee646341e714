package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The better-auth organization face: /api/auth/organization/*. Organization create and update
// go through the shared core of organizations.go; invitations, members and dynamic roles live
// in authapi_invitations.go, authapi_members.go and authapi_roles.go. The authorize stage does not look at organizations on /api/auth, so every handler
// resolves its organization with callerOrganization, which hides organizations the caller is
// not a member of (404), and checks the permission it needs through the caller's fixed roles.
//
// Members hold one role or several comma-joined: fixed roles (roles.go) or the organization's
// dynamic roles (at most store.MaxOrgRoles). Dynamic roles grant only what has-permission
// reports; /api/v1 and the member-management rules here only honour fixed roles.

// invitationTTL is how long an invitation (or a resent one) stays acceptable.
const invitationTTL = 48 * time.Hour

// defaultMembersLimit is how many members get-full-organization and list-members return
// when the caller names no limit (better-auth's default membership limit).
const defaultMembersLimit = 100

// Organization errors, with better-auth's codes where it has one.
var (
	errNoActiveOrganization = authError(http.StatusBadRequest, kindClientError, "NO_ACTIVE_ORGANIZATION", "No active organization")
	errOrganizationNotFound = authError(http.StatusNotFound, kindNotFound, "ORGANIZATION_NOT_FOUND", "Organization not found")
	errMemberNotFound       = authError(http.StatusNotFound, kindNotFound, "MEMBER_NOT_FOUND", "Member not found")
	errInvitationNotFound   = authError(http.StatusBadRequest, kindClientError, "INVITATION_NOT_FOUND", "Invitation not found")
	errNotRecipient         = authError(http.StatusForbidden, kindForbidden, "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION", "You are not the recipient of the invitation")
	errAlreadyMember        = authError(http.StatusBadRequest, kindClientError, "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION", "User is already a member of this organization")
	errAlreadyInvited       = authError(http.StatusConflict, kindConflict, "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION", "User is already invited to this organization")
	errRoleNotFound         = authError(http.StatusBadRequest, kindClientError, "ROLE_NOT_FOUND", "Role not found")
	errOrgRoleNotFound      = authError(http.StatusNotFound, kindNotFound, "ROLE_NOT_FOUND", "Role not found")
	errOnlyOwner            = authError(http.StatusBadRequest, kindClientError, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER", "You cannot leave the organization as the only owner")
	errWithoutOwner         = authError(http.StatusBadRequest, kindClientError, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_WITHOUT_AN_OWNER", "You cannot leave the organization without an owner")
	errTooManyRoles         = authError(http.StatusBadRequest, kindClientError, "TOO_MANY_ROLES", "An organization may define at most 25 roles")
	errRoleNameTaken        = authError(http.StatusConflict, kindConflict, "ROLE_NAME_IS_ALREADY_TAKEN", "That role name is already taken")
	errRoleNameReserved     = authError(http.StatusBadRequest, kindClientError, "ROLE_NAME_IS_ALREADY_TAKEN", "That role name is reserved for a fixed role")
	errRoleAssigned         = authError(http.StatusBadRequest, kindClientError, "ROLE_IS_ASSIGNED_TO_MEMBERS", "Cannot delete a role that is assigned to members; reassign them first")
	errCannotUpdateFixed    = authError(http.StatusBadRequest, kindClientError, "CANNOT_UPDATE_A_PRE_DEFINED_ROLE", "Cannot update a pre-defined role")
	errCannotDeleteFixed    = authError(http.StatusBadRequest, kindClientError, "CANNOT_DELETE_A_PRE_DEFINED_ROLE", "Cannot delete a pre-defined role")

	errCannotUpdateOrg    = forbidden("YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_ORGANIZATION", "You are not allowed to update this organization")
	errCannotInvite       = forbidden("YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION", "You are not allowed to invite users to this organization")
	errCannotInviteRole   = forbidden("YOU_ARE_NOT_ALLOWED_TO_INVITE_USER_WITH_THIS_ROLE", "You are not allowed to invite a user with this role")
	errCannotCancel       = forbidden("YOU_ARE_NOT_ALLOWED_TO_CANCEL_THIS_INVITATION", "You are not allowed to cancel this invitation")
	errCannotUpdateMember = forbidden("YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER", "You are not allowed to update this member")
	errCannotDeleteMember = forbidden("YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER", "You are not allowed to delete this member")
	errCannotCreateRole   = forbidden("YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE", "You are not allowed to create a role")
	errCannotUpdateRole   = forbidden("YOU_ARE_NOT_ALLOWED_TO_UPDATE_A_ROLE", "You are not allowed to update a role")
	errCannotDeleteRole   = forbidden("YOU_ARE_NOT_ALLOWED_TO_DELETE_A_ROLE", "You are not allowed to delete a role")
)

func forbidden(code, message string) *Error {
	return authError(http.StatusForbidden, kindForbidden, code, message)
}

// orgMembership is an organization an /api/auth/organization call addresses, with the
// caller's membership of it.
type orgMembership struct {
	org    store.Organization
	member store.Member
}

// can reports whether the caller's fixed roles grant perm.
func (om orgMembership) can(perm string) bool { return roleGrants(om.member.Role, perm) }

// isOwner reports whether the caller is an owner.
func (om orgMembership) isOwner() bool { return hasRole(om.member.Role, RoleOwner) }

// callerOrganization resolves the organization a call addresses: id when given, else slug,
// else the session's active organization (none: 400 NO_ACTIVE_ORGANIZATION). An unknown or
// archived organization, or one the caller is not a member of, is 404 ORGANIZATION_NOT_FOUND
// alike, so that non-members learn nothing.
func (s *Server) callerOrganization(ctx context.Context, id, slug *string) (orgMembership, error) {
	p := PrincipalFrom(ctx)
	var org store.Organization
	var err error
	switch {
	case id != nil && *id != "":
		org, err = s.store.Organization(ctx, *id)
	case slug != nil && *slug != "":
		org, err = s.store.OrganizationBySlug(ctx, *slug)
	case p.Session.ActiveOrganizationID != nil:
		org, err = s.store.Organization(ctx, *p.Session.ActiveOrganizationID)
	default:
		return orgMembership{}, errNoActiveOrganization
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && org.ArchivedAt != nil) {
		return orgMembership{}, errOrganizationNotFound
	}
	if err != nil {
		return orgMembership{}, err
	}
	m, err := s.store.Member(ctx, org.ID, p.ID())
	if errors.Is(err, store.ErrNotFound) {
		return orgMembership{}, errOrganizationNotFound
	}
	if err != nil {
		return orgMembership{}, err
	}
	return orgMembership{org: org, member: m}, nil
}

// ---- Organizations ----

// AuthCreateOrganization creates an organization owned by the caller (through the shared
// core) and, unless keepCurrentActiveOrganization, makes it the session's active one.
func (s *Server) AuthCreateOrganization(ctx context.Context, req gen.AuthCreateOrganizationRequestObject) (gen.AuthCreateOrganizationResponseObject, error) {
	b := req.Body
	o := store.Organization{Name: b.Name, Slug: b.Slug}
	if logo, err := b.Logo.Get(); err == nil {
		o.Logo = &logo
	}
	if md, err := b.Metadata.Get(); err == nil {
		o.Metadata = md
	}
	org, owner, err := s.createOrganization(ctx, o)
	if err != nil {
		return nil, err
	}
	if b.KeepCurrentActiveOrganization == nil || !*b.KeepCurrentActiveOrganization {
		if err := s.setActiveOrganization(ctx, &org.ID); err != nil {
			return nil, err
		}
	}
	a := authOrganizationJSON(org)
	return gen.AuthCreateOrganization200JSONResponse{
		Id: a.Id, Name: a.Name, Slug: a.Slug, Logo: a.Logo, Metadata: a.Metadata, CreatedAt: a.CreatedAt,
		Members: []gen.AuthMember{authMemberJSON(owner)},
	}, nil
}

// AuthCheckOrganizationSlug answers {status: true} for a free slug and 409
// ORGANIZATION_SLUG_ALREADY_TAKEN for one in use, archived organizations included.
func (s *Server) AuthCheckOrganizationSlug(ctx context.Context, req gen.AuthCheckOrganizationSlugRequestObject) (gen.AuthCheckOrganizationSlugResponseObject, error) {
	taken, err := s.store.SlugTaken(ctx, req.Body.Slug)
	if err != nil {
		return nil, err
	}
	if taken {
		return nil, errOrgSlugTaken
	}
	return gen.AuthCheckOrganizationSlug200JSONResponse{Status: true}, nil
}

// AuthListOrganizations lists the active organizations the caller is a member of.
func (s *Server) AuthListOrganizations(ctx context.Context, _ gen.AuthListOrganizationsRequestObject) (gen.AuthListOrganizationsResponseObject, error) {
	orgs, err := s.store.ListUserOrganizations(ctx, PrincipalFrom(ctx).ID(), store.StateActive)
	if err != nil {
		return nil, err
	}
	out := make(gen.AuthListOrganizations200JSONResponse, len(orgs))
	for i, o := range orgs {
		out[i] = authOrganizationJSON(o.Organization)
	}
	return out, nil
}

// AuthSetActiveOrganization sets the session's active organization and returns it in full.
// organizationId null clears it (the answer is null); naming nothing answers the current one
// (or null).
func (s *Server) AuthSetActiveOrganization(ctx context.Context, req gen.AuthSetActiveOrganizationRequestObject) (gen.AuthSetActiveOrganizationResponseObject, error) {
	b := req.Body
	if b.OrganizationId.IsNull() {
		if err := s.setActiveOrganization(ctx, nil); err != nil {
			return nil, err
		}
		return jsonNull{}, nil
	}
	id, _ := b.OrganizationId.Get()
	named := id != "" || (b.OrganizationSlug != nil && *b.OrganizationSlug != "")
	if !named && PrincipalFrom(ctx).Session.ActiveOrganizationID == nil {
		return jsonNull{}, nil
	}
	om, err := s.callerOrganization(ctx, &id, b.OrganizationSlug)
	if err != nil {
		return nil, err
	}
	if err := s.setActiveOrganization(ctx, &om.org.ID); err != nil {
		return nil, err
	}
	full, err := s.fullOrganization(ctx, om.org, defaultMembersLimit)
	if err != nil {
		return nil, err
	}
	return gen.AuthSetActiveOrganization200JSONResponse(full), nil
}

// AuthGetFullOrganization returns the named organization, else the active one, with its
// members (at most membersLimit) and pending invitations; null when none is named or active.
func (s *Server) AuthGetFullOrganization(ctx context.Context, req gen.AuthGetFullOrganizationRequestObject) (gen.AuthGetFullOrganizationResponseObject, error) {
	q := req.Params
	named := (q.OrganizationId != nil && *q.OrganizationId != "") || (q.OrganizationSlug != nil && *q.OrganizationSlug != "")
	if !named && PrincipalFrom(ctx).Session.ActiveOrganizationID == nil {
		return jsonNull{}, nil
	}
	om, err := s.callerOrganization(ctx, q.OrganizationId, q.OrganizationSlug)
	if err != nil {
		return nil, err
	}
	limit := defaultMembersLimit
	if q.MembersLimit != nil {
		limit = *q.MembersLimit
	}
	full, err := s.fullOrganization(ctx, om.org, limit)
	if err != nil {
		return nil, err
	}
	return gen.AuthGetFullOrganization200JSONResponse(full), nil
}

// AuthUpdateOrganization changes the organization's name, slug, logo or metadata (through the
// shared core). It needs organization:update.
func (s *Server) AuthUpdateOrganization(ctx context.Context, req gen.AuthUpdateOrganizationRequestObject) (gen.AuthUpdateOrganizationResponseObject, error) {
	om, err := s.callerOrganization(ctx, req.Body.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermOrganizationUpdate) {
		return nil, errCannotUpdateOrg
	}
	d := req.Body.Data
	u := store.OrganizationUpdate{Name: d.Name, Slug: d.Slug}
	if d.Logo.IsSpecified() {
		logo, _ := d.Logo.Get() // null removes the logo: ""
		u.Logo = &logo
	}
	if d.Metadata.IsSpecified() {
		md, _ := d.Metadata.Get() // null removes the metadata: nil
		u.Metadata = &md
	}
	org, err := s.updateOrganization(ctx, om.org.ID, u)
	if err != nil {
		return nil, err
	}
	return gen.AuthUpdateOrganization200JSONResponse(authOrganizationJSON(org)), nil
}

// setActiveOrganization sets (or, with nil, clears) the caller's session's active organization.
func (s *Server) setActiveOrganization(ctx context.Context, orgID *string) error {
	sessionID := PrincipalFrom(ctx).Session.ID
	return s.store.InTx(ctx, func(tx *store.Tx) error {
		return tx.SetActiveOrganization(ctx, sessionID, orgID)
	})
}

// fullOrganization is org with its first membersLimit members (oldest first) and its pending,
// unexpired invitations.
func (s *Server) fullOrganization(ctx context.Context, org store.Organization, membersLimit int) (gen.AuthFullOrganization, error) {
	members, _, err := s.store.ListMembers(ctx, org.ID, store.MemberPage{Limit: membersLimit})
	if err != nil {
		return gen.AuthFullOrganization{}, err
	}
	invitations, err := s.store.ListInvitations(ctx, org.ID)
	if err != nil {
		return gen.AuthFullOrganization{}, err
	}
	now := s.store.Now()
	a := authOrganizationJSON(org)
	full := gen.AuthFullOrganization{
		Id: a.Id, Name: a.Name, Slug: a.Slug, Logo: a.Logo, Metadata: a.Metadata, CreatedAt: a.CreatedAt,
		Members:     make([]gen.AuthMemberWithUser, len(members)),
		Invitations: []gen.AuthInvitation{},
	}
	for i, m := range members {
		full.Members[i] = authMemberWithUserJSON(m)
	}
	for _, inv := range invitations {
		if inv.Status == store.InvitationPending && inv.ExpiresAt.After(now) {
			full.Invitations = append(full.Invitations, authInvitationJSON(inv))
		}
	}
	return full, nil
}

// ---- Wire forms ----

func authOrganizationJSON(o store.Organization) gen.AuthOrganization {
	md := nullable.NewNullNullable[map[string]any]()
	if len(o.Metadata) > 0 {
		md = nullable.NewNullableWithValue(o.Metadata)
	}
	return gen.AuthOrganization{Id: o.ID, Name: o.Name, Slug: o.Slug, Logo: nullableOf(o.Logo), Metadata: md, CreatedAt: o.CreatedAt}
}

func authMemberJSON(m store.Member) gen.AuthMember {
	return gen.AuthMember{Id: m.ID, OrganizationId: m.OrganizationID, UserId: m.UserID, Role: m.Role, CreatedAt: m.CreatedAt}
}

func authMemberWithUserJSON(m store.MemberWithUser) gen.AuthMemberWithUser {
	return gen.AuthMemberWithUser{
		Id: m.ID, OrganizationId: m.OrganizationID, UserId: m.UserID, Role: m.Role, CreatedAt: m.CreatedAt,
		User: gen.AuthMemberUser{Id: m.UserID, Name: m.UserName, Email: m.UserEmail, Image: nullableOf(m.UserImage)},
	}
}

func authInvitationJSON(i store.Invitation) gen.AuthInvitation {
	return gen.AuthInvitation{
		Id: i.ID, OrganizationId: i.OrganizationID, Email: i.Email, Role: i.Role,
		Status: gen.AuthInvitationStatus(i.Status), InviterId: i.InviterID, ExpiresAt: i.ExpiresAt, CreatedAt: i.CreatedAt,
	}
}

func authRoleJSON(r store.OrgRole) gen.AuthRole {
	return gen.AuthRole{Id: r.ID, OrganizationId: r.OrganizationID, Role: r.Role, Permission: r.Permission,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}
