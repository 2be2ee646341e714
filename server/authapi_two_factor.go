package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// TOTP second factor with backup codes on better-auth's twoFactor wire (identity.TwoFactors):
// enable, get-totp-uri, verify-totp, verify-backup-code, generate-backup-codes, disable, and the
// second step of sign-in/email.
//
// Wrong codes are counted on the account throttle under "two-factor:<user id>" (the same limit
// and window as wrong passwords; an accepted code forgets them), and against the pending
// sign-in itself (identity.TwoFactorSignInAttempts).

// Errors of the two-factor routes, with better-auth's codes and messages.
var (
	errInvalidCode = authError(http.StatusUnauthorized, kindUnauthorized,
		"INVALID_CODE", "Invalid code")
	errInvalidBackupCode = authError(http.StatusUnauthorized, kindUnauthorized,
		"INVALID_BACKUP_CODE", "Invalid backup code")
	errInvalidTwoFactorCookie = authError(http.StatusUnauthorized, kindUnauthorized,
		"INVALID_TWO_FACTOR_COOKIE", "Invalid two factor cookie")
	errTOTPNotEnabled = authError(http.StatusBadRequest, kindClientError,
		"TOTP_NOT_ENABLED", "TOTP not enabled")
	errTwoFactorNotEnabled = authError(http.StatusBadRequest, kindClientError,
		"TWO_FACTOR_NOT_ENABLED", "Two factor isn't enabled")
	errTooManyCodeAttempts = authError(http.StatusBadRequest, kindClientError,
		"TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE", "Too many attempts. Please request a new code.")
)

// How a session's user signed in (RFC 8176 values; store.Session.AMR): a password; a password
// and a TOTP or backup code (both one-time passwords), which is multi-factor. A social sign-in
// records the provider's id.
var (
	amrPassword   = []string{"pwd"}
	amrTwoFactors = []string{"pwd", "otp", "mfa"}
)

// defaultTOTPIssuer names accounts in authenticator apps when enable names no issuer and no
// brand is configured.
const defaultTOTPIssuer = "Gatehouse"

// totpIssuer is the issuer of the caller's otpauth URIs: the body's, else the brand's name.
func (s *Server) totpIssuer(issuer *string) string {
	if issuer != nil && *issuer != "" {
		return *issuer
	}
	if s.cfg.Brand.Name != "" {
		return s.cfg.Brand.Name
	}
	return defaultTOTPIssuer
}

// EnableTwoFactor checks the password and enrols the caller: a new TOTP secret and backup codes.
func (s *Server) EnableTwoFactor(ctx context.Context, request gen.EnableTwoFactorRequestObject) (gen.EnableTwoFactorResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	if err := s.checkCurrentPassword(ctx, p.ID(), request.Body.Password); err != nil {
		return nil, err
	}
	var enrolment identity.Enrolment
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if enrolment, err = s.twoFactors.Enroll(ctx, tx, p.User, s.totpIssuer(request.Body.Issuer)); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.two_factor_enroll", TargetType: "user", TargetID: p.ID()})
	})
	if err != nil {
		return nil, err
	}
	return gen.EnableTwoFactor200JSONResponse{Method: gen.EnableTwoFactor200JSONResponseBodyMethodTotp, TotpURI: enrolment.URI, BackupCodes: enrolment.BackupCodes}, nil
}

// GetTotpUri checks the password and returns the otpauth URI of the caller's secret.
func (s *Server) GetTotpUri(ctx context.Context, request gen.GetTotpUriRequestObject) (gen.GetTotpUriResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	if _, err := s.twoFactors.Enrolled(ctx, p.ID()); errors.Is(err, identity.ErrNoTwoFactor) {
		return nil, errTOTPNotEnabled
	} else if err != nil {
		return nil, err
	}
	if err := s.checkCurrentPassword(ctx, p.ID(), request.Body.Password); err != nil {
		return nil, err
	}
	uri, err := s.twoFactors.URI(ctx, p.User, s.totpIssuer(nil))
	if err != nil {
		return nil, err
	}
	return gen.GetTotpUri200JSONResponse{TotpURI: uri}, nil
}

