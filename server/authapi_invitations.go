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

// ---- Invitations ----

// AuthInviteMember invites an email address with one or several roles and mails the accept
// link, through the outbox in the invitation's transaction (mailer.go). It needs
// member:manage; only an owner may invite an owner. A member's email is 400, a pending
// invitation 409 unless resend, which extends that invitation's expiry (keeping its role) and
// sends it again.
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
	admission, err := s.admitMail(ctx, email)
	if err != nil {
		return nil, err
	}
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
		msg, err := s.invitationMessage(inv, om.org, p.User)
		if err := s.sendMail(ctx, tx, admission, msg, err); err != nil {
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
		s.undoMail(ctx, admission)
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
	inv, member, err := s.acceptInvitation(ctx, inv)
	if err != nil {
		return nil, err
	}
	return gen.AuthAcceptInvitation200JSONResponse{Invitation: authInvitationJSON(inv), Member: authMemberJSON(member)}, nil
}

// acceptInvitation makes the signed-in caller, inv's recipient, a member with the invited
// role, makes the organization active in the caller's session and audits invitation.accept,
// in one transaction. An invitation no longer pending is errInvitationNotFound; a member
// already, errAlreadyMember.
func (s *Server) acceptInvitation(ctx context.Context, inv store.Invitation) (store.Invitation, store.Member, error) {
	p := PrincipalFrom(ctx)
	var member store.Member
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
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
	return inv, member, err
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
