package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runThrottle(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("HitWindow", func(t *testing.T) { testThrottleHitWindow(t, open) })
	t.Run("Undo", func(t *testing.T) { testThrottleUndo(t, open) })
	t.Run("DeleteAndSweep", func(t *testing.T) { testThrottleDeleteAndSweep(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testThrottleConcurrent(t, open) })
}

var throttleT0 = time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)

func hit(t *testing.T, s *store.Store, key string, window time.Duration, now time.Time) store.ThrottleCount {
	t.Helper()
	c, err := s.HitThrottle(testContext(t), key, window, now)
	if err != nil {
		t.Fatalf("HitThrottle(%q): %v", key, err)
	}
	return c
}

func wantCount(t *testing.T, got store.ThrottleCount, hits int, expires time.Time) {
	t.Helper()
	if got.Hits != hits || !got.ExpiresAt.Equal(expires) {
		t.Errorf("count = %d until %v, want %d until %v", got.Hits, got.ExpiresAt, hits, expires)
	}
}

func testThrottleHitWindow(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	const w = 15 * time.Minute
	end := throttleT0.Add(w)
	wantCount(t, hit(t, s, "email:ada@example.com", w, throttleT0), 1, end)
	wantCount(t, hit(t, s, "email:ada@example.com", w, throttleT0.Add(time.Minute)), 2, end)
	// Another key counts on its own.
	wantCount(t, hit(t, s, "ip:192.0.2.1", w, throttleT0.Add(time.Minute)), 1, end.Add(time.Minute))
	wantCount(t, hit(t, s, "email:ada@example.com", w, end.Add(-time.Microsecond)), 3, end)
	// At the window's end a hit opens a new window.
	wantCount(t, hit(t, s, "email:ada@example.com", w, end), 1, end.Add(w))
	// A long key costs a fixed-size row (it is hashed) and still counts by its exact value.
	long := "email:" + strings.Repeat("a", 10000) + "@example.com"
	wantCount(t, hit(t, s, long, w, throttleT0), 1, end)
	wantCount(t, hit(t, s, long, w, throttleT0), 2, end)
	wantCount(t, hit(t, s, long[:len(long)-1], w, throttleT0), 1, end)

	for _, tc := range []struct {
		key    string
		window time.Duration
	}{{"", w}, {"k", 0}, {"k", -time.Second}} {
		if _, err := s.HitThrottle(testContext(t), tc.key, tc.window, throttleT0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("HitThrottle(%q, %v) = %v, want ErrInvalid", tc.key, tc.window, err)
		}
	}
}

func testThrottleUndo(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	const w = time.Minute
	first := hit(t, s, "k", w, throttleT0)
	hit(t, s, "k", w, throttleT0)
	if err := s.UndoThrottleHit(ctx, "k", first.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	wantCount(t, hit(t, s, "k", w, throttleT0), 2, first.ExpiresAt)
	for range 3 { // never below zero
		if err := s.UndoThrottleHit(ctx, "k", first.ExpiresAt); err != nil {
			t.Fatal(err)
		}
	}
	wantCount(t, hit(t, s, "k", w, throttleT0), 1, first.ExpiresAt)

	// An undo for an ended window leaves the new window alone.
	second := hit(t, s, "k", w, first.ExpiresAt)
	wantCount(t, second, 1, first.ExpiresAt.Add(w))
	if err := s.UndoThrottleHit(ctx, "k", first.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	wantCount(t, hit(t, s, "k", w, first.ExpiresAt), 2, second.ExpiresAt)
	// Undoing a key never hit is not an error.
	if err := s.UndoThrottleHit(ctx, "never", first.ExpiresAt); err != nil {
		t.Errorf("UndoThrottleHit(never) = %v", err)
	}
}

func testThrottleDeleteAndSweep(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	hit(t, s, "a", time.Minute, throttleT0)
	hit(t, s, "b", time.Minute, throttleT0.Add(time.Second))
	hit(t, s, "c", time.Hour, throttleT0)
	if err := s.DeleteThrottle(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ThrottleCountOf(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after DeleteThrottle: %v, want ErrNotFound", err)
	}
	if err := s.DeleteThrottle(ctx, "c"); err != nil {
		t.Errorf("second DeleteThrottle = %v", err)
	}
	hit(t, s, "c", time.Hour, throttleT0)

	// At throttleT0+1m, a's window (ending then) is over; b's and c's are not.
	n, err := s.DeleteExpiredThrottles(ctx, throttleT0.Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpiredThrottles = %d, %v; want 1", n, err)
	}
	if _, err := s.ThrottleCountOf(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a after the sweep: %v, want ErrNotFound", err)
	}
	for _, key := range []string{"b", "c"} {
		if c, err := s.ThrottleCountOf(ctx, key); err != nil || c.Hits != 1 {
			t.Errorf("%s after the sweep: %+v, %v; want 1 hit", key, c, err)
		}
	}
	n, err = s.DeleteExpiredThrottles(ctx, throttleT0.Add(2*time.Hour))
	if err != nil || n != 2 {
		t.Errorf("second sweep = %d, %v; want 2", n, err)
	}
}

// testThrottleConcurrent hits one key from many goroutines at once: the check and the
// increment are one step, so every hit sees a different count.
func testThrottleConcurrent(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	const n = 40
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := s.HitThrottle(testContext(t), "ip:203.0.113.9", time.Hour, throttleT0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, c.Hits)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(got)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		t.Errorf("counts = %v, want 1..%d once each", got, n)
	}
}
