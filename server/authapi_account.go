package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oapi-codegen/nullable"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Email and password accounts and browser sessions under /api/auth, wire-compatible with the
// better-auth client: sign-up, sign-in, sign-out, get-session (sliding expiry), the session list
// and revocation, password change and profile update.

// Password throttling: see identity.NewAccountThrottle and its siblings for what is counted,
// per which key and for how long.

// Errors of the account routes, with better-auth's codes and messages.
var (
	errInvalidCredentials = authError(http.StatusUnauthorized, kindUnauthorized,
		"INVALID_EMAIL_OR_PASSWORD", "Invalid email or password")
	errUserExists = authError(http.StatusUnprocessableEntity, kindClientError,
		"USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", "User already exists. Use another email.")
	errInvalidPassword = authError(http.StatusBadRequest, kindClientError,
		"INVALID_PASSWORD", "Invalid password")
	errNoCredentialAccount = authError(http.StatusBadRequest, kindClientError,
		"CREDENTIAL_ACCOUNT_NOT_FOUND", "Credential account not found")
	errInvalidCallbackURL = authError(http.StatusForbidden, kindForbidden,
		"INVALID_CALLBACK_URL", "Invalid callbackURL")
	errSessionNotFound = authError(http.StatusNotFound, kindNotFound,
		"SESSION_NOT_FOUND", "Session not found")
)

// tooManyAttempts is the 429 for a throttled key, with Retry-After in whole seconds (rounded
// up, at least 1).
func tooManyAttempts(retryAfter time.Duration) *Error {
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	return &Error{Status: http.StatusTooManyRequests, Kind: kindClientError, Title: "Too many requests",
		Code: "TOO_MANY_REQUESTS", Message: "Too many failed attempts; try again later",
		Header: http.Header{"Retry-After": {strconv.Itoa(secs)}}}
}

// hashingBusy is the 503 for a request that found password hashing at capacity (see
// identity.HashLimiter): a transient overload, retried after the limiter's wait.
func (s *Server) hashingBusy() *Error {
	secs := max(1, int((s.hashLimiter.Wait()+time.Second-1)/time.Second))
	return &Error{Status: http.StatusServiceUnavailable, Kind: kindUnavailable, Title: titleUnavailable,
		Header: http.Header{"Retry-After": {strconv.Itoa(secs)}}}
}

// hashErr maps identity.ErrHashBusy to the 503 and returns any other error unchanged.
func (s *Server) hashErr(err error) error {
	if errors.Is(err, identity.ErrHashBusy) {
		return s.hashingBusy()
	}
	return err
}

// undo takes back throttle attempts that must not count. It runs even when the request's
// context is done (the client left) and only logs a failure: the attempt's outcome is decided.
func (s *Server) undo(ctx context.Context, attempts ...identity.Attempt) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, a := range attempts {
		if err := a.Undo(uctx); err != nil {
			s.log.WarnContext(ctx, "throttle: undo attempt", "err", err)
		}
	}
}

// hit counts one attempt on each throttle key. When any key is over its limit, it takes them
// all back and returns the 429 with the longest wait; when the store fails, it takes back those
// counted and returns the error.
func (s *Server) hit(ctx context.Context, keys ...throttleKey) ([]identity.Attempt, error) {
	attempts := make([]identity.Attempt, 0, len(keys))
	var wait time.Duration
	for _, k := range keys {
		a, err := k.t.Hit(ctx, k.key)
		if err != nil {
			s.undo(ctx, attempts...)
			return nil, err
		}
		attempts = append(attempts, a)
		wait = max(wait, a.RetryAfter())
	}
	if wait > 0 {
		for i, a := range attempts {
			if !a.Allowed() {
				s.metrics.throttleRefused(s.throttleKind(keys[i].t))
			}
		}
		s.undo(ctx, attempts...)
		return nil, tooManyAttempts(wait)
	}
	return attempts, nil
}

