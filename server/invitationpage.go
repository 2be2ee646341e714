package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The hosted accept-invitation page at the default GATEHOUSE_INVITATION_URL,
// /accept-invitation/{id}: what an invitation mail's link opens. The invitation id is the
// link's secret; the page shows what the holder of the link may see (the organization and the
// invited address), and the role and the buttons only to the invited, signed-in user.

// invitationFacts is what the accept-invitation page shows of the invitation; State is one of
// the invitationState values ("" when the page shows no invitation).
type invitationFacts struct {
	Organization, Role, Email, State string
}

// The states of a pending invitation's page, by who opens it.
const (
	invitationSignedOut    = "signed-out"
	invitationOtherAccount = "other-account"
	invitationRecipient    = "recipient"
)

// invitationPageError are the sentences of the codes a failed sign-in comes back to the
// page with (SignInEmail's login_error).
var invitationPageError = map[string]string{
	"invalid_credentials": "The email or password is not correct.",
	"too_many_attempts":   "Too many failed attempts. Wait a while and try again.",
	"email_not_verified":  "Confirm your email address first: we have sent you a new link.",
}

// invitationView is an invitation page to render: the page, its status, and for a pending
// invitation the invitation.
type invitationView struct {
	page   accountPage
	status int
	inv    store.Invitation
}

// invitationView reads invitation id and decides its page for the caller: 404 unknown, 410
// expired, withdrawn, answered or in an archived organization, else 200 in the caller's state.
func (s *Server) invitationView(ctx context.Context, id, loginError string) (invitationView, error) {
	path := invitationPagePrefix + url.PathEscape(id)
	v := invitationView{status: http.StatusGone, page: accountPage{Title: "This invitation can't be used", Error: true}}
	inv, err := s.store.Invitation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		v.status, v.page.Title = http.StatusNotFound, "Invitation not found"
		v.page.Message = "There is no invitation at this address. Check that you opened the whole link from the invitation email."
		return v, nil
	}
	if err != nil {
		return v, err
	}
	org, err := s.store.Organization(ctx, inv.OrganizationID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && org.ArchivedAt != nil):
		v.page.Message = "The organization that sent this invitation no longer exists."
		return v, nil
	case err != nil:
		return v, err
	}
	v.inv = inv
	v.page.Invitation = invitationFacts{Organization: org.Name, Email: inv.Email}
	switch {
	case inv.Status == store.InvitationAccepted:
		v.page.Message = "This invitation has already been accepted."
	case inv.Status == store.InvitationRejected:
		v.page.Message = "This invitation has already been declined."
	case inv.Status == store.InvitationCanceled:
		v.page.Message = "This invitation was withdrawn by the organization. Ask them to invite you again."
	case !inv.ExpiresAt.After(s.store.Now()):
		v.page.Message = "This invitation has expired. Ask the person who invited you to send a new one."
	}
	if v.page.Message != "" {
		return v, nil
	}
	v.status, v.page.Error = http.StatusOK, false
	v.page.Title, v.page.Action, v.page.CallbackURL = "Join "+org.Name, path, path
	p := PrincipalFrom(ctx)
	switch {
	case p == nil || p.Kind != PrincipalUser:
		v.page.Invitation.State = invitationSignedOut
		v.page.Message = "You have been invited to join " + org.Name + ". Sign in with the invited address to accept."
		v.page.Email = inv.Email
		v.page.ForgotURL = ForgotPasswordPagePath + "?" + url.Values{"email": {inv.Email}, "callbackURL": {path}}.Encode()
		if s.cfg.SignUp != SignUpClosed {
			v.page.SignUpURL = SignUpPagePath + "?" + url.Values{"email": {inv.Email}, "callbackURL": {path}}.Encode()
		}
		if loginError != "" {
			v.page.Error, v.page.Message = true, invitationPageError["invalid_credentials"]
			if m, ok := invitationPageError[loginError]; ok {
				v.page.Message = m
			}
		}
	case store.NormalizeEmail(p.User.Email) != inv.Email:
		v.page.Invitation.State = invitationOtherAccount
		v.page.Error = true
		v.page.Message = "You are signed in as " + p.User.Email + ", but this invitation is for " + inv.Email +
			". Sign out, then sign in or create an account with " + inv.Email + "."
	default:
		v.page.Invitation.State = invitationRecipient
		v.page.Invitation.Role = inv.Role
		v.page.Message = "You have been invited to join " + org.Name + " as " + inv.Role + "."
	}
	return v, nil
}

