package identity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func newClock() *storetest.Clock {
	return storetest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

// checkHit hits key, checks the verdict, and takes the hit back when it was refused (as
// callers do: a refused attempt counts nothing).
func checkHit(t *testing.T, th *Throttle, key string, wantOK bool, wantRetry time.Duration) Attempt {
	t.Helper()
	a, err := th.Hit(context.Background(), key)
	if err != nil {
		t.Fatalf("Hit(%q): %v", key, err)
	}
	if a.Allowed() != wantOK || a.RetryAfter() != wantRetry {
		t.Errorf("Hit(%q) = %v, %v; want %v, %v", key, a.Allowed(), a.RetryAfter(), wantOK, wantRetry)
	}
	if !a.Allowed() {
		if err := a.Undo(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func openStore(t *testing.T) *store.Store { return storetest.Backends(t)[0].Open(t) }

func TestThrottleLimit(t *testing.T) {
	clock := newClock()
	th := NewThrottle(openStore(t), 3, 15*time.Minute, clock.Now)
	key := "email:ada@example.com"

	checkHit(t, th, key, true, 0)
	clock.Advance(time.Minute)
	checkHit(t, th, key, true, 0)
	clock.Advance(time.Minute)
	checkHit(t, th, key, true, 0)
	// A fourth attempt two minutes after the first: refused for the rest of the window.
	checkHit(t, th, key, false, 13*time.Minute)
	checkHit(t, th, "ip:192.0.2.1", true, 0)

	// Refused attempts (taken back) do not extend the window.
	clock.Advance(12*time.Minute + 59*time.Second)
	checkHit(t, th, key, false, time.Second)

	// The window ends: allowed again, counting from one.
	clock.Advance(time.Second)
	checkHit(t, th, key, true, 0)
	checkHit(t, th, key, true, 0)
	checkHit(t, th, key, true, 0)
	checkHit(t, th, key, false, 15*time.Minute)
}

func TestThrottleResetAndUndo(t *testing.T) {
	clock := newClock()
	th := NewThrottle(openStore(t), 2, time.Minute, clock.Now)
	ctx := context.Background()
	checkHit(t, th, "k", true, 0)
	checkHit(t, th, "k", true, 0)
	checkHit(t, th, "k", false, time.Minute)
	if err := th.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	checkHit(t, th, "k", true, 0)
	// An undone attempt does not count.
	a := checkHit(t, th, "k", true, 0)
	if err := a.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	checkHit(t, th, "k", true, 0)
	checkHit(t, th, "k", false, time.Minute)
	if err := th.Reset(ctx, "never seen"); err != nil { // no-op
		t.Error(err)
	}
	if err := (Attempt{}).Undo(ctx); err != nil || !(Attempt{}).Allowed() {
		t.Error("the zero Attempt is not an allowed no-op")
	}
}

// countingStore counts the sweeps of the store it wraps.
type countingStore struct {
	*store.Store
	sweeps atomic.Int32
}

func (c *countingStore) DeleteExpiredThrottles(ctx context.Context, now time.Time) (int64, error) {
	c.sweeps.Add(1)
	return c.Store.DeleteExpiredThrottles(ctx, now)
}

func TestThrottleSweep(t *testing.T) {
	clock := newClock()
	st := &countingStore{Store: openStore(t)}
	th := NewThrottle(st, 5, time.Minute, clock.Now)
	for i := range 100 {
		checkHit(t, th, "ip:"+string(rune('a'+i%26))+string(rune('a'+i/26)), true, 0)
	}
	if n := st.sweeps.Load(); n != 1 {
		t.Fatalf("%d sweeps within one interval, want 1", n)
	}
	clock.Advance(ThrottleSweepInterval)
	checkHit(t, th, "ip:new", true, 0) // an interval later: the sweep drops the expired keys
	if n := st.sweeps.Load(); n != 2 {
		t.Fatalf("%d sweeps, want 2", n)
	}
	if _, err := st.ThrottleCountOf(context.Background(), "ip:aa"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired key survived the sweep: %v", err)
	}
	if c, err := st.ThrottleCountOf(context.Background(), "ip:new"); err != nil || c.Hits != 1 {
		t.Errorf("ip:new = %+v, %v", c, err)
	}
}

// TestThrottleConcurrent: a burst of parallel attempts on one key gets exactly limit through.
func TestThrottleConcurrent(t *testing.T) {
	th := NewThrottle(openStore(t), 10, time.Hour, nil)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			a, err := th.Hit(context.Background(), "ip:192.0.2.7")
			if err != nil {
				t.Error(err)
				return
			}
			if a.Allowed() {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Errorf("%d of 40 parallel attempts allowed, want 10", n)
	}
}

func TestNewThrottlePanics(t *testing.T) {
	st := openStore(t)
	for _, tc := range []struct {
		st     ThrottleStore
		limit  int
		window time.Duration
	}{{st, 0, time.Minute}, {st, 1, 0}, {st, -1, -time.Second}, {nil, 1, time.Minute}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewThrottle(%v, %d, %v) did not panic", tc.st != nil, tc.limit, tc.window)
				}
			}()
			NewThrottle(tc.st, tc.limit, tc.window, nil)
		}()
	}
}

// TestThrottleRetryAfterCappedAtWindow: an attempt whose clock reading is a little older than
// the one that opened the window (concurrent requests) still answers at most one window, never
// 901 s for a 15-minute window (seen in a burst under load).
func TestThrottleRetryAfterCappedAtWindow(t *testing.T) {
	st := openStore(t)
	opener := newClock()
	opener.Advance(time.Second)
	first := NewThrottle(st, 1, 15*time.Minute, opener.Now)
	checkHit(t, first, "ip:192.0.2.1", true, 0)
	late := NewThrottle(st, 1, 15*time.Minute, newClock().Now) // read the clock a second earlier
	checkHit(t, late, "ip:192.0.2.1", false, 15*time.Minute)
}
