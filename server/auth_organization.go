package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The better-auth organization face: /api/auth/organization/*. Organization create and update
// go through the shared core of organizations.go; members, invitations and dynamic roles live
// here. The authorize stage does not look at organizations on /api/auth, so every handler
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

// ---- Invitations ----

// AuthInviteMember invites an email address with one or several roles and hands the accept
// link to the Mailer. It needs member:manage; only an owner may invite an owner. A member's
// email is 400, a pending invitation 409 unless resend, which extends that invitation's expiry
// (keeping its role) and sends it again.
func (s *Server) AuthInviteMember(ctx context.Context, req gen.AuthInviteMemberRequestObject) (gen.AuthInviteMemberResponseObject, error) {
	b := req.Body
	om, err := s.callerOrganization(ctx, b.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotInvite
	}
	roles, err := roleInput(b.Role)
	if err != nil {
		return nil, err
	}
	if err := checkRoles(roles, s.storeRoleExists(ctx, om.org.ID)); err != nil {
		return nil, err
	}
	if slices.Contains(roles, RoleOwner) && !om.isOwner() {
		return nil, errCannotInviteRole
	}
	email := store.NormalizeEmail(string(b.Email))
	if _, err := s.store.MemberByEmail(ctx, om.org.ID, email); err == nil {
		return nil, errAlreadyMember
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	resend := b.Resend != nil && *b.Resend
	p := PrincipalFrom(ctx)
	expires := s.store.Now().Add(invitationTTL)
	var inv store.Invitation
	invite := func(tx *store.Tx) error {
		// The check runs in the transaction; the store's one-pending-invitation rule stops a
		// concurrent inviter that passed it too (ErrConflict, retried below).
		pending, err := tx.PendingInvitation(ctx, om.org.ID, email)
		refresh := err == nil
		switch {
		case refresh && !resend:
			return errAlreadyInvited
		case refresh:
			if inv, err = tx.RefreshInvitation(ctx, pending.ID, expires); errors.Is(err, store.ErrNotFound) {
				// Accepted, rejected or canceled meanwhile.
				return errInvitationNotFound
			} else if err != nil {
				return err
			}
		case errors.Is(err, store.ErrNotFound):
			inv = store.Invitation{OrganizationID: om.org.ID, Email: email, Role: strings.Join(roles, ","), InviterID: p.ID(), ExpiresAt: expires}
			if err := tx.CreateInvitation(ctx, &inv); err != nil {
				return err
			}
		default:
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "member.invite", TargetType: "invitation", TargetID: inv.ID,
			OrganizationID: om.org.ID, Metadata: map[string]any{"email": inv.Email, "role": inv.Role, "resend": refresh}})
	}
	// A transaction that lost the race to a concurrent inviter runs once more: it then sees the
	// winner's invitation and answers as a sequential duplicate would.
	if err = s.store.InTx(ctx, invite); errors.Is(err, store.ErrConflict) {
		err = s.store.InTx(ctx, invite)
	}
	if errors.Is(err, store.ErrConflict) {
		err = errAlreadyInvited
	}
	if err != nil {
		return nil, err
	}
	msg := Invitation{
		ID: inv.ID, Email: inv.Email, Role: inv.Role, ExpiresAt: inv.ExpiresAt,
		OrganizationID: om.org.ID, OrganizationName: om.org.Name, OrganizationSlug: om.org.Slug,
		InviterID: p.ID(), InviterName: p.User.Name, InviterEmail: p.User.Email,
	}
	if err := s.mailer.SendInvitation(ctx, msg, s.invitationAcceptURL(inv.ID)); err != nil {
		return nil, err
	}
	return gen.AuthInviteMember200JSONResponse(authInvitationJSON(inv)), nil
}

// AuthAcceptInvitation makes the signed-in recipient of a pending, unexpired invitation a
// member with the invited role and makes the organization active.
func (s *Server) AuthAcceptInvitation(ctx context.Context, req gen.AuthAcceptInvitationRequestObject) (gen.AuthAcceptInvitationResponseObject, error) {
	inv, err := s.recipientInvitation(ctx, req.Body.InvitationId)
	if err != nil {
		return nil, err
	}
	p := PrincipalFrom(ctx)
	var member store.Member
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		// Organization first, then the invitation: the order update-role's rename takes them in.
		if err := tx.LockOrganization(ctx, inv.OrganizationID); err != nil {
			return err
		}
		var err error
		if inv, err = tx.SetInvitationStatus(ctx, inv.ID, store.InvitationAccepted); errors.Is(err, store.ErrNotFound) {
			return errInvitationNotFound
		} else if err != nil {
			return err
		}
		// A dynamic role deleted since the invitation was sent cannot be granted.
		if err := checkRoles(splitRoles(inv.Role), txRoleExists(ctx, tx, inv.OrganizationID)); err != nil {
			return err
		}
		if member, err = tx.AddMember(ctx, inv.OrganizationID, p.ID(), inv.Role); errors.Is(err, store.ErrConflict) {
			return errAlreadyMember
		} else if err != nil {
			return err
		}
		if err := tx.SetActiveOrganization(ctx, p.Session.ID, &inv.OrganizationID); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "invitation.accept", TargetType: "invitation", TargetID: inv.ID,
			OrganizationID: inv.OrganizationID, Metadata: map[string]any{"memberId": member.ID, "role": member.Role}})
	})
	if err != nil {
		return nil, err
	}
	return gen.AuthAcceptInvitation200JSONResponse{Invitation: authInvitationJSON(inv), Member: authMemberJSON(member)}, nil
}

// AuthRejectInvitation lets the signed-in recipient decline a pending, unexpired invitation.
func (s *Server) AuthRejectInvitation(ctx context.Context, req gen.AuthRejectInvitationRequestObject) (gen.AuthRejectInvitationResponseObject, error) {
	inv, err := s.recipientInvitation(ctx, req.Body.InvitationId)
	if err != nil {
		return nil, err
	}
	inv, err = s.setInvitationStatus(ctx, inv, store.InvitationRejected, "invitation.reject")
	if err != nil {
		return nil, err
	}
	return gen.AuthRejectInvitation200JSONResponse{Invitation: authInvitationJSON(inv), Member: nullable.NewNullNullable[any]()}, nil
}

// AuthCancelInvitation withdraws a pending invitation. It needs member:manage in the
// invitation's organization; to anyone who is not a member there the invitation does not exist.
func (s *Server) AuthCancelInvitation(ctx context.Context, req gen.AuthCancelInvitationRequestObject) (gen.AuthCancelInvitationResponseObject, error) {
	inv, err := s.store.Invitation(ctx, req.Body.InvitationId)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errInvitationNotFound
	}
	if err != nil {
		return nil, err
	}
	om, err := s.callerOrganization(ctx, &inv.OrganizationID, nil)
	if errors.Is(err, errOrganizationNotFound) {
		return nil, errInvitationNotFound
	}
	if err != nil {
		return nil, err
	}
	if !om.can(PermMemberManage) {
		return nil, errCannotCancel
	}
	inv, err = s.setInvitationStatus(ctx, inv, store.InvitationCanceled, "invitation.cancel")
	if err != nil {
		return nil, err
	}
	return gen.AuthCancelInvitation200JSONResponse(authInvitationJSON(inv)), nil
}

// AuthListInvitations lists every invitation of the organization, whatever its status, newest
// first. Any member may list them.
func (s *Server) AuthListInvitations(ctx context.Context, req gen.AuthListInvitationsRequestObject) (gen.AuthListInvitationsResponseObject, error) {
	om, err := s.callerOrganization(ctx, req.Params.OrganizationId, nil)
	if err != nil {
		return nil, err
	}
	invitations, err := s.store.ListInvitations(ctx, om.org.ID)
	if err != nil {
		return nil, err
	}
	out := make(gen.AuthListInvitations200JSONResponse, len(invitations))
	for i, inv := range invitations {
		out[len(out)-1-i] = authInvitationJSON(inv)
	}
	return out, nil
}

// recipientInvitation returns invitation id when it is pending, unexpired, in an active
// organization (else 400 INVITATION_NOT_FOUND) and addressed to the caller's email (else 403
// YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION).
func (s *Server) recipientInvitation(ctx context.Context, id string) (store.Invitation, error) {
	inv, err := s.store.Invitation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return inv, errInvitationNotFound
	}
	if err != nil {
		return inv, err
	}
	if inv.Status != store.InvitationPending || !inv.ExpiresAt.After(s.store.Now()) {
		return inv, errInvitationNotFound
	}
	if inv.Email != store.NormalizeEmail(PrincipalFrom(ctx).User.Email) {
		return inv, errNotRecipient
	}
	org, err := s.store.Organization(ctx, inv.OrganizationID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && org.ArchivedAt != nil) {
		return inv, errInvitationNotFound
	}
	return inv, err
}

// setInvitationStatus moves a pending invitation to status and audits action, in one
// transaction. An invitation that is no longer pending is 400 INVITATION_NOT_FOUND.
func (s *Server) setInvitationStatus(ctx context.Context, inv store.Invitation, status, action string) (store.Invitation, error) {
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if inv, err = tx.SetInvitationStatus(ctx, inv.ID, status); errors.Is(err, store.ErrNotFound) {
			return errInvitationNotFound
		} else if err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: action, TargetType: "invitation", TargetID: inv.ID,
			OrganizationID: inv.OrganizationID, Metadata: map[string]any{"email": inv.Email, "role": inv.Role}})
	})
	return inv, err
}

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
	for _, r := range strings.Split(list, ",") {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// hasRole reports whether a comma-joined role list holds role.
func hasRole(list, role string) bool { return slices.Contains(splitRoles(list), role) }

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

// ---- Wire forms ----

// jsonNull is a 200 whose body is the JSON literal null: better-auth's answer when there is no
// organization to show (set-active with null, get-full-organization without an active one).
type jsonNull struct{}

func (jsonNull) write(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte("null\n"))
	return err
}

// VisitAuthSetActiveOrganizationResponse implements gen.AuthSetActiveOrganizationResponseObject.
func (n jsonNull) VisitAuthSetActiveOrganizationResponse(w http.ResponseWriter) error {
	return n.write(w)
}

// VisitAuthGetFullOrganizationResponse implements gen.AuthGetFullOrganizationResponseObject.
func (n jsonNull) VisitAuthGetFullOrganizationResponse(w http.ResponseWriter) error {
	return n.write(w)
}

func authOrganizationJSON(o store.Organization) gen.AuthOrganization {
	md := nullable.NewNullNullable[map[string]any]()
	if len(o.Metadata) > 0 {
		md = nullable.NewNullableWithValue(o.Metadata)
	}
	return gen.AuthOrganization{Id: o.ID, Name: o.Name, Slug: o.Slug, Logo: authOptString(o.Logo), Metadata: md, CreatedAt: o.CreatedAt}
}

func authMemberJSON(m store.Member) gen.AuthMember {
	return gen.AuthMember{Id: m.ID, OrganizationId: m.OrganizationID, UserId: m.UserID, Role: m.Role, CreatedAt: m.CreatedAt}
}

func authMemberWithUserJSON(m store.MemberWithUser) gen.AuthMemberWithUser {
	return gen.AuthMemberWithUser{
		Id: m.ID, OrganizationId: m.OrganizationID, UserId: m.UserID, Role: m.Role, CreatedAt: m.CreatedAt,
		User: gen.AuthMemberUser{Id: m.UserID, Name: m.UserName, Email: m.UserEmail, Image: authOptString(m.UserImage)},
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

// authOptString renders an optional string as a value or an explicit null.
func authOptString(p *string) nullable.Nullable[string] {
	if p == nil {
		return nullable.NewNullNullable[string]()
	}
	return nullable.NewNullableWithValue(*p)
}