// renderInvitation renders v's page.
func (s *Server) renderInvitation(ctx context.Context, v invitationView) (gen.InvitationPageResponseObject, error) {
	body, n, err := s.renderAccountPage(ctx, pageInvitation, v.page)
	if err != nil {
		return nil, err
	}
	switch v.status {
	case http.StatusNotFound:
		return gen.InvitationPage404TexthtmlResponse{Body: body, ContentLength: n}, nil
	case http.StatusGone:
		return gen.InvitationPage410TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	return gen.InvitationPage200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// InvitationPage serves the hosted accept-invitation page (see the spec).
func (s *Server) InvitationPage(ctx context.Context, request gen.InvitationPageRequestObject) (gen.InvitationPageResponseObject, error) {
	v, err := s.invitationView(ctx, request.Id, deref(request.Params.LoginError))
	if err != nil {
		return nil, err
	}
	return s.renderInvitation(ctx, v)
}

// answeredInvitation adapts an invitation page response to AnswerInvitation's.
type answeredInvitation struct {
	gen.InvitationPageResponseObject
}

func (a answeredInvitation) VisitAnswerInvitationResponse(w http.ResponseWriter) error {
	return a.VisitInvitationPageResponse(w)
}

// AnswerInvitation serves the accept-invitation page's buttons (see the spec).
func (s *Server) AnswerInvitation(ctx context.Context, request gen.AnswerInvitationRequestObject) (gen.AnswerInvitationResponseObject, error) {
	noStore(ctx)
	v, err := s.invitationView(ctx, request.Id, "")
	if err != nil {
		return nil, err
	}
	p := PrincipalFrom(ctx)
	decision := request.Body.Decision
	switch {
	case decision == gen.SwitchAccount && p != nil && p.Kind == PrincipalUser:
		err := s.store.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteSession(ctx, p.Session.ID) })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		s.expireSessionCookies(ctx)
		loc := invitationPagePrefix + url.PathEscape(request.Id)
		return gen.AnswerInvitation303Response{Headers: gen.AnswerInvitation303ResponseHeaders{Location: &loc}}, nil
	case v.page.Invitation.State != invitationRecipient || decision == gen.SwitchAccount:
		res, err := s.renderInvitation(ctx, v)
		return answeredInvitation{res}, err
	}
	org := v.page.Invitation.Organization
	const next = "You can close this window and go back to the application."
	done := accountPage{Title: "Invitation declined", Message: "You declined the invitation to join " + org + ".", Next: next}
	if decision == gen.Accept {
		done = accountPage{Title: "Welcome to " + org, Message: "You are now a member of " + org + " as " + v.inv.Role + ".", Next: next}
		_, _, err = s.acceptInvitation(ctx, v.inv)
	} else {
		_, err = s.setInvitationStatus(ctx, v.inv, store.InvitationRejected, "invitation.reject")
	}
	switch {
	case errors.Is(err, errAlreadyMember):
		done = accountPage{Title: "Already a member", Message: "You are already a member of " + org + ".", Next: next}
	case errors.Is(err, errInvitationNotFound): // answered meanwhile
		if v, err = s.invitationView(ctx, request.Id, ""); err != nil {
			return nil, err
		}
		res, err := s.renderInvitation(ctx, v)
		return answeredInvitation{res}, err
	case err != nil:
		return nil, err
	}
	body, n, err := s.renderAccountPage(ctx, pageMessage, done)
	if err != nil {
		return nil, err
	}
	return gen.AnswerInvitation200TexthtmlResponse{Body: body, ContentLength: n}, nil
}