// GenerateBackupCodes checks the password and replaces the caller's backup codes.
func (s *Server) GenerateBackupCodes(ctx context.Context, request gen.GenerateBackupCodesRequestObject) (gen.GenerateBackupCodesResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	if on, err := s.twoFactorOn(ctx, p.ID()); err != nil {
		return nil, err
	} else if !on {
		return nil, errTwoFactorNotEnabled
	}
	if err := s.checkCurrentPassword(ctx, p.ID(), request.Body.Password); err != nil {
		return nil, err
	}
	var codes []string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if codes, err = s.twoFactors.RegenerateBackupCodes(ctx, tx, p.ID()); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.two_factor_backup_codes", TargetType: "user", TargetID: p.ID()})
	})
	if err != nil {
		return nil, err
	}
	return gen.GenerateBackupCodes200JSONResponse{Status: true, BackupCodes: codes}, nil
}

// DisableTwoFactor checks the password and removes the caller's second factor, backup codes,
// pending sign-ins and trusted devices.
func (s *Server) DisableTwoFactor(ctx context.Context, request gen.DisableTwoFactorRequestObject) (gen.DisableTwoFactorResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	if err := s.checkCurrentPassword(ctx, p.ID(), request.Body.Password); err != nil {
		return nil, err
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		had, err := tx.DeleteTwoFactor(ctx, p.ID())
		if err != nil || !had {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.two_factor_disable", TargetType: "user", TargetID: p.ID()})
	})
	if err != nil {
		return nil, err
	}
	setCookie(ctx, s.twoFactors.ExpiredTrustDeviceCookie())
	return gen.DisableTwoFactor200JSONResponse{Status: true}, nil
}

