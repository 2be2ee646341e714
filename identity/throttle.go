package identity

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// ThrottleStore keeps a Throttle's counts; *store.Store implements it with one database row per
// key, so that every replica over the database shares them (see store.HitThrottle).
type ThrottleStore interface {
	HitThrottle(ctx context.Context, key string, window time.Duration, now time.Time) (store.ThrottleCount, error)
	UndoThrottleHit(ctx context.Context, key string, expiresAt time.Time) error
	DeleteThrottle(ctx context.Context, key string) error
	DeleteExpiredThrottles(ctx context.Context, now time.Time) (int64, error)
}

// ThrottleSweepInterval is how often, at most, a Throttle deletes expired counts (from a Hit).
const ThrottleSweepInterval = time.Minute

// Throttle counts attempts per key (callers use "email:<address>", "ip:<address>", …) in
// fixed windows: the first hit of a key opens a window of the configured length; an attempt is
// allowed while its hit is at most the limit-th of the window. Counts expire with their window,
// so there is never a permanent lockout, and expired ones are deleted (at most once per
// ThrottleSweepInterval per process), so the store holds only keys hit within the last window.
//
// Hit counts and checks in one atomic step in the shared store, so neither a burst of parallel
// attempts nor attempts spread over replicas get past the limit. An attempt that turns out not
// to count (it succeeded, or failed for a reason other than the caller's guess) is taken back
// with Attempt.Undo.
//
// A Throttle is safe for concurrent use.
type Throttle struct {
	store  ThrottleStore
	limit  int
	window time.Duration
	now    func() time.Time
	// nextSweep is when the next sweep is due, in Unix nanoseconds.
	nextSweep atomic.Int64
}

// NewThrottle returns a Throttle allowing limit hits per key per window, counted in st. now is
// the clock (nil means time.Now). It panics if st is nil, limit < 1 or window <= 0.
func NewThrottle(st ThrottleStore, limit int, window time.Duration, now func() time.Time) *Throttle {
	if st == nil || limit < 1 || window <= 0 {
		panic("identity: new throttle: need a store, a limit of at least 1 and a positive window")
	}
	if now == nil {
		now = time.Now
	}
	return &Throttle{store: st, limit: limit, window: window, now: now}
}

// Attempt is one hit of a key, as Hit counted it. The zero Attempt is allowed and its Undo does
// nothing.
type Attempt struct {
	t     *Throttle
	key   string
	count store.ThrottleCount
	at    time.Time
}

// Hit counts an attempt of key and reports through the Attempt whether it is within the limit.
// An error (the store failed) means nothing is known; callers refuse the attempt.
func (t *Throttle) Hit(ctx context.Context, key string) (Attempt, error) {
	now := t.now()
	count, err := t.store.HitThrottle(ctx, key, t.window, now)
	if err != nil {
		return Attempt{}, err
	}
	if next := t.nextSweep.Load(); now.UnixNano() >= next && t.nextSweep.CompareAndSwap(next, now.Add(ThrottleSweepInterval).UnixNano()) {
		// Opportunistic: a failed sweep is retried at the next interval.
		_, _ = t.store.DeleteExpiredThrottles(ctx, now)
	}
	return Attempt{t: t, key: key, count: count, at: now}, nil
}

// Allowed reports whether the attempt is within the limit of its window.
func (a Attempt) Allowed() bool { return a.t == nil || a.count.Hits <= a.t.limit }

// RetryAfter is how long until the attempt's window ends when it is not allowed (always > 0,
// never more than the window), and 0 when it is. A concurrent attempt that read the clock a
// little later may have opened the window, so its end can lie slightly more than one window
// after this attempt's clock reading; the answer is capped at the window.
func (a Attempt) RetryAfter() time.Duration {
	if a.Allowed() {
		return 0
	}
	return min(max(a.count.ExpiresAt.Sub(a.at), time.Nanosecond), a.t.window)
}

// Undo takes the attempt back: its key's count drops by one unless the window has ended since.
// Call it when the attempt must not count (it was refused anyway, it succeeded, or it failed for
// a reason that says nothing about the caller's guess, such as an outage).
func (a Attempt) Undo(ctx context.Context) error {
	if a.t == nil {
		return nil
	}
	return a.t.store.UndoThrottleHit(ctx, a.key, a.count.ExpiresAt)
}

// Reset forgets key's count; call it after a successful attempt on an account.
func (t *Throttle) Reset(ctx context.Context, key string) error {
	return t.store.DeleteThrottle(ctx, key)
}
