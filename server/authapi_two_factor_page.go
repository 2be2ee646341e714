package server

import (
	"context"
	"errors"
	"net/url"
	"slices"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
)

// The hosted second step of sign-in: the provider's sign-in page posts the password to
// sign-in/email, which sends the browser here when the second factor is due; this page posts
// the code to verify-totp (or verify-backup-code) with the callbackURL, which answers with
// redirects (secondStepRedirect).

// TwoFactorPagePath is the hosted second step.
const TwoFactorPagePath = "/api/auth/two-factor"

// pageTwoFactor is the second step's template.
const pageTwoFactor = "two-factor.html"

// twoFactorPageURL is the second step for callbackURL: the backup-code form when backup, with
// the error code errCode ("" for none).
func twoFactorPageURL(callbackURL string, backup bool, errCode string) string {
	q := url.Values{"callbackURL": {callbackURL}}
	if backup {
		q.Set("method", "backup")
	}
	if errCode != "" {
		q.Set("error", errCode)
	}
	return TwoFactorPagePath + "?" + q.Encode()
}

// secondStepRedirect is where the hosted form's post goes after err (nil: signed in): the
// callbackURL once signed in; the form again with error=invalid_code after a wrong code (or
// too_many_attempts when the account's throttle refused); the callbackURL with
// login_error=two_factor_expired when the pending sign-in is gone or used up, so that the
// sign-in page starts over. ok is false for errors the form cannot explain (outages, a
// factor that is not on): they are answered as problems.
func secondStepRedirect(callbackURL string, backup bool, err error) (string, bool) {
	var e *Error
	switch {
	case err == nil:
		return callbackURL, true
	case errors.Is(err, errInvalidCode), errors.Is(err, errInvalidBackupCode):
		return twoFactorPageURL(callbackURL, backup, "invalid_code"), true
	case errors.Is(err, errInvalidTwoFactorCookie), errors.Is(err, errTooManyCodeAttempts):
		return withQueryParam(callbackURL, "login_error", "two_factor_expired"), true
	case errors.As(err, &e) && e.Code == "TOO_MANY_REQUESTS":
		return twoFactorPageURL(callbackURL, backup, "too_many_attempts"), true
	}
	return "", false
}

// TwoFactorPage renders the second step for the pending sign-in: the code form (or the
// backup-code form) when the user's TOTP is on, and a "Use a passkey" button, which completes
// the sign-in with verify-authentication, when they have passkeys. Without a pending sign-in
// (or with a user left without any second factor) it says to sign in again.
func (s *Server) TwoFactorPage(ctx context.Context, request gen.TwoFactorPageRequestObject) (gen.TwoFactorPageResponseObject, error) {
	noStore(ctx)
	callback := "/"
	if request.Params.CallbackURL != nil {
		callback = *request.Params.CallbackURL
	}
	if err := s.checkCallbackURL(&callback); err != nil {
		return nil, err
	}
	_, pending, err := s.twoFactors.PendingSignIn(requestOf(ctx))
	var methods []string
	if err == nil {
		methods, err = s.secondFactorMethods(ctx, pending.UserID)
	}
	if errors.Is(err, identity.ErrNoPendingSignIn) || (err == nil && len(methods) == 0) {
		body, n, err := s.renderAccountPage(ctx, pageMessage, accountPage{Title: "Sign in again", Error: true,
			Code: errInvalidTwoFactorCookie.Code, Message: "This sign-in has expired or was already completed.",
			Next: "Go back and sign in again."})
		if err != nil {
			return nil, err
		}
		return gen.TwoFactorPage400TexthtmlResponse{Body: body, ContentLength: n}, nil
	} else if err != nil {
		return nil, err
	}
	// The code forms only for a user whose TOTP is on; the passkey button for one with passkeys.
	p := accountPage{Title: "Two-factor authentication", CallbackURL: callback,
		TOTP: slices.Contains(methods, methodTOTP), Passkey: slices.Contains(methods, methodPasskey)}
	if p.TOTP {
		p.Backup = request.Params.Method != nil && *request.Params.Method == gen.TwoFactorPageParamsMethodBackup
		p.Action, p.AltURL, p.AltText = "/api/auth/two-factor/verify-totp", twoFactorPageURL(callback, true, ""), "Use a backup code instead"
		if p.Backup {
			p.Action, p.AltURL, p.AltText = "/api/auth/two-factor/verify-backup-code", twoFactorPageURL(callback, false, ""),
				"Use your authenticator app instead"
		}
	}
	if e := request.Params.Error; e != nil {
		p.Error = true
		p.Message = "That code is not correct. Try again."
		if *e == gen.TooManyAttempts {
			p.Message = "Too many wrong codes. Wait a while and try again."
		}
	}
	body, n, err := s.renderAccountPage(ctx, pageTwoFactor, p)
	if err != nil {
		return nil, err
	}
	return gen.TwoFactorPage200TexthtmlResponse{Body: body, ContentLength: n}, nil
}
