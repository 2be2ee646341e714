package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Session lifetimes, as better-auth's defaults: a session lasts SessionTTL from its creation or
// last refresh; get-session extends it once it is SessionUpdateAge old, i.e. when less than
// SessionTTL−SessionUpdateAge remains.
const (
	SessionTTL       = 7 * 24 * time.Hour
	SessionUpdateAge = 24 * time.Hour
)

// ErrNoSession is FromRequest's answer for a request without a valid session: no cookie, an
// empty or badly signed one, or a token whose session is unknown or expired.
var ErrNoSession = errors.New("oauth: no session")

// Sessions is browser-session authentication over the store: reading the signed session
// cookie of a request, starting sessions and writing or clearing their cookie. The /api/auth
// handlers and the OAuth provider's sign-in, consent and logout pages share it, so that both
// see the same sessions. The zero value is not usable; build one with NewSessions.
type Sessions struct {
	store  *store.Store
	key    []byte
	name   string
	secure bool
}

// NewSessions returns the sessions of st whose cookie is named name (SessionCookieName) and
// signed with key (DeriveKey(master key, "session-cookie")); secure (an https base URL) adds
// the Secure attribute to the cookies it writes.
func NewSessions(st *store.Store, key []byte, name string, secure bool) Sessions {
	return Sessions{store: st, key: key, name: name, secure: secure}
}

// CookieName is the session cookie's name.
func (s Sessions) CookieName() string { return s.name }

// FromRequest returns the unexpired session of the request's signed session cookie, its user
// and the cookie's raw token. A request without one (no cookie, an empty value, a bad
// signature, an unknown or expired token) gets ErrNoSession; other errors are the store's.
func (s Sessions) FromRequest(r *http.Request) (store.Session, store.User, string, error) {
	ck, err := r.Cookie(s.name)
	if err != nil || ck.Value == "" {
		return store.Session{}, store.User{}, "", ErrNoSession
	}
	token, ok := VerifySignedToken(s.key, ck.Value)
	if !ok {
		return store.Session{}, store.User{}, "", ErrNoSession
	}
	sess, user, err := s.store.SessionByTokenHash(r.Context(), HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, store.User{}, "", ErrNoSession
	}
	if err != nil {
		return store.Session{}, store.User{}, "", err
	}
	return sess, user, token, nil
}

// Create starts a session inside tx from sess's UserID, RememberMe, IPAddress, UserAgent and
// ActiveOrganizationID, with a fresh token and an expiry SessionTTL from the store's clock. It
// returns the stored session and its raw token, which only the cookie and the response that
// starts the session ever carry; the store keeps HashToken of it.
func (s Sessions) Create(ctx context.Context, tx *store.Tx, sess store.Session) (store.Session, string, error) {
	token, err := NewSessionToken()
	if err != nil {
		return store.Session{}, "", err
	}
	sess.ID, sess.CreatedAt, sess.UpdatedAt = "", time.Time{}, time.Time{}
	sess.TokenHash = HashToken(token)
	sess.ExpiresAt = s.store.Now().Add(SessionTTL)
	if err := tx.CreateSession(ctx, &sess); err != nil {
		return store.Session{}, "", fmt.Errorf("oauth: create session: %w", err)
	}
	return sess, token, nil
}

// Cookie returns the signed session cookie for token (see SessionCookie): Max-Age SessionTTL
// when remember, else none, which makes a browser-session cookie.
func (s Sessions) Cookie(token string, remember bool) *http.Cookie {
	maxAge := time.Duration(0)
	if remember {
		maxAge = SessionTTL
	}
	return SessionCookie(s.name, CookieValue(s.key, token), maxAge, s.secure)
}

// ExpiredCookie returns the cookie that deletes the session cookie (see ExpiredCookie).
func (s Sessions) ExpiredCookie() *http.Cookie { return ExpiredCookie(s.name, s.secure) }
