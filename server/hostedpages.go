package server

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/oauth"
)

// The hosted sign-up, "forgot password" and "check your inbox" pages, and what the sign-up and
// request-password-reset form posts answer a browser. An authorization request travels through
// them as callbackURL: the sign-in page's own continuation (/api/auth/oauth2/authorize?…, with
// the pushed marker when there is one), so that signing up or resetting a password comes back
// to the request it interrupted, through the same mechanism a sign-in uses.

// Paths of the hosted pages that the provider's sign-in page and the mails link to.
const (
	SignUpPagePath         = "/api/auth/sign-up"
	ForgotPasswordPagePath = "/api/auth/forgot-password"
	checkInboxPagePath     = "/api/auth/check-inbox"
	invitationPagePrefix   = "/accept-invitation/"
)

// signUpRefusals are the sentences of the codes a refused browser sign-up comes back with;
// any other code gets signUpRefusedDefault.
var signUpRefusals = map[string]string{
	errUserExists.Code:         "An account with this email address already exists. Sign in, or reset its password if you have forgotten it.",
	signUpDisabledCode:         "This email address cannot sign up here. Sign-up needs an invitation sent to the address.",
	"TOO_MANY_REQUESTS":        "Too many accounts were created from your network. Wait a while and try again.",
	errInvalidCallbackURL.Code: "This sign-up link is malformed.",
}

const signUpRefusedDefault = "Your account could not be created. Check the details and try again."

// SignUpPage serves the hosted sign-up page (see the spec).
func (s *Server) SignUpPage(ctx context.Context, request gen.SignUpPageRequestObject) (gen.SignUpPageResponseObject, error) {
	p := request.Params
	if err := s.checkCallbackURL(p.CallbackURL); err != nil {
		return nil, err
	}
	page := accountPage{Title: "Create your account", Action: "/api/auth/sign-up/email",
		CallbackURL: deref(p.CallbackURL), SignInURL: deref(p.CallbackURL), Email: deref(p.Email), Name: deref(p.Name)}
	switch s.cfg.SignUp {
	case SignUpClosed:
		page.Action, page.Message = "", "New accounts cannot be created here. If you already have one, sign in."
	case SignUpInviteOnly:
		page.Message = "Sign-up is by invitation: use the email address your invitation was sent to."
	}
	if code := deref(p.Error); code != "" {
		page.Error, page.Message = true, signUpRefusedDefault
		if m, ok := signUpRefusals[code]; ok {
			page.Message = m
		}
	}
	body, n, err := s.renderAccountPage(ctx, pageSignUp, page)
	if err != nil {
		return nil, err
	}
	return gen.SignUpPage200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// ForgotPasswordPage serves the hosted "forgot password" page (see the spec).
func (s *Server) ForgotPasswordPage(ctx context.Context, request gen.ForgotPasswordPageRequestObject) (gen.ForgotPasswordPageResponseObject, error) {
	p := request.Params
	if err := s.checkCallbackURL(p.CallbackURL); err != nil {
		return nil, err
	}
	body, n, err := s.renderAccountPage(ctx, pageForgotPassword, accountPage{Title: "Reset your password",
		Action: "/api/auth/request-password-reset", CallbackURL: deref(p.CallbackURL), SignInURL: deref(p.CallbackURL),
		Email: deref(p.Email)})
	if err != nil {
		return nil, err
	}
	return gen.ForgotPasswordPage200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// CheckInboxPage serves the hosted "check your inbox" page (see the spec).
func (s *Server) CheckInboxPage(ctx context.Context, request gen.CheckInboxPageRequestObject) (gen.CheckInboxPageResponseObject, error) {
	p := request.Params
	if err := s.checkCallbackURL(p.CallbackURL); err != nil {
		return nil, err
	}
	page := accountPage{Title: "Check your inbox",
		Message: "We have sent you an email with a link to confirm your address. Open it to continue: it works for 24 hours.",
		Next:    "Nothing there after a few minutes? Look in your spam folder, or sign in again to be sent a new link."}
	if p.For != nil && *p.For == gen.ResetPassword {
		page.Message = "If an account has this email address, we have sent it a link to choose a new password. It works for one hour."
		page.Next = "Nothing there after a few minutes? Look in your spam folder, or ask for a new link."
	}
	if p.CallbackURL != nil {
		page.Link = pageLink{URL: *p.CallbackURL, Label: "Back to sign in"}
	}
	body, n, err := s.renderAccountPage(ctx, pageMessage, page)
	if err != nil {
		return nil, err
	}
	return gen.CheckInboxPage200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// checkInboxURL is the "check your inbox" page for kind, with callbackURL when given.
func checkInboxURL(kind gen.CheckInboxPageParamsFor, callbackURL *string) string {
	q := url.Values{"for": {string(kind)}}
	if callbackURL != nil {
		q.Set("callbackURL", *callbackURL)
	}
	return checkInboxPagePath + "?" + q.Encode()
}

// signUpPageDone is where a browser's sign-up goes once the account exists: to callbackURL when
// the browser is signed in and has one, else to "check your inbox".
func signUpPageDone(signedIn bool, callbackURL *string) gen.SignUpEmailResponseObject {
	loc := checkInboxURL(gen.VerifyEmail, callbackURL)
	if signedIn && callbackURL != nil {
		loc = *callbackURL
	}
	return gen.SignUpEmail303Response{Headers: gen.SignUpEmail303ResponseHeaders{Location: &loc}}
}

// signUpPageRefused sends a browser's refused sign-up back to the sign-up page with the
// refusal's code and what was typed (not the password), when err is a refusal the person can
// act on; ok is false for any other error (answered as usual). An invalid callbackURL is
// answered as usual too: there is no trustworthy page to go back to.
func signUpPageRefused(err error, body *gen.AuthSignUpEmailBody) (gen.SignUpEmailResponseObject, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Status >= 500 || e.Code == "" || e == errInvalidCallbackURL {
		return nil, false
	}
	q := url.Values{"error": {e.Code}, "email": {string(body.Email)}, "name": {body.Name}}
	if body.CallbackURL != nil {
		q.Set("callbackURL", *body.CallbackURL)
	}
	loc := SignUpPagePath + "?" + q.Encode()
	return gen.SignUpEmail303Response{Headers: gen.SignUpEmail303ResponseHeaders{Location: &loc}}, true
}

// isHostedContinuation reports whether callbackURL is one of this site's hosted sign-in
// places, where a hosted page returns the browser: the authorization endpoint (the sign-in
// page's own continuation), the hosted sign-in page (its own continuation) or an invitation's page, as a relative URL, as the pages write it.
// A reset link with such a callbackURL opens the hosted reset form rather than forwarding its
// token there.
func isHostedContinuation(callbackURL *string) bool {
	if callbackURL == nil {
		return false
	}
	u, err := url.Parse(*callbackURL)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return false
	}
	return u.Path == oauth.AuthorizePath || u.Path == oauth.SignInPath || strings.HasPrefix(u.Path, invitationPagePrefix)
}
