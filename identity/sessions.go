package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Session lifetime defaults. A session ends at the first of two limits:
//
//   - idle: it expires SessionLifetimes.Idle after it was started or last extended. get-session
//     extends it (sliding expiry, as better-auth's expiresIn) once the extension gains at least
//     the update age (better-auth's updateAge), so a session unused for longer than the idle
//     timeout expires, while one used at least every idle−updateAge never expires idle;
//   - absolute: it ends SessionLifetimes.Absolute after it was created, however active; no
//     extension pushes its expiry past that deadline, and lookups refuse a session past it even
//     when its stored expiry is later (one stored before the limit existed or was lowered).
//
// The defaults: 7 days idle (better-auth's expiresIn, which was the only limit before), 30 days
// absolute, and an update age of one day (better-auth's), or a seventh of the idle timeout when
// that is shorter.
const (
	DefaultSessionIdleTimeout      = 7 * 24 * time.Hour
	DefaultSessionAbsoluteLifetime = 30 * 24 * time.Hour
	SessionUpdateAge               = 24 * time.Hour
)

// SessionLifetimes are the limits of a session's life; a zero field means its default
// (DefaultSessionIdleTimeout, DefaultSessionAbsoluteLifetime). See DefaultSessionIdleTimeout.
type SessionLifetimes struct {
	// Idle is how long a session lives after it was started or last extended.
	Idle time.Duration
	// Absolute is how long a session lives after it was created, whatever its activity.
	Absolute time.Duration
}

// withDefaults fills in the zero fields.
func (l SessionLifetimes) withDefaults() SessionLifetimes {
	if l.Idle <= 0 {
		l.Idle = DefaultSessionIdleTimeout
	}
	if l.Absolute <= 0 {
		l.Absolute = DefaultSessionAbsoluteLifetime
	}
	return l
}

// UpdateAge is how much an extension must gain before get-session writes it: SessionUpdateAge,
// or Idle/7 when that is shorter, so that a short idle timeout still slides.
func (l SessionLifetimes) UpdateAge() time.Duration {
	return min(SessionUpdateAge, l.withDefaults().Idle/7)
}

// ErrNoSession is FromRequest's answer for a request without a valid session: no cookie, an
// empty or badly signed one, or a token whose session is unknown, expired or past its absolute
// lifetime.
var ErrNoSession = errors.New("identity: no session")

// Sessions is browser-session authentication over the store: reading the signed session
// cookie of a request, starting and extending sessions and writing or clearing their cookie.
// The /api/auth handlers and the OAuth provider's sign-in, consent and logout pages share it,
// so that both see the same sessions. The zero value is not usable; build one with NewSessions.
type Sessions struct {
	store  *store.Store
	key    []byte
	secure bool
	life   SessionLifetimes
}

// NewSessions returns the sessions of st whose cookie is signed with key (DeriveKey(master key,
// "session-cookie")) and named SessionCookieName(secure); secure (an https base URL) adds the
// Secure attribute and, for one release, still reads the older __Secure- name (see
// LegacySessionCookieName). life's zero fields take their defaults.
func NewSessions(st *store.Store, key []byte, secure bool, life SessionLifetimes) Sessions {
	return Sessions{store: st, key: key, secure: secure, life: life.withDefaults()}
}

// CookieName is the session cookie's name, SessionCookieName(secure).
func (s Sessions) CookieName() string { return SessionCookieName(s.secure) }

// Lifetimes returns the session limits in force, defaults filled in.
func (s Sessions) Lifetimes() SessionLifetimes { return s.life }

// Deadline is when sess ends whatever its activity: its CreatedAt plus the absolute lifetime.
func (s Sessions) Deadline(sess store.Session) time.Time { return sess.CreatedAt.Add(s.life.Absolute) }

// cookie returns the request's session cookie: the current name's, or when there is none (or
// it is empty) the legacy name's under https. ok is false when there is neither.
func (s Sessions) cookie(r *http.Request) (*http.Cookie, bool) {
	if ck, err := r.Cookie(s.CookieName()); err == nil && ck.Value != "" {
		return ck, true
	}
	if legacy := LegacySessionCookieName(s.secure); legacy != "" {
		if ck, err := r.Cookie(legacy); err == nil && ck.Value != "" {
			return ck, true
		}
	}
	return nil, false
}

// HasCookie reports whether r carries a session cookie under a name FromRequest reads, valid,
// empty or not (the CSRF check treats such a request as cookie-authenticated).
func (s Sessions) HasCookie(r *http.Request) bool {
	for _, name := range []string{s.CookieName(), LegacySessionCookieName(s.secure)} {
		if _, err := r.Cookie(name); name != "" && err == nil {
			return true
		}
	}
	return false
}