// jsonOrForm returns whichever of a JSON and a form-encoded body the request carried.
func jsonOrForm[T any](jsonBody, formBody *T) (*T, error) {
	switch {
	case jsonBody != nil:
		return jsonBody, nil
	case formBody != nil:
		return formBody, nil
	}
	return nil, Validation(FieldError{Path: []string{"body"}, Message: "is required"})
}

// SignInEmail checks an email and password and starts a new session.
func (s *Server) SignInEmail(ctx context.Context, request gen.SignInEmailRequestObject) (gen.SignInEmailResponseObject, error) {
	body, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	noStore(ctx)
	if err := s.checkCallbackURL(body.CallbackURL); err != nil {
		return nil, err
	}
	// A browser's form post with a callbackURL (the provider's sign-in page) is answered with
	// 303 redirects: to the callbackURL, or back to it with login_error on failure.
	browser := request.FormdataBody != nil && body.CallbackURL != nil && !acceptsJSON(requestMetaFrom(ctx).Accept)
	user, err := s.checkEmailPassword(ctx, string(body.Email), body.Password)
	if err == nil {
		err = s.requireVerifiedEmail(ctx, user, body.CallbackURL)
	}
	if err != nil {
		if browser {
			if code := signInErrorCode(err); code != "" {
				loc := signInRetryURL(*body.CallbackURL, code, string(body.Email))
				return gen.SignInEmail303Response{Headers: gen.SignInEmail303ResponseHeaders{Location: &loc}}, nil
			}
		}
		return nil, err
	}
	forceSecond := body.CallbackURL != nil && oauth.WantsMultiFactor(*body.CallbackURL)
	if methods, err := s.secondStepDue(ctx, user, rememberMe(body.RememberMe), forceSecond); err != nil {
		return nil, err
	} else if len(methods) > 0 {
		if browser {
			loc := twoFactorPageURL(*body.CallbackURL, false, "")
			return gen.SignInEmail303Response{Headers: gen.SignInEmail303ResponseHeaders{Location: &loc}}, nil
		}
		return twoFactorRedirect(methods)
	}
	var sess store.Session
	var token string
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		sess, token, err = s.createSession(ctx, tx, user.ID, rememberMe(body.RememberMe), nil, amrPassword)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.setSessionCookie(ctx, token, sess.RememberMe)
	if browser {
		return s.signedInRedirect(ctx, user.ID, *body.CallbackURL)
	}
	authUser, err := s.authUser(ctx, user)
	if err != nil {
		return nil, err
	}
	// better-auth answers redirect: true with the callbackURL as url, which its client follows.
	return signedIn(gen.AuthSignInResponse{
		Redirect: body.CallbackURL != nil, Token: token, Url: nullableOf(body.CallbackURL), User: authUser})
}

// SignOut deletes the caller's session, if any, and expires the cookie.
func (s *Server) SignOut(ctx context.Context, _ gen.SignOutRequestObject) (gen.SignOutResponseObject, error) {
	noStore(ctx)
	if p := PrincipalFrom(ctx); p != nil {
		err := s.store.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteSession(ctx, p.Session.ID) })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	s.expireSessionCookies(ctx)
	return gen.SignOut200JSONResponse{Body: gen.AuthSuccess{Success: true}}, nil
}

// GetSession returns the caller's session and user, or null when signed out. Unless
// disableRefresh is true it slides the session's expiry (see identity.Sessions.Refresh): once that
// gains the update age (a day by default) it extends it to the idle timeout from now, never past
// its absolute deadline, and sets the cookie again with a Max-Age that follows the new expiry.
func (s *Server) GetSession(ctx context.Context, request gen.GetSessionRequestObject) (gen.GetSessionResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	if p == nil {
		return jsonNull{}, nil
	}
	sess := p.Session
	if disable := request.Params.DisableRefresh != nil && isTrue(*request.Params.DisableRefresh); !disable {
		refreshed, cookie, err := s.sessions.Refresh(ctx, sess, p.SessionToken)
		if errors.Is(err, identity.ErrNoSession) {
			// Signed out by another request meanwhile.
			return jsonNull{}, nil
		}
		if err != nil {
			return nil, err
		}
		if cookie != nil {
			sess = refreshed
			setCookie(ctx, cookie)
		}
	}
	user, err := s.authUser(ctx, p.User)
	if err != nil {
		return nil, err
	}
	return gen.GetSession200JSONResponse{Session: toAuthSession(sess, p.SessionToken), User: user}, nil
}

