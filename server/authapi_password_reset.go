package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Password reset, wire-compatible with better-auth's: request-password-reset mails a link,
// GET /api/auth/reset-password/{token} forwards it to the product's page (or shows the hosted
// form), POST /api/auth/reset-password sets the new password (identity.ResetPassword).

// passwordResetRequested is request-password-reset's one answer, better-auth's words.
const passwordResetRequested = "If this email exists in our system, check your email for the reset link"

// errResetInvalidToken is a reset with a token that does not work, as better-auth answers it.
var errResetInvalidToken = authError(http.StatusBadRequest, kindClientError, "INVALID_TOKEN", "Invalid token")

// RequestPasswordReset mails a reset link to the account with the address. Whether there is
// one or not, the request does the same work and gives the same answer: the throttle counts,
// the lookup, a token, a rendered message, and in one transaction a stored token and a queued
// message. For an address without an account they are decoys: the token belongs to nobody and
// never works, and the message is marked Discard, so the worker sends nothing.
func (s *Server) RequestPasswordReset(ctx context.Context, request gen.RequestPasswordResetRequestObject) (gen.RequestPasswordResetResponseObject, error) {
	b, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	if err := s.checkCallbackURL(b.RedirectTo); err != nil {
		return nil, err
	}
	email := store.NormalizeEmail(string(b.Email))
	admission, err := s.admitMail(ctx, email)
	if err != nil {
		return nil, err
	}
	token, err := identity.NewEmailToken()
	if err != nil {
		return nil, err
	}
	link := s.cfg.BaseURL + "/api/auth/reset-password/" + token
	if b.RedirectTo != nil {
		link += "?" + url.Values{"callbackURL": {*b.RedirectTo}}.Encode()
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		u, err := tx.UserByEmailTx(ctx, email)
		found := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if !found {
			u = store.User{Email: email} // no ID: the token is a decoy
			u.Name, _, _ = strings.Cut(email, "@")
		}
		msg, err := s.mailer.Compose.ResetPassword(email, u.Name, link, identity.ResetLinkLifetime)
		if err != nil || !admission.Allowed() {
			return err
		}
		msg.Discard = !found
		if err := identity.StoreEmailToken(ctx, tx, store.EmailTokenResetPassword, token, u, identity.ResetLinkLifetime); err != nil {
			return err
		}
		return s.sendMail(ctx, tx, admission, msg, nil)
	})
	if err != nil {
		s.undoMail(ctx, admission)
		return nil, err
	}
	if request.FormdataBody != nil && wantsPage(ctx) { // the hosted "forgot password" page
		loc := checkInboxURL(gen.ResetPassword, b.RedirectTo)
		return gen.RequestPasswordReset303Response{Headers: gen.RequestPasswordReset303ResponseHeaders{Location: &loc}}, nil
	}
	return gen.RequestPasswordReset200JSONResponse{Status: true, Message: passwordResetRequested}, nil
}

