package oauth

import (
	"sync"
	"time"
)

// MaxThrottleKeys bounds the number of keys a Throttle tracks. When a new key
// would exceed it, expired entries are dropped first and then, if still full,
// arbitrary ones, so memory stays bounded under a flood of distinct keys (at
// the price of forgetting some counts during such a flood).
const MaxThrottleKeys = 100_000

// Throttle counts failures per key (callers use "email:<address>" and
// "ip:<address>") in fixed windows: the first failure of a key opens a window
// of the configured length; once limit failures were recorded in it, Allow
// refuses the key until the window ends. Entries expire with their window, so
// there is never a permanent lockout. The state is in memory and per
// process: with N replicas an attacker gets at most N·limit attempts per
// window.
//
// A Throttle is safe for concurrent use.
type Throttle struct {
	limit   int
	window  time.Duration
	now     func() time.Time
	maxKeys int

	mu        sync.Mutex
	entries   map[string]throttleEntry
	nextSweep time.Time
}

type throttleEntry struct {
	failures int
	// until is when the window opened by the key's first failure ends.
	until time.Time
}

// NewThrottle returns a Throttle allowing limit failures per key per window.
// now is the clock (nil means time.Now). It panics if limit < 1 or
// window <= 0.
func NewThrottle(limit int, window time.Duration, now func() time.Time) *Throttle {
	if limit < 1 || window <= 0 {
		panic("oauth: new throttle: limit must be at least 1 and window positive")
	}
	if now == nil {
		now = time.Now
	}
	return &Throttle{
		limit:   limit,
		window:  window,
		now:     now,
		maxKeys: MaxThrottleKeys,
		entries: make(map[string]throttleEntry),
	}
}

// Allow reports whether key may make another attempt. When it may not,
// retryAfter is how long until its window ends (always > 0); otherwise it is
// 0. Allow records nothing: report the outcome with Fail or Reset.
func (t *Throttle) Allow(key string) (ok bool, retryAfter time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, found := t.entries[key]
	if !found {
		return true, 0
	}
	if !now.Before(e.until) {
		delete(t.entries, key)
		return true, 0
	}
	if e.failures < t.limit {
		return true, 0
	}
	return false, e.until.Sub(now)
}

// Fail records a failed attempt for key.
func (t *Throttle) Fail(key string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !now.Before(t.nextSweep) {
		t.sweep(now)
	}
	e, found := t.entries[key]
	if !found || !now.Before(e.until) {
		if !found && len(t.entries) >= t.maxKeys {
			t.makeRoom(now)
		}
		e = throttleEntry{until: now.Add(t.window)}
	}
	e.failures++
	t.entries[key] = e
}

// Reset forgets key's failures; call it after a successful attempt.
func (t *Throttle) Reset(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}

// sweep drops expired entries. Fail runs it at most once per window, so its
// cost (one pass over at most maxKeys entries) is amortised.
func (t *Throttle) sweep(now time.Time) {
	for k, e := range t.entries {
		if !now.Before(e.until) {
			delete(t.entries, k)
		}
	}
	t.nextSweep = now.Add(t.window)
}

// makeRoom frees space for a new key in a full map: expired entries first,
// then arbitrary ones (map order), down to 99% of maxKeys so that a flood
// does not pay for a full pass on every new key.
func (t *Throttle) makeRoom(now time.Time) {
	t.sweep(now)
	target := t.maxKeys - max(1, t.maxKeys/100)
	for k := range t.entries {
		if len(t.entries) <= target {
			break
		}
		delete(t.entries, k)
	}
}