// ListSessions lists the caller's unexpired sessions, newest first. Only the caller's own
// session carries its token; the others carry their id, which revoke-session accepts.
func (s *Server) ListSessions(ctx context.Context, _ gen.ListSessionsRequestObject) (gen.ListSessionsResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	sessions, err := s.store.ListSessions(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	out := make(gen.ListSessions200JSONResponse, len(sessions))
	for i, sess := range sessions {
		handle := sess.ID
		if sess.ID == p.Session.ID {
			handle = p.SessionToken
		}
		out[i] = toAuthSession(sess, handle)
	}
	return out, nil
}

// RevokeSession deletes one of the caller's sessions, named by its token or its id. Revoking
// the current session also expires the cookie.
func (s *Server) RevokeSession(ctx context.Context, request gen.RevokeSessionRequestObject) (gen.RevokeSessionResponseObject, error) {
	p := PrincipalFrom(ctx)
	target := request.Body.Token
	if target == p.SessionToken {
		target = p.Session.ID
	} else if !strings.HasPrefix(target, "ses_") {
		// A raw token: find its session. Another user's session is not found.
		sess, _, err := s.store.SessionByTokenHash(ctx, identity.HashToken(target))
		switch {
		case errors.Is(err, store.ErrNotFound), err == nil && sess.UserID != p.ID():
			return nil, errSessionNotFound
		case err != nil:
			return nil, err
		}
		target = sess.ID
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteSessionByUser(ctx, p.ID(), target) })
	if errors.Is(err, store.ErrNotFound) {
		return nil, errSessionNotFound
	}
	if err != nil {
		return nil, err
	}
	if target == p.Session.ID {
		s.expireSessionCookies(ctx)
	}
	return gen.RevokeSession200JSONResponse{Status: true}, nil
}

// RevokeOtherSessions deletes every session of the caller but the current one.
func (s *Server) RevokeOtherSessions(ctx context.Context, _ gen.RevokeOtherSessionsRequestObject) (gen.RevokeOtherSessionsResponseObject, error) {
	p := PrincipalFrom(ctx)
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		n, err := tx.DeleteOtherSessions(ctx, p.ID(), p.Session.ID)
		if err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "session.revoke_others", TargetType: "user", TargetID: p.ID(),
			Metadata: map[string]any{"revokedSessions": n}})
	})
	if err != nil {
		return nil, err
	}
	return gen.RevokeOtherSessions200JSONResponse{Status: true}, nil
}

// ChangePassword checks the current password, stores the new one, ends every session of the
// user and starts a new one for the caller (a new cookie). With revokeOtherSessions (the user's
// "sign out everywhere"), the OAuth grants the user gave end too, in the same transaction:
// refresh tokens stop working and their access tokens introspect inactive; consents stay, so
// signing in to the same applications again does not ask again (docs/security.md, "What survives what").
func (s *Server) ChangePassword(ctx context.Context, request gen.ChangePasswordRequestObject) (gen.ChangePasswordResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	if err := s.checkCurrentPassword(ctx, p.ID(), request.Body.CurrentPassword); err != nil {
		return nil, err
	}
	hash, err := s.hashLimiter.HashPassword(ctx, request.Body.NewPassword)
	if err != nil {
		return nil, s.hashErr(err)
	}
	var sess store.Session
	var token string
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.SetPassword(ctx, p.ID(), hash); err != nil {
			return err
		}
		n, err := tx.DeleteOtherSessions(ctx, p.ID(), "")
		if err != nil {
			return err
		}
		metadata := map[string]any{"revokedSessions": n}
		if request.Body.RevokeOtherSessions != nil && *request.Body.RevokeOtherSessions {
			r, err := tx.RevokeUserOAuthGrants(ctx, p.ID(), true)
			if err != nil {
				return err
			}
			metadata["revokedRefreshTokens"], metadata["revokedAccessTokens"] = r.RefreshTokens, r.AccessTokens
		}
		if sess, token, err = s.createSession(ctx, tx, p.ID(), p.Session.RememberMe, p.Session.ActiveOrganizationID, p.Session.AMR); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.password_change", TargetType: "user", TargetID: p.ID(),
			Metadata: metadata})
	})
	if err != nil {
		return nil, err
	}
	s.setSessionCookie(ctx, token, sess.RememberMe)
	user, err := s.authUser(ctx, p.User)
	if err != nil {
		return nil, err
	}
	return gen.ChangePassword200JSONResponse{Body: gen.AuthSignUpResponse{
		Token: nullable.NewNullableWithValue(token), User: user}}, nil
}