// VerifyTotp checks a TOTP code: that of the sign-in pending in the two_factor cookie, which it
// completes, or the signed-in caller's (which turns a new enrolment on). The hosted second
// step's form post is answered with redirects (secondStepRedirect).
func (s *Server) VerifyTotp(ctx context.Context, request gen.VerifyTotpRequestObject) (gen.VerifyTotpResponseObject, error) {
	noStore(ctx)
	body, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	if err := s.checkCallbackURL(body.CallbackURL); err != nil {
		return nil, err
	}
	res, err := s.verifySecondFactor(ctx, body.TrustDevice, errInvalidCode,
		func(tx *store.Tx, userID string) error {
			turnedOn, err := s.twoFactors.CheckTOTP(ctx, tx, userID, body.Code)
			if errors.Is(err, identity.ErrNoTwoFactor) {
				return errTOTPNotEnabled
			}
			if err == nil && turnedOn {
				err = audit(ctx, tx, auditEvent{Action: "user.two_factor_enable", TargetType: "user", TargetID: userID})
			}
			return err
		})
	if request.FormdataBody != nil && body.CallbackURL != nil && !acceptsJSON(requestMetaFrom(ctx).Accept) {
		if loc, ok := secondStepRedirect(*body.CallbackURL, false, err); ok {
			return gen.VerifyTotp303Response{Headers: gen.VerifyTotp303ResponseHeaders{Location: &loc}}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.VerifyTotp200JSONResponse{Body: res}, nil
}

// VerifyBackupCode spends a backup code: that of the sign-in pending in the two_factor cookie,
// which it completes, or the signed-in caller's. The hosted form's post gets redirects.
func (s *Server) VerifyBackupCode(ctx context.Context, request gen.VerifyBackupCodeRequestObject) (gen.VerifyBackupCodeResponseObject, error) {
	noStore(ctx)
	body, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	if err := s.checkCallbackURL(body.CallbackURL); err != nil {
		return nil, err
	}
	res, err := s.verifySecondFactor(ctx, body.TrustDevice, errInvalidBackupCode,
		func(tx *store.Tx, userID string) error {
			if on, err := s.twoFactorOn(ctx, userID); err != nil {
				return err
			} else if !on {
				return errTwoFactorNotEnabled
			}
			return s.twoFactors.UseBackupCode(ctx, tx, userID, body.Code)
		})
	if request.FormdataBody != nil && body.CallbackURL != nil && !acceptsJSON(requestMetaFrom(ctx).Accept) {
		if loc, ok := secondStepRedirect(*body.CallbackURL, true, err); ok {
			return gen.VerifyBackupCode303Response{Headers: gen.VerifyBackupCode303ResponseHeaders{Location: &loc}}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return gen.VerifyBackupCode200JSONResponse{Body: res}, nil
}

// verifySecondFactor runs check (which returns identity.ErrWrongCode for a wrong code) for the
// user of the pending sign-in or, without one, for the signed-in caller, under the account
// throttle. A wrong code is wrong (errInvalidCode or errInvalidBackupCode), counted
// against the account and the pending sign-in; the pending sign-in's last allowed failure ends
// it. An accepted code of a pending sign-in uses it up, starts the session (and, with
// trustDevice, trusts the browser) in the same transaction.
func (s *Server) verifySecondFactor(ctx context.Context, trustDevice *bool, wrong *Error, check func(tx *store.Tx, userID string) error) (gen.AuthTwoFactorVerified, error) {
	p := PrincipalFrom(ctx)
	pendingHash, pending, err := s.twoFactors.PendingSignIn(requestOf(ctx))
	if err != nil && !errors.Is(err, identity.ErrNoPendingSignIn) {
		return gen.AuthTwoFactorVerified{}, err
	}
	var user store.User
	switch {
	case pendingHash == "" && p != nil && p.Kind == PrincipalUser:
		user = p.User
	case pendingHash == "":
		return gen.AuthTwoFactorVerified{}, errInvalidTwoFactorCookie
	default:
		if pending.Attempts >= identity.TwoFactorSignInAttempts {
			return gen.AuthTwoFactorVerified{}, s.endPendingSignIn(ctx, pendingHash)
		}
		if user, err = s.store.User(ctx, pending.UserID); err != nil {
			return gen.AuthTwoFactorVerified{}, err
		}
	}
	key := "two-factor:" + user.ID
	attempts, err := s.hit(ctx, throttleKey{s.accountThrottle, key})
	if err != nil {
		return gen.AuthTwoFactorVerified{}, err
	}
	var sess store.Session
	var token string
	var trust *http.Cookie
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := check(tx, user.ID); err != nil {
			return err
		}
		if pendingHash == "" {
			return nil
		}
		if err := tx.DeleteTwoFactorToken(ctx, store.TwoFactorSignIn, pendingHash); errors.Is(err, store.ErrNotFound) {
			return errInvalidTwoFactorCookie // used by a concurrent request meanwhile
		} else if err != nil {
			return err
		}
		var err error
		if sess, token, err = s.createSession(ctx, tx, user.ID, pending.RememberMe, nil, amrTwoFactors); err != nil {
			return err
		}
		if trustDevice != nil && *trustDevice {
			if trust, err = s.twoFactors.TrustDevice(ctx, tx, user.ID); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, identity.ErrWrongCode):
		if pendingHash != "" {
			return gen.AuthTwoFactorVerified{}, s.countPendingFailure(ctx, pendingHash, wrong)
		}
		return gen.AuthTwoFactorVerified{}, wrong
	case err != nil:
		s.undo(ctx, attempts...)
		return gen.AuthTwoFactorVerified{}, err
	}
	s.undo(ctx, attempts...)
	if err := s.accountThrottle.Reset(context.WithoutCancel(ctx), key); err != nil {
		s.log.WarnContext(ctx, "throttle: reset account", "err", err)
	}
	authUser, err := s.authUser(ctx, user)
	if err != nil {
		return gen.AuthTwoFactorVerified{}, err
	}
	if pendingHash == "" {
		return gen.AuthTwoFactorVerified{Token: p.SessionToken, User: authUser}, nil
	}
	setCookie(ctx, s.twoFactors.ExpiredTwoFactorCookie())
	s.setSessionCookie(ctx, token, sess.RememberMe)
	if trust != nil {
		setCookie(ctx, trust)
	}
	return gen.AuthTwoFactorVerified{Token: token, User: authUser}, nil
}

// countPendingFailure counts a wrong code against the pending sign-in under hash and returns
// wrong; the attempt after the last allowed failure ends the sign-in (verifySecondFactor).
func (s *Server) countPendingFailure(ctx context.Context, hash string, wrong *Error) error {
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.CountTwoFactorAttempt(ctx, hash)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errInvalidTwoFactorCookie
	case err != nil:
		return err
	}
	return wrong
}

// endPendingSignIn deletes the pending sign-in under hash and expires its cookie; it answers
// errTooManyCodeAttempts.
func (s *Server) endPendingSignIn(ctx context.Context, hash string) error {
	err := s.store.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteTwoFactorToken(ctx, store.TwoFactorSignIn, hash) })
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	setCookie(ctx, s.twoFactors.ExpiredTwoFactorCookie())
	return errTooManyCodeAttempts
}

