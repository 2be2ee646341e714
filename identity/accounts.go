package identity

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Defaults of the password-hashing and sign-up limits.
const (
	DefaultPasswordHashWait = 2 * time.Second
	DefaultSignUpLimit      = 10
	// SignUpWindow is the window of the sign-up limit.
	SignUpWindow = time.Hour
)

// Password throttling. Password checks are counted in fixed 15-minute windows:
//
//   - per account — key "email:<normalised email>" at sign-in (whether or not the account
//     exists, so the throttle reveals nothing) and "user:<id>" at change-password — at most
//     AccountFailureLimit failures. Five guesses per quarter hour makes online guessing of one
//     account useless (under 500 a day) while a user who mistypes a few times is not stopped.
//     A successful check forgets the account's failures.
//   - per client IP — key "ip:<address>" at sign-in — at most IPFailureLimit failures, which
//     caps password spraying across many accounts from one address yet leaves room for an
//     office or campus behind one NAT address. Success does not reset it, so that an attacker
//     cannot clear it by signing in to an account of their own.
//
// Each attempt is counted before anything else, in one atomic step in the database (see
// Throttle), so neither parallel bursts nor replicas get past the limits; every outcome but a
// failed check — a wrong password, an unknown email, an account without a password — takes its
// count back: success, a refusal, an outage, hashing at capacity. Once a key reached its limit
// every attempt (a correct password too) is refused with 429 and Retry-After until its window
// ends; there is no permanent lockout. A refusal is cheap: no user lookup, no hash.
//
// Sign-up is counted per client IP (key "ip:<address>" of its own throttle): the sign-up limit
// per SignUpWindow, default 10 per hour; refused and failed-by-outage ones do not count.
const (
	AccountFailureLimit = 5
	IPFailureLimit      = 30
	FailureWindow       = 15 * time.Minute
)

// NewAccountThrottle returns the per-account (email or user id) failure throttle counting in
// st; now is its clock, nil meaning time.Now.
func NewAccountThrottle(st ThrottleStore, now func() time.Time) *Throttle {
	return NewThrottle(prefixedThrottleStore{st, "account:"}, AccountFailureLimit, FailureWindow, now)
}

// NewIPThrottle returns the per-client-IP failure throttle counting in st; now is its clock,
// nil meaning time.Now.
func NewIPThrottle(st ThrottleStore, now func() time.Time) *Throttle {
	return NewThrottle(prefixedThrottleStore{st, "sign-in:"}, IPFailureLimit, FailureWindow, now)
}

// NewSignUpThrottle returns the per-client-IP sign-up throttle counting in st: limit per
// SignUpWindow (DefaultSignUpLimit when limit < 1); now is its clock, nil meaning time.Now.
func NewSignUpThrottle(st ThrottleStore, limit int, now func() time.Time) *Throttle {
	if limit < 1 {
		limit = DefaultSignUpLimit
	}
	return NewThrottle(prefixedThrottleStore{st, "sign-up:"}, limit, SignUpWindow, now)
}

// prefixedThrottleStore gives each throttle its own key space in the one counter table.
type prefixedThrottleStore struct {
	ThrottleStore
	prefix string
}

func (p prefixedThrottleStore) HitThrottle(ctx context.Context, key string, window time.Duration, now time.Time) (store.ThrottleCount, error) {
	return p.ThrottleStore.HitThrottle(ctx, p.prefix+key, window, now)
}

func (p prefixedThrottleStore) UndoThrottleHit(ctx context.Context, key string, expiresAt time.Time) error {
	return p.ThrottleStore.UndoThrottleHit(ctx, p.prefix+key, expiresAt)
}

func (p prefixedThrottleStore) DeleteThrottle(ctx context.Context, key string) error {
	return p.ThrottleStore.DeleteThrottle(ctx, p.prefix+key)
}

// AccountsConfig is what NewAccounts needs.
type AccountsConfig struct {
	// SecretKey is the master key: the session cookie's signing key derives from it.
	SecretKey []byte
	// Secure is true when the base URL is https: __Host- cookie names and the Secure flag.
	Secure bool
	// Lifetimes are the sessions' idle and absolute lifetimes (zero fields take the defaults).
	Lifetimes SessionLifetimes
	// HashConcurrency argon2id computations run at once, each waiting at most HashWait for
	// room (DefaultPasswordHashWait when 0).
	HashConcurrency int
	HashWait        time.Duration
	// SignUpLimit is sign-ups per client IP per SignUpWindow (DefaultSignUpLimit when 0).
	SignUpLimit int
	// Social are the social sign-in providers, in button order.
	Social []*SocialProvider
}

// Accounts are the building blocks of sign-in that the /api/auth handlers and the OAuth
// provider share, built once by main: the sessions, the password-hashing bound, the throttles
// and the social providers.
type Accounts struct {
	Sessions Sessions
	// Passwords hashes and verifies passwords within the memory bound.
	Passwords *HashLimiter
	// AccountThrottle and IPThrottle count failed password checks per account and per client
	// IP; SignUpThrottle counts sign-ups per client IP. All live in the database, so replicas
	// share them.
	AccountThrottle, IPThrottle, SignUpThrottle *Throttle
	// Social are the configured social sign-in providers in button order.
	Social []*SocialProvider
}

// NewAccounts builds the accounts' building blocks over st.
func NewAccounts(st *store.Store, cfg AccountsConfig) *Accounts {
	wait := cfg.HashWait
	if wait <= 0 {
		wait = DefaultPasswordHashWait
	}
	return &Accounts{
		Sessions:        NewSessions(st, SessionCookieKey(cfg.SecretKey), cfg.Secure, cfg.Lifetimes),
		Passwords:       NewHashLimiter(max(1, cfg.HashConcurrency), wait),
		AccountThrottle: NewAccountThrottle(st, nil),
		IPThrottle:      NewIPThrottle(st, nil),
		SignUpThrottle:  NewSignUpThrottle(st, cfg.SignUpLimit, nil),
		Social:          cfg.Social,
	}
}