// ResetPasswordCallback is the mailed link. It only checks the token: to the product's page
// with ?token= (or ?error=INVALID_TOKEN), or, without a callbackURL or with an authorization
// request or an invitation to continue (isHostedContinuation), the hosted reset form.
func (s *Server) ResetPasswordCallback(ctx context.Context, request gen.ResetPasswordCallbackRequestObject) (gen.ResetPasswordCallbackResponseObject, error) {
	noStore(ctx)
	callback := request.Params.CallbackURL
	if err := s.checkCallbackURL(callback); err != nil {
		return nil, err
	}
	err := identity.CheckEmailToken(ctx, s.store, store.EmailTokenResetPassword, request.Token)
	if err != nil && !errors.Is(err, identity.ErrTokenInvalid) && !errors.Is(err, identity.ErrTokenExpired) {
		return nil, err
	}
	if callback != nil && !isHostedContinuation(callback) {
		loc := withQueryParam(*callback, "token", request.Token)
		if err != nil {
			loc = withQueryParam(*callback, "error", "INVALID_TOKEN")
		}
		return gen.ResetPasswordCallback302Response{Headers: gen.ResetPasswordCallback302ResponseHeaders{Location: &loc}}, nil
	}
	if err != nil {
		body, n, err := s.renderAccountPage(ctx, pageMessage, s.resetLinkFailure(err))
		if err != nil {
			return nil, err
		}
		return gen.ResetPasswordCallback400TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	body, n, err := s.renderAccountPage(ctx, pageResetPassword, accountPage{Title: "Choose a new password",
		Action: "/api/auth/reset-password", Token: request.Token, CallbackURL: deref(callback)})
	if err != nil {
		return nil, err
	}
	return gen.ResetPasswordCallback200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// ResetPassword sets the new password with a reset token (identity.ResetPassword): JSON
// {status: true}, or a page for the hosted form's post.
func (s *Server) ResetPassword(ctx context.Context, request gen.ResetPasswordRequestObject) (gen.ResetPasswordResponseObject, error) {
	noStore(ctx)
	body, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	page := request.FormdataBody != nil && wantsPage(ctx)
	if err := s.checkCallbackURL(body.CallbackURL); err != nil {
		return nil, err
	}
	token := ""
	if body.Token != nil {
		token = *body.Token
	} else if request.Params.Token != nil {
		token = *request.Params.Token
	}
	// The token is checked before the password is hashed: a bad token costs no argon2id.
	err = identity.CheckEmailToken(ctx, s.store, store.EmailTokenResetPassword, token)
	var reset identity.PasswordReset
	if err == nil {
		var hash string
		if hash, err = s.hashLimiter.HashPassword(ctx, body.NewPassword); err != nil {
			return nil, s.hashErr(err)
		}
		err = s.store.InTx(ctx, func(tx *store.Tx) error {
			var err error
			reset, err = identity.ResetPassword(ctx, tx, token, hash, auditEntry(ctx, auditEvent{}))
			return err
		})
	}
	switch {
	case (errors.Is(err, identity.ErrTokenInvalid) || errors.Is(err, identity.ErrTokenExpired)) && page:
		out, n, err := s.renderAccountPage(ctx, pageMessage, s.resetLinkFailure(err))
		if err != nil {
			return nil, err
		}
		return gen.ResetPassword400TexthtmlResponse{Body: out, ContentLength: n}, nil
	case errors.Is(err, identity.ErrTokenInvalid) || errors.Is(err, identity.ErrTokenExpired):
		return nil, errResetInvalidToken
	case err != nil:
		return nil, err
	}
	// A user locked out by failed guesses may sign in with the new password at once.
	if err := s.accountThrottle.Reset(context.WithoutCancel(ctx), "email:"+reset.User.Email); err != nil {
		s.log.WarnContext(ctx, "throttle: reset account", "err", err)
	}
	if page {
		done := accountPage{Title: "Password changed",
			Message: "Your new password is set, and you are signed out everywhere. Sign in with the new password."}
		if body.CallbackURL != nil {
			done.Link = pageLink{URL: *body.CallbackURL, Label: "Continue to sign in"}
		}
		out, n, err := s.renderAccountPage(ctx, pageMessage, done)
		if err != nil {
			return nil, err
		}
		return gen.ResetPassword200TexthtmlResponse{Body: out, ContentLength: n}, nil
	}
	return gen.ResetPassword200JSONResponse{Status: true}, nil
}

// resetLinkFailure is the hosted page of a reset link that does not work.
func (s *Server) resetLinkFailure(err error) accountPage {
	p := accountPage{Title: "This link does not work", Error: true, Code: errResetInvalidToken.Code,
		Message: "The password reset link is not valid: it may have been used already or replaced by a newer one.",
		Next:    "Ask for a new password reset email."}
	if errors.Is(err, identity.ErrTokenExpired) {
		p.Message = "The password reset link has expired: it works for one hour."
	}
	return p
}
