package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runOutbox covers the outbox rows that identity/outbox's worker delivers: enqueueing in a
// transaction, claims with a lease and a fencing count, completion, retry, failure, release,
// concurrent claimers, re-sealing of pending payloads and the sweep of finished rows.
func runOutbox(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Lifecycle", func(t *testing.T) { testOutboxLifecycle(t, open) })
	t.Run("LeaseAndFencing", func(t *testing.T) { testOutboxLease(t, open) })
	t.Run("RetryFailRelease", func(t *testing.T) { testOutboxRetryFailRelease(t, open) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testOutboxConcurrentClaims(t, open) })
	t.Run("RollbackAndReseal", func(t *testing.T) { testOutboxRollbackAndReseal(t, open) })
	t.Run("DeleteFinished", func(t *testing.T) { testOutboxDeleteFinished(t, open) })
}

// outboxT0 is the tests' reference time.
var outboxT0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// mailKind is the kinds list of a worker that delivers mail only.
var mailKind = []string{"mail"}

func enqueue(t *testing.T, s *store.Store, m store.OutboxMessage) store.OutboxMessage {
	t.Helper()
	mustTx(t, s, func(tx *store.Tx) error { return tx.EnqueueOutbox(testContext(t), &m) })
	return m
}

func claim(t *testing.T, s *store.Store, now time.Time, lease time.Duration, limit int) []store.OutboxMessage {
	t.Helper()
	got, err := s.ClaimOutbox(testContext(t), now, lease, limit, []string{"mail"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return got
}

func claimedIDs(ms []store.OutboxMessage) string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return strings.Join(ids, ",")
}

func testOutboxLifecycle(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	if err := s.InTx(ctx, func(tx *store.Tx) error {
		return tx.EnqueueOutbox(ctx, &store.OutboxMessage{ID: "out_x", Kind: "mail"})
	}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("enqueue without payload: %v, want ErrInvalid", err)
	}
	if due, err := s.OutboxDue(ctx, outboxT0, mailKind); err != nil || due {
		t.Fatalf("empty outbox due = %v, %v", due, err)
	}
	a := enqueue(t, s, store.OutboxMessage{ID: "out_a", Kind: "mail", Payload: "sealed-a", NextAttemptAt: outboxT0})
	enqueue(t, s, store.OutboxMessage{ID: "out_b", Kind: "mail", Payload: "sealed-b", NextAttemptAt: outboxT0.Add(time.Minute)})
	if a.Attempts != 0 || a.CreatedAt.IsZero() {
		t.Errorf("enqueued = %+v", a)
	}
	if due, _ := s.OutboxDue(ctx, outboxT0.Add(-time.Second), mailKind); due {
		t.Error("due before its time")
	}
	if due, _ := s.OutboxDue(ctx, outboxT0, mailKind); !due {
		t.Error("not due at its time")
	}

	// Only the due row is claimed: one attempt, leased for a minute.
	got := claim(t, s, outboxT0, time.Minute, 10)
	if len(got) != 1 || got[0].ID != "out_a" || got[0].Kind != "mail" || got[0].Payload != "sealed-a" ||
		got[0].Attempts != 1 || !got[0].NextAttemptAt.Equal(outboxT0.Add(time.Minute)) || got[0].SentAt != nil {
		t.Fatalf("claimed %+v", got)
	}
	sent := outboxT0.Add(2 * time.Second)
	if err := s.CompleteOutbox(ctx, "out_a", 1, sent); err != nil {
		t.Fatalf("complete: %v", err)
	}
	done, err := s.OutboxMessageByID(ctx, "out_a")
	if err != nil || done.SentAt == nil || !done.SentAt.Equal(sent) || done.Payload != "" || done.LastError != "" {
		t.Fatalf("completed row = %+v, %v", done, err)
	}
	if err := s.CompleteOutbox(ctx, "out_a", 1, sent); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("complete twice: %v, want ErrNotFound", err)
	}
	// A delivered row is never claimed again; out_b is, once due.
	if got := claim(t, s, outboxT0.Add(time.Hour), time.Minute, 10); claimedIDs(got) != "out_b" {
		t.Errorf("claim after completion = %s, want out_b", claimedIDs(got))
	}
	if err := s.CompleteOutbox(ctx, "out_b", 1, outboxT0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OutboxMessageByID(ctx, "out_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown row: %v", err)
	}

	// A claimer takes only the kinds it names: a mail worker leaves a webhook row alone.
	enqueue(t, s, store.OutboxMessage{ID: "out_w", Kind: "webhook", Payload: "w", NextAttemptAt: outboxT0})
	later := outboxT0.Add(2 * time.Hour)
	if due, _ := s.OutboxDue(ctx, later, mailKind); due {
		t.Error("a webhook row is due for a mail worker")
	}
	if got := claim(t, s, later, time.Minute, 10); len(got) != 0 {
		t.Errorf("mail worker claimed %s", claimedIDs(got))
	}
	if due, _ := s.OutboxDue(ctx, later, []string{"mail", "webhook"}); !due {
		t.Error("the webhook row is not due for a worker of both kinds")
	}
	if got, _ := s.ClaimOutbox(ctx, later, time.Minute, 10, []string{"webhook"}); claimedIDs(got) != "out_w" {
		t.Errorf("webhook worker claimed %q, want out_w", claimedIDs(got))
	}
}