// UpdateUser changes the caller's name and/or picture (image null removes it).
func (s *Server) UpdateUser(ctx context.Context, request gen.UpdateUserRequestObject) (gen.UpdateUserResponseObject, error) {
	p := PrincipalFrom(ctx)
	var image **string
	if request.Body.Image.IsSpecified() {
		var v *string
		if img, err := request.Body.Image.Get(); err == nil {
			v = &img
		}
		image = &v
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.UpdateUser(ctx, p.ID(), request.Body.Name, image)
		return err
	})
	if err != nil {
		return nil, err
	}
	return gen.UpdateUser200JSONResponse{Status: true}, nil
}

// checkEmailPassword returns the user whose email and password these are. Unknown emails,
// accounts without a password and wrong passwords are the same errInvalidCredentials, after a
// comparable amount of hashing, and are the only outcomes that count against the email's and the
// IP's throttles; throttled keys are refused before any lookup.
func (s *Server) checkEmailPassword(ctx context.Context, email, password string) (store.User, error) {
	emailKey := "email:" + store.NormalizeEmail(email)
	attempts, err := s.hit(ctx, throttleKey{s.accountThrottle, emailKey},
		throttleKey{s.ipThrottle, "ip:" + requestMetaFrom(ctx).IP})
	if err != nil {
		return store.User{}, err
	}
	user, err := s.verifyEmailPassword(ctx, email, password)
	switch {
	case errors.Is(err, errInvalidCredentials):
		// A failed guess: both counts stand.
	case err != nil:
		s.undo(ctx, attempts...)
	default:
		s.undo(ctx, attempts[1])
		if err := s.accountThrottle.Reset(context.WithoutCancel(ctx), emailKey); err != nil {
			s.log.WarnContext(ctx, "throttle: reset account", "err", err)
		}
	}
	return user, err
}

// verifyEmailPassword is checkEmailPassword without the throttles.
func (s *Server) verifyEmailPassword(ctx context.Context, email, password string) (store.User, error) {
	user, hash, err := s.store.UserByEmail(ctx, email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.User{}, err
	}
	if hash == "" {
		if err := s.hashLimiter.VerifyDummy(ctx, password); err != nil {
			return store.User{}, s.hashErr(err)
		}
		return store.User{}, errInvalidCredentials
	}
	ok, err := s.hashLimiter.VerifyPassword(ctx, hash, password)
	if err != nil {
		if errors.Is(err, identity.ErrHashBusy) {
			return store.User{}, s.hashingBusy()
		}
		return store.User{}, fmt.Errorf("server: sign-in: user %s: %w", user.ID, err)
	}
	if !ok {
		return store.User{}, errInvalidCredentials
	}
	return user, nil
}

// checkCurrentPassword checks the signed-in user's password, throttled per user id like
// sign-in is per email: only a wrong password counts.
func (s *Server) checkCurrentPassword(ctx context.Context, userID, password string) error {
	key := "user:" + userID
	attempts, err := s.hit(ctx, throttleKey{s.accountThrottle, key})
	if err != nil {
		return err
	}
	err = s.verifyCurrentPassword(ctx, userID, password)
	switch {
	case errors.Is(err, errInvalidPassword):
	case err != nil:
		s.undo(ctx, attempts...)
	default:
		if err := s.accountThrottle.Reset(context.WithoutCancel(ctx), key); err != nil {
			s.log.WarnContext(ctx, "throttle: reset account", "err", err)
		}
	}
	return err
}