// FromRequest returns the live session of the request's signed session cookie, its user and
// the cookie's raw token. A request without one (no cookie, an empty value, a bad signature,
// an unknown or expired token, a session past its absolute lifetime) gets ErrNoSession; other
// errors are the store's.
func (s Sessions) FromRequest(r *http.Request) (store.Session, store.User, string, error) {
	ck, ok := s.cookie(r)
	if !ok {
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
	// The store checks the stored expiry; a session stored before the absolute limit existed,
	// or before it was lowered, may expire later than its deadline.
	if !s.store.Now().Before(s.Deadline(sess)) {
		return store.Session{}, store.User{}, "", ErrNoSession
	}
	return sess, user, token, nil
}

// Create starts a session inside tx from sess's UserID, RememberMe, IPAddress, UserAgent and
// ActiveOrganizationID, with a fresh token, created now (the store's clock) and expiring after
// the idle timeout or the absolute lifetime, whichever is shorter. It returns the stored
// session and its raw token, which only the cookie and the response that starts the session
// ever carry; the store keeps HashToken of it.
func (s Sessions) Create(ctx context.Context, tx *store.Tx, sess store.Session) (store.Session, string, error) {
	token, err := NewSessionToken()
	if err != nil {
		return store.Session{}, "", err
	}
	now := s.store.Now()
	sess.ID, sess.CreatedAt, sess.UpdatedAt = "", now, now
	sess.TokenHash = HashToken(token)
	sess.ExpiresAt = now.Add(min(s.life.Idle, s.life.Absolute))
	if err := tx.CreateSession(ctx, &sess); err != nil {
		return store.Session{}, "", fmt.Errorf("identity: create session: %w", err)
	}
	return sess, token, nil
}

// Refresh is get-session's sliding expiry. It extends sess to the idle timeout from now,
// capped at its Deadline, when that gains at least the update age or reaches the deadline,
// and returns the extended session with its cookie for token (see CookieUntil). When there is
// nothing to extend it returns sess and a nil cookie without writing. A session deleted
// meanwhile (signed out by another request) is ErrNoSession; other errors are the store's.
func (s Sessions) Refresh(ctx context.Context, sess store.Session, token string) (store.Session, *http.Cookie, error) {
	now := s.store.Now()
	deadline := s.Deadline(sess)
	expires := now.Add(s.life.Idle)
	if !expires.Before(deadline) {
		expires = deadline
	}
	gain := expires.Sub(sess.ExpiresAt)
	if gain <= 0 || (gain < s.life.UpdateAge() && !expires.Equal(deadline)) {
		return sess, nil, nil
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error { return tx.ExtendSession(ctx, sess.ID, expires) })
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, nil, ErrNoSession
	}
	if err != nil {
		return store.Session{}, nil, fmt.Errorf("identity: refresh session: %w", err)
	}
	sess.ExpiresAt, sess.UpdatedAt = expires.UTC().Truncate(time.Microsecond), now.UTC().Truncate(time.Microsecond)
	return sess, s.CookieUntil(token, sess.RememberMe, sess.ExpiresAt), nil
}

// Cookie returns the signed session cookie for the token of a session starting now (see
// Create): Max-Age the shorter of the idle timeout and the absolute lifetime when remember,
// else none, which makes a browser-session cookie.
func (s Sessions) Cookie(token string, remember bool) *http.Cookie {
	maxAge := time.Duration(0)
	if remember {
		maxAge = min(s.life.Idle, s.life.Absolute)
	}
	return SessionCookie(s.CookieName(), CookieValue(s.key, token), maxAge, s.secure)
}

// CookieUntil returns the signed session cookie for token (see SessionCookie) of a session
// expiring at expires: Max-Age the whole seconds until then, rounded up, when remember, else
// none, which makes a browser-session cookie. A remembered session that has already expired
// gets the deleting cookie.
func (s Sessions) CookieUntil(token string, remember bool, expires time.Time) *http.Cookie {
	maxAge := time.Duration(0)
	if remember {
		left := expires.Sub(s.store.Now())
		if left <= 0 {
			return s.ExpiredCookie()
		}
		maxAge = (left + time.Second - 1).Truncate(time.Second)
	}
	return SessionCookie(s.CookieName(), CookieValue(s.key, token), maxAge, s.secure)
}

// ExpiredCookie returns the cookie that deletes the session cookie (see ExpiredCookie).
func (s Sessions) ExpiredCookie() *http.Cookie { return ExpiredCookie(s.CookieName(), s.secure) }

// ExpiredCookies returns the cookies that delete every session cookie FromRequest reads: the
// current name's and, under https, the legacy name's.
func (s Sessions) ExpiredCookies() []*http.Cookie {
	out := []*http.Cookie{s.ExpiredCookie()}
	if legacy := LegacySessionCookieName(s.secure); legacy != "" {
		out = append(out, ExpiredCookie(legacy, s.secure))
	}
	return out
}

// SessionCookieKey is the key session cookies are signed with: DeriveKey(master, "session-cookie").
func SessionCookieKey(master []byte) []byte { return seal.DeriveKey(master, "session-cookie") }
