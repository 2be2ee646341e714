package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Email verification, wire-compatible with better-auth's: sign-up mails a link, so does
// send-verification-email (and, with RequireEmailVerification, a sign-in refused for an
// unverified address); the link is GET /api/auth/verify-email?token=…[&callbackURL=…], which
// verifies through identity.VerifyEmail (the email rule: identity.ClaimEmail).

// Errors of email verification, with better-auth's codes and messages.
var (
	errInvalidToken         = authError(http.StatusUnauthorized, kindUnauthorized, "INVALID_TOKEN", "Invalid token")
	errTokenExpired         = authError(http.StatusUnauthorized, kindUnauthorized, "TOKEN_EXPIRED", "Token expired")
	errEmailMismatch        = authError(http.StatusBadRequest, kindClientError, "EMAIL_MISMATCH", "Email mismatch")
	errEmailAlreadyVerified = authError(http.StatusBadRequest, kindClientError,
		"EMAIL_ALREADY_VERIFIED", "Email is already verified")
	errEmailNotVerified = authError(http.StatusForbidden, kindForbidden, "EMAIL_NOT_VERIFIED", "Email not verified")
)

// SendVerificationEmail mails a verification link to the account with the address, when it
// exists and is not verified. Signed out, the answer is the same either way, after the same
// work: for any other address a decoy token and message are stored and queued (as
// request-password-reset does), which never work and are never sent.
func (s *Server) SendVerificationEmail(ctx context.Context, request gen.SendVerificationEmailRequestObject) (gen.SendVerificationEmailResponseObject, error) {
	b := request.Body
	if err := s.checkCallbackURL(b.CallbackURL); err != nil {
		return nil, err
	}
	email := store.NormalizeEmail(string(b.Email))
	if p := PrincipalFrom(ctx); p != nil && p.Kind == PrincipalUser {
		switch {
		case p.User.Email != email:
			return nil, errEmailMismatch
		case p.User.EmailVerified:
			return nil, errEmailAlreadyVerified
		}
	}
	admission, err := s.admitMail(ctx, email)
	if err != nil {
		return nil, err
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		u, err := tx.UserByEmailTx(ctx, email)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err != nil || u.EmailVerified {
			u = store.User{Email: email, Name: u.Name} // no ID: a decoy
		}
		return s.sendVerificationLink(ctx, tx, admission, u, b.CallbackURL)
	})
	if err != nil {
		s.undoMail(ctx, admission)
		return nil, err
	}
	return gen.SendVerificationEmail200JSONResponse{Status: true}, nil
}

// VerifyEmail is the mailed link: it verifies the address (identity.VerifyEmail), keeps the
// opener's browser signed in when it was signed in to this account (the claim ended every
// session), and answers with a redirect to callbackURL, a page for a browser or JSON.
func (s *Server) VerifyEmail(ctx context.Context, request gen.VerifyEmailRequestObject) (gen.VerifyEmailResponseObject, error) {
	noStore(ctx)
	callback := request.Params.CallbackURL
	if err := s.checkCallbackURL(callback); err != nil {
		return nil, err
	}
	p := PrincipalFrom(ctx)
	var v identity.EmailVerification
	var sess store.Session
	var token string
	var change *identity.EmailChange
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		v, err = identity.VerifyEmail(ctx, tx, request.Params.Token, auditEntry(ctx, auditEvent{}))
		if errors.Is(err, identity.ErrTokenInvalid) {
			change, err = s.changeEmailLink(ctx, tx, request.Params.Token, err)
			return err
		}
		if err != nil || !v.Claim.Claimed || p == nil || p.Kind != PrincipalUser || p.ID() != v.User.ID {
			return err
		}
		sess, token, err = s.createSession(ctx, tx, v.User.ID, p.Session.RememberMe, p.Session.ActiveOrganizationID, p.Session.AMR)
		return err
	})
	var failure *Error
	switch {
	case errors.Is(err, identity.ErrTokenInvalid):
		failure = errInvalidToken
	case errors.Is(err, identity.ErrTokenExpired):
		failure = errTokenExpired
	case errors.Is(err, identity.ErrEmailTaken):
		failure = errEmailTaken
	case err != nil:
		return nil, err
	}
	if token != "" {
		s.setSessionCookie(ctx, token, sess.RememberMe)
	}
	if callback != nil {
		loc := *callback
		if failure != nil {
			loc = withQueryParam(loc, "error", failure.Code)
		}
		return gen.VerifyEmail302Response{Headers: gen.VerifyEmail302ResponseHeaders{Location: &loc}}, nil
	}
	if wantsPage(ctx) {
		return s.verifyEmailPage(ctx, failure, change != nil)
	}
	if failure != nil {
		return nil, failure
	}
	return gen.VerifyEmail200JSONResponse{Body: gen.AuthVerifyEmailResponse{Status: true, User: nullable.NewNullNullable[any]()}}, nil
}