// The second factors a pending sign-in can be completed with (twoFactorMethods): a TOTP or
// backup code, a passkey (verify-authentication with the pending sign-in's cookie).
const (
	methodTOTP    = "totp"
	methodPasskey = "passkey"
)

// secondStepDue decides, after user's password was accepted, whether the sign-in needs the
// second factor, and returns the methods the user can complete it with (none: not due).
//
// TOTP that is on makes it due on every sign-in, except on a trusted device of the user, whose
// trust it renews (a new token and cookie, the old token deleted) unless force (an OAuth
// request asked for acr urn:gatehouse:mfa). A passkey is a second factor only where one is
// required: force, or an organization of the user with requireTwoFactor (a user with passkeys
// and no TOTP otherwise signs in with the password alone, as better-auth's plugins do). When
// it is due, it records the pending sign-in and sets its cookie.
func (s *Server) secondStepDue(ctx context.Context, user store.User, remember, force bool) ([]string, error) {
	methods, err := s.secondFactorMethods(ctx, user.ID)
	if err != nil || len(methods) == 0 {
		return nil, err
	}
	totpOn := methods[0] == methodTOTP
	if !totpOn && !force {
		if required, err := s.store.TwoFactorRequiredOf(ctx, user.ID); err != nil || !required {
			return nil, err
		}
	}
	trustHash, trusted, err := s.twoFactors.TrustedDevice(requestOf(ctx))
	if err != nil && !errors.Is(err, identity.ErrNoPendingSignIn) {
		return nil, err
	}
	var cookie *http.Cookie
	due := true
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		cookie, due = nil, true
		if trustHash != "" && trusted.UserID == user.ID && !force {
			err := tx.DeleteTwoFactorToken(ctx, store.TwoFactorTrustDevice, trustHash)
			if err == nil {
				due = false
				cookie, err = s.twoFactors.TrustDevice(ctx, tx, user.ID)
				return err
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		var err error
		cookie, err = s.twoFactors.StartSignIn(ctx, tx, user.ID, remember)
		return err
	})
	if err != nil {
		return nil, err
	}
	setCookie(ctx, cookie)
	if !due {
		return nil, nil
	}
	// As better-auth does: the browser is signed out until the second step completes.
	s.expireSessionCookies(ctx)
	return methods, nil
}

// secondFactorMethods lists the second factors userID has: "totp" (first) when TOTP is on,
// "passkey" when they registered one.
func (s *Server) secondFactorMethods(ctx context.Context, userID string) ([]string, error) {
	var methods []string
	on, err := s.twoFactorOn(ctx, userID)
	if err != nil {
		return nil, err
	}
	if on {
		methods = append(methods, methodTOTP)
	}
	pks, err := s.store.PasskeysOf(ctx, userID)
	if err != nil {
		return nil, err
	}
	if len(pks) > 0 {
		methods = append(methods, methodPasskey)
	}
	return methods, nil
}

// twoFactorOn reports whether userID's second factor is on.
func (s *Server) twoFactorOn(ctx context.Context, userID string) (bool, error) {
	return identity.TwoFactorOn(ctx, s.store, userID)
}

// twoFactorRedirect is sign-in/email's answer when the second factor is due, with the methods
// that complete it.
func twoFactorRedirect(methods []string) (gen.SignInEmail200JSONResponse, error) {
	var body gen.SignInEmail200JSONResponseBody
	listed := make([]gen.AuthTwoFactorRedirectTwoFactorMethods, 0, len(methods))
	for _, m := range methods {
		listed = append(listed, gen.AuthTwoFactorRedirectTwoFactorMethods(m))
	}
	err := body.FromAuthTwoFactorRedirect(gen.AuthTwoFactorRedirect{TwoFactorRedirect: true, TwoFactorMethods: listed})
	return gen.SignInEmail200JSONResponse{Body: body}, err
}

// signedIn is sign-in/email's answer with a session.
func signedIn(res gen.AuthSignInResponse) (gen.SignInEmail200JSONResponse, error) {
	var body gen.SignInEmail200JSONResponseBody
	err := body.FromAuthSignInResponse(res)
	return gen.SignInEmail200JSONResponse{Body: body}, err
}
