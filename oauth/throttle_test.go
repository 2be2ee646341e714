package oauth

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func checkAllow(t *testing.T, th *Throttle, key string, wantOK bool, wantRetry time.Duration) {
	t.Helper()
	ok, retry := th.Allow(key)
	if ok != wantOK || retry != wantRetry {
		t.Errorf("Allow(%q) = %v, %v; want %v, %v", key, ok, retry, wantOK, wantRetry)
	}
}

func TestThrottleLimit(t *testing.T) {
	clock := newClock()
	th := NewThrottle(3, 15*time.Minute, clock.Now)
	key := "email:ada@example.com"

	checkAllow(t, th, key, true, 0)
	th.Fail(key)
	clock.Advance(time.Minute)
	th.Fail(key)
	checkAllow(t, th, key, true, 0)
	clock.Advance(time.Minute)
	th.Fail(key)
	// Third failure two minutes after the first: blocked for the rest of
	// the window.
	checkAllow(t, th, key, false, 13*time.Minute)
	checkAllow(t, th, "ip:192.0.2.1", true, 0)

	// More failures while blocked do not extend the window.
	th.Fail(key)
	clock.Advance(12*time.Minute + 59*time.Second)
	checkAllow(t, th, key, false, time.Second)

	// The window ends: allowed again, counting from zero.
	clock.Advance(time.Second)
	checkAllow(t, th, key, true, 0)
	th.Fail(key)
	th.Fail(key)
	checkAllow(t, th, key, true, 0)
	th.Fail(key)
	checkAllow(t, th, key, false, 15*time.Minute)
}

func TestThrottleReset(t *testing.T) {
	clock := newClock()
	th := NewThrottle(2, time.Minute, clock.Now)
	th.Fail("k")
	th.Fail("k")
	checkAllow(t, th, "k", false, time.Minute)
	th.Reset("k")
	checkAllow(t, th, "k", true, 0)
	th.Fail("k")
	checkAllow(t, th, "k", true, 0)
	th.Reset("never seen") // no-op
}

func TestThrottleExpiredWindowRestarts(t *testing.T) {
	clock := newClock()
	th := NewThrottle(2, time.Minute, clock.Now)
	th.Fail("k")
	clock.Advance(time.Minute) // the first failure's window is over
	th.Fail("k")
	checkAllow(t, th, "k", true, 0)
	th.Fail("k")
	checkAllow(t, th, "k", false, time.Minute)
}

func TestThrottleSweep(t *testing.T) {
	clock := newClock()
	th := NewThrottle(5, time.Minute, clock.Now)
	for i := range 100 {
		th.Fail("ip:" + strconv.Itoa(i))
	}
	if n := len(th.entries); n != 100 {
		t.Fatalf("%d entries, want 100", n)
	}
	clock.Advance(time.Minute)
	th.Fail("ip:new") // a window later: the sweep drops the expired keys
	if n := len(th.entries); n != 1 {
		t.Errorf("%d entries after sweep, want 1", n)
	}
}

func TestThrottleBounded(t *testing.T) {
	clock := newClock()
	th := NewThrottle(2, time.Hour, clock.Now)
	th.maxKeys = 1000
	th.Fail("email:victim")
	th.Fail("email:victim")
	for i := range 5000 {
		th.Fail("ip:" + strconv.Itoa(i))
		if n := len(th.entries); n > th.maxKeys {
			t.Fatalf("after %d keys: %d entries, want at most %d", i+1, n, th.maxKeys)
		}
	}
	// Existing keys keep counting when the map is full.
	th.Fail("ip:4999")
	checkAllow(t, th, "ip:4999", false, time.Hour)
}

func TestThrottleConcurrent(t *testing.T) {
	th := NewThrottle(1000, time.Hour, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				key := "k" + strconv.Itoa(i%10)
				th.Allow(key)
				th.Fail(key)
				if i%50 == 0 {
					th.Reset("k" + strconv.Itoa(g))
				}
			}
		})
	}
	wg.Wait()
}

func TestNewThrottlePanics(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		window time.Duration
	}{{0, time.Minute}, {1, 0}, {-1, -time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewThrottle(%d, %v) did not panic", tc.limit, tc.window)
				}
			}()
			NewThrottle(tc.limit, tc.window, nil)
		}()
	}
}