// verifyEmailPage is the hosted page of a verification link opened without a callbackURL.
func (s *Server) verifyEmailPage(ctx context.Context, failure *Error, changed bool) (gen.VerifyEmailResponseObject, error) {
	page := accountPage{Title: "Email address verified",
		Message: "Your email address is verified. You can close this window and go back to the application."}
	if changed {
		page = accountPage{Title: "Email address changed",
			Message: "Your account now uses this email address. You can close this window and go back to the application."}
	}
	if failure == errEmailTaken {
		page = accountPage{Title: "This address is taken", Error: true, Code: failure.Code,
			Message: "Another account has this email address now, so yours keeps its current address.",
			Next:    "Choose another address, or sign in to the other account."}
	} else if failure != nil {
		page = accountPage{Title: "This link does not work", Error: true, Code: failure.Code,
			Message: "The verification link is not valid: it may have expired or been replaced by a newer one.",
			Next:    "Ask the application for a new verification email."}
		if failure == errTokenExpired {
			page.Message = "The verification link has expired."
		}
	}
	body, n, err := s.renderAccountPage(ctx, pageMessage, page)
	if err != nil {
		return nil, err
	}
	if failure == errEmailTaken {
		return gen.VerifyEmail409TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	if failure != nil {
		return gen.VerifyEmail401TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	return gen.VerifyEmail200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// sendVerificationLink mails u a new verification link in tx (within admission): to
// verify-email with callbackURL, when given. A u without an ID gets decoys (see
// SendVerificationEmail): a token that never works and a message never sent.
func (s *Server) sendVerificationLink(ctx context.Context, tx *store.Tx, admission identity.MailAdmission, u store.User, callbackURL *string) error {
	if !admission.Allowed() {
		return nil
	}
	token, err := identity.IssueEmailToken(ctx, tx, store.EmailTokenVerifyEmail, u, identity.VerificationLinkLifetime)
	if err != nil {
		return err
	}
	q := url.Values{"token": {token}}
	if callbackURL != nil {
		q.Set("callbackURL", *callbackURL)
	}
	link := s.cfg.BaseURL + "/api/auth/verify-email?" + q.Encode()
	msg, err := s.mailer.Compose.VerifyEmail(u.Email, u.Name, link, identity.VerificationLinkLifetime)
	msg.Discard = u.ID == ""
	return s.sendMail(ctx, tx, admission, msg, err)
}

// requireVerifiedEmail is sign-in's check under RequireEmailVerification: a user whose address
// is not verified is refused (403 EMAIL_NOT_VERIFIED) after the password was found right, and
// is mailed a fresh link (within the send limits).
func (s *Server) requireVerifiedEmail(ctx context.Context, u store.User, callbackURL *string) error {
	if !s.cfg.RequireEmailVerification || u.EmailVerified {
		return nil
	}
	admission, err := s.admitMail(ctx, u.Email)
	if err != nil {
		return err
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error { return s.sendVerificationLink(ctx, tx, admission, u, callbackURL) })
	if err != nil {
		s.undoMail(ctx, admission)
		return err
	}
	return errEmailNotVerified
}

// signUpRefused answers a sign-up that failed with err. Under RequireEmailVerification a taken
// address is answered as a new one would be (200, no token, a user that is not stored), as
// better-auth does, so that sign-up does not tell who has an account; the password was hashed
// either way.
func (s *Server) signUpRefused(ctx context.Context, u store.User, err error) (gen.SignUpEmailResponseObject, error) {
	if !errors.Is(err, errUserExists) || !s.cfg.RequireEmailVerification {
		return nil, err
	}
	now := s.store.Now()
	u.ID, u.EmailVerified, u.CreatedAt, u.UpdatedAt = store.NewID("usr"), false, now, now
	noStore(ctx)
	return gen.SignUpEmail200JSONResponse{Body: gen.AuthSignUpResponse{Token: nullable.NewNullNullable[string](), User: toAuthUser(u, false)}}, nil
}