func testOutboxLease(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	for i := range 3 {
		enqueue(t, s, store.OutboxMessage{ID: fmt.Sprintf("out_%d", i), Kind: "mail", Payload: "p", NextAttemptAt: outboxT0})
	}
	if _, err := s.ClaimOutbox(ctx, outboxT0, 0, 1, mailKind); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("claim without a lease: %v, want ErrInvalid", err)
	}
	// The limit holds; the oldest come first.
	first := claim(t, s, outboxT0, time.Minute, 2)
	if claimedIDs(first) != "out_0,out_1" {
		t.Fatalf("first claim = %s", claimedIDs(first))
	}
	// Within the lease nobody else gets them.
	if got := claim(t, s, outboxT0.Add(59*time.Second), time.Minute, 10); claimedIDs(got) != "out_2" {
		t.Fatalf("claim within the lease = %s, want out_2", claimedIDs(got))
	}
	// After it, a second claim takes out_0 and out_1 again, with a second attempt...
	second := claim(t, s, outboxT0.Add(time.Minute), time.Minute, 10)
	if claimedIDs(second) != "out_0,out_1" || second[0].Attempts != 2 {
		t.Fatalf("claim after the lease = %+v", second)
	}
	// ...and the first claim can no longer finish them.
	if err := s.CompleteOutbox(ctx, "out_0", 1, outboxT0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("complete under an old claim: %v, want ErrNotFound", err)
	}
	if err := s.CompleteOutbox(ctx, "out_0", 2, outboxT0); err != nil {
		t.Errorf("complete under the current claim: %v", err)
	}
}

