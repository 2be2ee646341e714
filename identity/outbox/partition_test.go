package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// recorder is a handler of kind "test" whose payloads are "<partition>/<n>": it records the
// order of attempts per partition, blocks on partition "slow" until release is closed, and
// fails payloads listed in failing (once each).
type recorder struct {
	mu      sync.Mutex
	order   map[string][]string
	running map[string]int
	overlap bool
	release chan struct{}
	failing map[string]bool
	times   map[string][]time.Time
}

func newRecorder() *recorder {
	return &recorder{order: map[string][]string{}, running: map[string]int{}, release: make(chan struct{}),
		failing: map[string]bool{}, times: map[string][]time.Time{}}
}

func (r *recorder) handle(ctx context.Context, payload []byte) error {
	p := string(payload)
	part, _, _ := strings.Cut(p, "/")
	r.mu.Lock()
	r.running[part]++
	if r.running[part] > 1 {
		r.overlap = true
	}
	r.times[p] = append(r.times[p], time.Now())
	fail := r.failing[p]
	r.failing[p] = false
	r.mu.Unlock()
	if part == "slow" {
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[part]--
	if fail {
		return errors.New("receiver refused")
	}
	r.order[part] = append(r.order[part], p)
	return nil
}

func (r *recorder) delivered(part string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order[part])
}

func enqueueOrdered(t *testing.T, st *store.Store, ob *outbox.Outbox, part string, n int) {
	t.Helper()
	ctx := testContext(t)
	err := st.InTx(ctx, func(tx *store.Tx) error {
		for i := range n {
			if _, err := ob.EnqueueOrdered(ctx, tx, "test", part, fmt.Appendf(nil, "%s/%02d", part, i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWorkerPartitions: each partition's messages are attempted in order and never two at a
// time, while a partition whose receiver hangs holds one slot only: the others are delivered
// meanwhile.
func TestWorkerPartitions(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ring := keyring(t)
		ob := outbox.New(ring)
		rec := newRecorder()
		w := outbox.NewWorker(st, ring, outbox.WorkerConfig{Handlers: map[string]outbox.Handler{"test": rec.handle},
			PollInterval: 10 * time.Millisecond, BatchSize: 10, Concurrency: 3, AttemptTimeout: 30 * time.Second,
			Lease: 40 * time.Second})
		enqueueOrdered(t, st, ob, "slow", 3)
		for _, p := range []string{"a", "b", "c", "d"} {
			enqueueOrdered(t, st, ob, p, 12)
		}
		start(t, w)
		want := func(p string, n int) []string {
			var out []string
			for i := range n {
				out = append(out, fmt.Sprintf("%s/%02d", p, i))
			}
			return out
		}
		waitFor(t, "a, b, c and d delivered while slow hangs", func() bool {
			for _, p := range []string{"a", "b", "c", "d"} {
				if len(rec.delivered(p)) < 12 {
					return false
				}
			}
			return true
		})
		for _, p := range []string{"a", "b", "c", "d"} {
			if got := rec.delivered(p); !slices.Equal(got, want(p, 12)) {
				t.Errorf("partition %s delivered in order %v", p, got)
			}
		}
		if len(rec.delivered("slow")) != 0 {
			t.Fatal("the slow partition finished before it was released")
		}
		close(rec.release)
		waitFor(t, "slow delivered", func() bool { return len(rec.delivered("slow")) == 3 })
		if got := rec.delivered("slow"); !slices.Equal(got, want("slow", 3)) {
			t.Errorf("slow delivered in order %v", got)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.overlap {
			t.Error("two attempts of one partition ran at the same time")
		}
	})
}

// TestWorkerSchedule: with a Schedule, the n-th retry waits Schedule[n-1] (not a random
// backoff), and the message is given up after len(Schedule)+1 attempts.
func TestWorkerSchedule(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		ring := keyring(t)
		var mu sync.Mutex
		var at []time.Time
		var attempts []outbox.Attempt
		h := func(ctx context.Context, _ []byte) error {
			a, _ := outbox.AttemptFrom(ctx)
			mu.Lock()
			at = append(at, time.Now())
			attempts = append(attempts, a)
			mu.Unlock()
			return errors.New("down")
		}
		schedule := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
		w := outbox.NewWorker(st, ring, outbox.WorkerConfig{Handlers: map[string]outbox.Handler{"test": h},
			PollInterval: 5 * time.Millisecond, Schedule: schedule})
		var id string
		err := st.InTx(testContext(t), func(tx *store.Tx) error {
			var err error
			id, err = outbox.New(ring).Enqueue(testContext(t), tx, "test", []byte("x"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, w)
		m := waitRow(t, st, id, "given up", func(m store.OutboxMessage) bool { return m.FailedAt != nil })
		mu.Lock()
		defer mu.Unlock()
		if m.Attempts != 3 || len(at) != 3 {
			t.Fatalf("%d attempts (%d handled), want 3", m.Attempts, len(at))
		}
		for i, wait := range schedule {
			gap := at[i+1].Sub(at[i])
			if gap < wait || gap > wait+2*time.Second {
				t.Errorf("wait %d: %s, want %s", i+1, gap, wait)
			}
		}
		if attempts[0].Number != 1 || attempts[2].Number != 3 || attempts[0].RetryAt.IsZero() || !attempts[2].RetryAt.IsZero() {
			t.Errorf("attempt infos %+v", attempts)
		}
	})
}