func (s *Server) verifyCurrentPassword(ctx context.Context, userID, password string) error {
	hash, err := s.store.PasswordHash(ctx, userID)
	if err != nil {
		return err
	}
	if hash == "" {
		return errNoCredentialAccount
	}
	ok, err := s.hashLimiter.VerifyPassword(ctx, hash, password)
	if err != nil {
		if errors.Is(err, identity.ErrHashBusy) {
			return s.hashingBusy()
		}
		return fmt.Errorf("server: change password: user %s: %w", userID, err)
	}
	if !ok {
		return errInvalidPassword
	}
	return nil
}

// throttleKey is one key of one throttle.
type throttleKey struct {
	t   *identity.Throttle
	key string
}

// createSession starts a session for userID (see identity.Sessions.Create), recording the
// request's IP and user agent and amr, how the user signed in. It returns the session and its
// raw token.
func (s *Server) createSession(ctx context.Context, tx *store.Tx, userID string, remember bool, activeOrg *string, amr []string) (store.Session, string, error) {
	meta := requestMetaFrom(ctx)
	return s.sessions.Create(ctx, tx, store.Session{
		UserID:               userID,
		RememberMe:           remember,
		IPAddress:            meta.IP,
		UserAgent:            meta.UserAgent,
		ActiveOrganizationID: activeOrg,
		AMR:                  amr,
	})
}

// setSessionCookie sets the signed session cookie for the token of a session started now:
// Max-Age its lifetime (see identity.Sessions.Cookie), or none (a browser-session cookie) when
// the user chose not to be remembered.
func (s *Server) setSessionCookie(ctx context.Context, token string, remember bool) {
	setCookie(ctx, s.sessions.Cookie(token, remember))
}

// expireSessionCookies deletes the session cookie, under every name the server reads.
func (s *Server) expireSessionCookies(ctx context.Context) {
	for _, c := range s.sessions.ExpiredCookies() {
		setCookie(ctx, c)
	}
}

// rememberMe is the body's rememberMe, true when absent.
func rememberMe(v *bool) bool { return v == nil || *v }

// isTrue reports whether a query flag is set ("true", "1", …).
func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// noStore forbids caching of a response that carries a session or its token.
func noStore(ctx context.Context) { setResponseHeader(ctx, "Cache-Control", "no-store") }

// toAuthUser is a user in better-auth's wire form.
func toAuthUser(u store.User, twoFactorEnabled bool) gen.AuthUser {
	return gen.AuthUser{
		Id:               u.ID,
		Name:             u.Name,
		Email:            openapi_types.Email(u.Email),
		EmailVerified:    u.EmailVerified,
		Image:            nullableOf(u.Image),
		TwoFactorEnabled: twoFactorEnabled,
		CreatedAt:        u.CreatedAt.UTC(),
		UpdatedAt:        u.UpdatedAt.UTC(),
	}
}

// authUser is u in better-auth's wire form, with twoFactorEnabled read from the store (whether
// u's TOTP factor is on, as better-auth's twoFactor plugin keeps it on the user).
func (s *Server) authUser(ctx context.Context, u store.User) (gen.AuthUser, error) {
	on, err := s.twoFactorOn(ctx, u.ID)
	return toAuthUser(u, on), err
}

// toAuthSession is a session in better-auth's wire form; token is the raw token for the
// caller's own session and the session id for any other.
func toAuthSession(sess store.Session, token string) gen.AuthSession {
	return gen.AuthSession{
		Id:                   sess.ID,
		Token:                token,
		UserId:               sess.UserID,
		ExpiresAt:            sess.ExpiresAt.UTC(),
		CreatedAt:            sess.CreatedAt.UTC(),
		UpdatedAt:            sess.UpdatedAt.UTC(),
		IpAddress:            sess.IPAddress,
		UserAgent:            sess.UserAgent,
		ActiveOrganizationId: nullableOf(sess.ActiveOrganizationID),
	}
}