func testOutboxRetryFailRelease(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	for _, id := range []string{"out_r", "out_f", "out_l"} {
		enqueue(t, s, store.OutboxMessage{ID: id, Kind: "mail", Payload: "p-" + id, NextAttemptAt: outboxT0})
	}
	claim(t, s, outboxT0, time.Minute, 10)

	next := outboxT0.Add(30 * time.Second)
	if err := s.RetryOutbox(ctx, "out_r", 1, next, "421 try later"); err != nil {
		t.Fatal(err)
	}
	if err := s.FailOutbox(ctx, "out_f", 1, outboxT0, "550 no such user"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseOutbox(ctx, "out_l", 1, outboxT0); err != nil {
		t.Fatal(err)
	}
	r, _ := s.OutboxMessageByID(ctx, "out_r")
	if r.Attempts != 1 || !r.NextAttemptAt.Equal(next) || r.LastError != "421 try later" || r.Payload != "p-out_r" {
		t.Errorf("retried row = %+v", r)
	}
	f, _ := s.OutboxMessageByID(ctx, "out_f")
	if f.FailedAt == nil || !f.FailedAt.Equal(outboxT0) || f.Payload != "" || f.LastError != "550 no such user" {
		t.Errorf("failed row = %+v", f)
	}
	l, _ := s.OutboxMessageByID(ctx, "out_l")
	if l.Attempts != 0 || !l.NextAttemptAt.Equal(outboxT0) {
		t.Errorf("released row = %+v", l)
	}
	// The released row is due at once, the retried one at its time, the failed one never.
	if got := claim(t, s, outboxT0, time.Minute, 10); claimedIDs(got) != "out_l" || got[0].Attempts != 1 {
		t.Errorf("claim at t0 = %+v, want out_l with 1 attempt", got)
	}
	if got := claim(t, s, next, time.Minute, 10); claimedIDs(got) != "out_r" || got[0].Attempts != 2 {
		t.Errorf("claim at the retry time = %+v, want out_r with 2 attempts", got)
	}
	if got := claim(t, s, outboxT0.Add(24*time.Hour), time.Minute, 10); claimedIDs(got) != "out_l,out_r" {
		t.Errorf("claim a day later = %s, want out_l,out_r (never the failed row)", claimedIDs(got))
	}
}

// testOutboxConcurrentClaims: four claimers racing over 40 due rows, each claiming three at a
// time until nothing is left, claim every row exactly once (PostgreSQL: SKIP LOCKED).
func testOutboxConcurrentClaims(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	const rows = 40
	mustTx(t, s, func(tx *store.Tx) error {
		for i := range rows {
			m := store.OutboxMessage{ID: fmt.Sprintf("out_%02d", i), Kind: "mail", Payload: "p", NextAttemptAt: outboxT0}
			if err := tx.EnqueueOutbox(ctx, &m); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	claims := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := s.ClaimOutbox(ctx, outboxT0, time.Hour, 3, mailKind)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, m := range got {
					claims[m.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent claim: %v", err)
	}
	if len(claims) != rows {
		t.Errorf("%d rows claimed, want %d", len(claims), rows)
	}
	for id, n := range claims {
		if n != 1 {
			t.Errorf("%s claimed %d times, want once", id, n)
		}
	}
}

func testOutboxRollbackAndReseal(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	if got := string(store.OutboxPayloadAAD("out_1", "mail")); got != "outbox:mail:out_1" {
		t.Errorf("OutboxPayloadAAD = %q", got)
	}
	boom := errors.New("the change failed")
	err := s.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.EnqueueOutbox(ctx, &store.OutboxMessage{ID: "out_gone", Kind: "mail", Payload: "p"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("rolled-back transaction: %v", err)
	}
	if _, err := s.OutboxMessageByID(ctx, "out_gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a message of a rolled-back transaction is stored: %v", err)
	}

	enqueue(t, s, store.OutboxMessage{ID: "out_pending", Kind: "mail", Payload: "old:1", NextAttemptAt: outboxT0})
	enqueue(t, s, store.OutboxMessage{ID: "out_sent", Kind: "mail", Payload: "old:2", NextAttemptAt: outboxT0})
	for _, m := range claim(t, s, outboxT0, time.Minute, 10) {
		if m.ID == "out_sent" {
			if err := s.CompleteOutbox(ctx, m.ID, m.Attempts, outboxT0); err != nil {
				t.Fatal(err)
			}
		}
	}
	var seen []string
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			seen = append(seen, v.Table+" "+v.ID+" "+string(v.AAD)+" "+v.Sealed)
			return "new:" + strings.TrimPrefix(v.Sealed, "old:"), true, nil
		})
		return err
	})
	if want := "outbox out_pending outbox:mail:out_pending old:1"; strings.Join(seen, "|") != want {
		t.Errorf("resealed %q, want only %q", seen, want)
	}
	if m, _ := s.OutboxMessageByID(ctx, "out_pending"); m.Payload != "new:1" {
		t.Errorf("pending payload after reseal = %q, want new:1", m.Payload)
	}

	// On PostgreSQL a worker of a running replica may send a message while the walk goes on:
	// that row is skipped, not an error. (SQLite's one writer serialises the two.)
	if s.Dialect() != store.Postgres {
		return
	}
	enqueue(t, s, store.OutboxMessage{ID: "out_racing", Kind: "mail", Payload: "new:3", NextAttemptAt: outboxT0})
	racing := claim(t, s, outboxT0, time.Minute, 10)
	if claimedIDs(racing) != "out_racing" {
		t.Fatalf("claimed %s", claimedIDs(racing))
	}
	var n int
	mustTx(t, s, func(tx *store.Tx) (err error) {
		n, err = tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			if v.ID == "out_racing" {
				if err := s.CompleteOutbox(ctx, v.ID, racing[0].Attempts, outboxT0); err != nil {
					return "", false, err
				}
			}
			return v.Sealed + "+", true, nil
		})
		return err
	})
	if m, _ := s.OutboxMessageByID(ctx, "out_racing"); n != 1 || m.Payload != "" || m.SentAt == nil {
		t.Errorf("reseal while a message is sent: %d replaced, row %+v", n, m)
	}
}

func testOutboxDeleteFinished(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	for _, id := range []string{"out_1", "out_2", "out_3", "out_4"} {
		enqueue(t, s, store.OutboxMessage{ID: id, Kind: "mail", Payload: "p", NextAttemptAt: outboxT0})
	}
	claim(t, s, outboxT0, time.Minute, 10)
	_ = s.CompleteOutbox(ctx, "out_1", 1, outboxT0)
	_ = s.CompleteOutbox(ctx, "out_2", 1, outboxT0)
	_ = s.FailOutbox(ctx, "out_3", 1, outboxT0, "550")
	// Rows created before the cut-off: the delivered and failed ones go, one per call here.
	cut := time.Now().Add(time.Hour)
	if n, err := s.DeleteFinishedOutbox(ctx, cut, 2); err != nil || n != 2 {
		t.Fatalf("first sweep = %d, %v; want 2", n, err)
	}
	if n, err := s.DeleteFinishedOutbox(ctx, cut, 2); err != nil || n != 1 {
		t.Fatalf("second sweep = %d, %v; want 1", n, err)
	}
	if _, err := s.OutboxMessageByID(ctx, "out_4"); err != nil {
		t.Errorf("the pending row was swept: %v", err)
	}
	// A finished row created after the cut-off stays.
	enqueue(t, s, store.OutboxMessage{ID: "out_5", Kind: "mail", Payload: "p", NextAttemptAt: outboxT0.Add(time.Hour)})
	claim(t, s, outboxT0.Add(time.Hour), time.Minute, 10)
	if err := s.CompleteOutbox(ctx, "out_5", 1, outboxT0); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DeleteFinishedOutbox(ctx, time.Now().Add(-time.Hour), 10); n != 0 {
		t.Errorf("swept %d rows created after the cut-off", n)
	}
}
