package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/store"
)

// SignUpMode says who may create an account (GATEHOUSE_SIGN_UP): by email and password
// (sign-up/email) or by a first social sign-in. People who already have an account always sign
// in, whatever the mode.
type SignUpMode string

const (
	// SignUpOpen lets anyone create an account (the default).
	SignUpOpen SignUpMode = "open"
	// SignUpInviteOnly lets only an address holding a pending, unexpired organization invitation
	// create an account; a social sign-in also needs the provider to have verified it.
	SignUpInviteOnly SignUpMode = "invite-only"
	// SignUpClosed lets nobody create an account.
	SignUpClosed SignUpMode = "closed"
)

// ParseSignUpMode reads a GATEHOUSE_SIGN_UP value.
func ParseSignUpMode(v string) (SignUpMode, error) {
	switch m := SignUpMode(v); m {
	case SignUpOpen, SignUpInviteOnly, SignUpClosed:
		return m, nil
	}
	return "", errors.New("want open, invite-only or closed")
}

// signUpDisabledCode is better-auth's code for a refused email sign-up; socialSignUpDisabled
// is the error a refused social sign-up sends the browser back with, as better-auth does.
const (
	signUpDisabledCode   = "EMAIL_PASSWORD_SIGN_UP_DISABLED"
	socialSignUpDisabled = socialRefusal("signup_disabled")
)

// Refused sign-ups: 400 with better-auth's code, as better-auth answers when sign-up is off.
var (
	errSignUpClosed = &Error{Status: http.StatusBadRequest, Kind: kindClientError, Title: "Sign-up is closed",
		Code: signUpDisabledCode, Message: "Sign-up is closed: new accounts cannot be created here."}
	errSignUpNeedsInvitation = &Error{Status: http.StatusBadRequest, Kind: kindClientError, Title: "Sign-up needs an invitation",
		Code: signUpDisabledCode, Message: "Sign-up needs an invitation: this email address has no pending invitation. " +
			"Ask an organization to invite it, then sign up with the same address."}
)

// allowSignUp reports whether an account may be created for email under the sign-up mode:
// always when open, never when closed, and when invite-only only for an address that holds a
// pending, unexpired invitation and, when proven is false (a provider did not verify it), not
// even then. It returns errSignUpClosed or errSignUpNeedsInvitation when not.
func (s *Server) allowSignUp(ctx context.Context, email string, proven bool) error {
	switch s.cfg.SignUp {
	case SignUpClosed:
		return errSignUpClosed
	case SignUpInviteOnly:
		if !proven {
			return errSignUpNeedsInvitation
		}
		invitations, err := s.store.ListUserInvitations(ctx, store.NormalizeEmail(email))
		if err != nil {
			return err
		}
		if len(invitations) == 0 {
			return errSignUpNeedsInvitation
		}
	}
	return nil
}

// checkEmailSignUp checks an email sign-up's callbackURL (checkCallbackURL) and that the mode
// allows the address (allowSignUp; the address is the sign-up's own claim). A refusal because
// the address holds no invitation counts against the client IP's sign-up limit, as a sign-up
// would, so that the refusal cannot be used to test many addresses for invitations.
func (s *Server) checkEmailSignUp(ctx context.Context, callbackURL *string, email string) error {
	if err := s.checkCallbackURL(callbackURL); err != nil {
		return err
	}
	err := s.allowSignUp(ctx, email, true)
	if errors.Is(err, errSignUpNeedsInvitation) {
		if _, herr := s.hit(ctx, throttleKey{s.signUpThrottle, "ip:" + requestMetaFrom(ctx).IP}); herr != nil {
			return herr
		}
	}
	return err
}
