package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

var masterKey = []byte("0123456789abcdef0123456789abcdef")

func keyring(t *testing.T) *seal.Keyring {
	ring, err := seal.NewKeyring(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fastConfig is a worker that polls every 10 ms and retries after 10–40 ms.
func fastConfig(sender mail.Sender, log *slog.Logger) outbox.WorkerConfig {
	return outbox.WorkerConfig{
		Handlers:     map[string]outbox.Handler{mail.Kind: mail.Handler(sender)},
		PollInterval: 10 * time.Millisecond, RetryBase: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		AttemptTimeout: 5 * time.Second, Log: log,
	}
}

// start runs w until the test ends (and waits for it to return).
func start(t *testing.T, w *outbox.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("worker did not stop within 10s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func enqueue(t *testing.T, st *store.Store, ob *outbox.Outbox, msgs ...mail.Message) []string {
	t.Helper()
	ctx := testContext(t)
	var ids []string
	err := st.InTx(ctx, func(tx *store.Tx) error {
		for _, m := range msgs {
			p, err := m.Payload()
			if err != nil {
				return err
			}
			id, err := ob.Enqueue(ctx, tx, mail.Kind, p)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func message(to string) mail.Message {
	return mail.Message{To: to, Subject: "Hello " + to, Text: "link: http://gatehouse.test/x?to=" + to,
		HTML: "<p>hello</p>", Template: "test", Link: "http://gatehouse.test/x?to=" + to}
}

func sender(srv *mailtest.Server) mail.Sender {
	cfg, err := mail.ParseSMTPURL("smtp://" + srv.Addr())
	if err != nil {
		panic(err)
	}
	return mail.NewSMTPSender(cfg, "no-reply@gatehouse.test", nil)
}

// waitRow waits until row id satisfies ok.
func waitRow(t *testing.T, st *store.Store, id string, what string, ok func(store.OutboxMessage) bool) store.OutboxMessage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := st.OutboxMessageByID(testContext(t), id)
		if err == nil && ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox row %s: not %s within 20s: %+v, %v", id, what, m, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The payload is sealed at rest; the worker delivers it over SMTP, and the delivered row keeps
// no payload.
func TestWorkerDelivers(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		srv := mailtest.Start(t, mailtest.Options{})
		ob := outbox.New(keyring(t))
		id := enqueue(t, st, ob, message("ada@example.com"))[0]
		row, err := st.OutboxMessageByID(testContext(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if row.Kind != "mail" || !strings.HasPrefix(row.Payload, "v1.") || strings.Contains(row.Payload, "ada@example.com") {
			t.Fatalf("stored row = %+v, want a sealed payload", row)
		}
		start(t, outbox.NewWorker(st, keyring(t), fastConfig(sender(srv), nil)))
		got := srv.WaitFor(t, "ada@example.com", 20*time.Second)
		if got.Subject != "Hello ada@example.com" || got.Text != "link: http://gatehouse.test/x?to=ada@example.com" {
			t.Errorf("delivered %+v", got)
		}
		done := waitRow(t, st, id, "sent", func(m store.OutboxMessage) bool { return m.SentAt != nil })
		if done.Payload != "" || done.Attempts != 1 || done.LastError != "" {
			t.Errorf("delivered row = %+v", done)
		}
	})
}

// The mail server is down when the message is enqueued: nothing is lost, attempts are retried
// with backoff (the failure recorded), and once the server is back the message arrives once.
func TestWorkerRetriesUntilTheServerIsBack(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		srv := mailtest.Start(t, mailtest.Options{})
		srv.Stop()
		var logs lockedBuffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		start(t, outbox.NewWorker(st, keyring(t), fastConfig(sender(srv), log)))
		id := enqueue(t, st, outbox.New(keyring(t)), message("grace@example.com"))[0]

		row := waitRow(t, st, id, "attempted three times", func(m store.OutboxMessage) bool { return m.Attempts >= 3 })
		if row.SentAt != nil || row.FailedAt != nil || !strings.Contains(row.LastError, "connection refused") {
			t.Fatalf("row while the server is down = %+v", row)
		}
		if strings.Contains(logs.String(), "grace@example.com") || !strings.Contains(logs.String(), "outbox: attempt failed; retrying") {
			t.Errorf("logs (no recipient or payload, one line per failure):\n%s", logs.String())
		}
		srv.Restart()
		srv.WaitFor(t, "grace@example.com", 20*time.Second)
		waitRow(t, st, id, "sent", func(m store.OutboxMessage) bool { return m.SentAt != nil })
		time.Sleep(100 * time.Millisecond) // ten more polls
		if n := len(srv.To("grace@example.com")); n != 1 {
			t.Errorf("%d messages arrived, want exactly 1", n)
		}
	})
}

// A restart loses nothing: a message enqueued while no worker runs, by a process that then
// stops, is delivered by the next process's worker.
func TestWorkerAfterRestart(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		url := b.URL(t)
		first := openStore(t, url, true)
		id := enqueue(t, first, outbox.New(keyring(t)), message("ada@example.com"))[0]
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		srv := mailtest.Start(t, mailtest.Options{})
		second := openStore(t, url, false)
		start(t, outbox.NewWorker(second, keyring(t), fastConfig(sender(srv), nil)))
		srv.WaitFor(t, "ada@example.com", 20*time.Second)
		waitRow(t, second, id, "sent", func(m store.OutboxMessage) bool { return m.SentAt != nil })
	})
}

// Two workers, each over its own connection pool as two replicas are, deliver each of 40
// messages exactly once.
func TestTwoWorkersDeliverEachMessageOnce(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		url := b.URL(t)
		one, two := openStore(t, url, true), openStore(t, url, false)
		srv := mailtest.Start(t, mailtest.Options{})
		var msgs []mail.Message
		for i := range 40 {
			msgs = append(msgs, message(fmt.Sprintf("user%02d@example.com", i)))
		}
		var mu sync.Mutex
		by := map[string][]string{}
		counting := func(name string, s mail.Sender) mail.Sender {
			return senderFunc(func(ctx context.Context, m mail.Message) error {
				mu.Lock()
				by[name] = append(by[name], m.To)
				mu.Unlock()
				return s.Send(ctx, m)
			})
		}
		cfg1, cfg2 := fastConfig(counting("one", sender(srv)), nil), fastConfig(counting("two", sender(srv)), nil)
		cfg1.BatchSize, cfg2.BatchSize = 3, 3
		start(t, outbox.NewWorker(one, keyring(t), cfg1))
		start(t, outbox.NewWorker(two, keyring(t), cfg2))
		ids := enqueue(t, one, outbox.New(keyring(t)), msgs...)
		srv.Wait(t, 40, 30*time.Second)
		for _, id := range ids {
			waitRow(t, one, id, "sent", func(m store.OutboxMessage) bool { return m.SentAt != nil && m.Attempts == 1 })
		}
		time.Sleep(100 * time.Millisecond)
		got := srv.Messages()
		var to []string
		for _, m := range got {
			to = append(to, m.To...)
		}
		slices.Sort(to)
		if len(to) != 40 || len(slices.Compact(slices.Clone(to))) != 40 {
			t.Errorf("%d deliveries (%d distinct recipients), want 40 distinct: %v", len(to), len(slices.Compact(to)), to)
		}
		mu.Lock()
		t.Logf("worker one sent %d, worker two %d", len(by["one"]), len(by["two"]))
		mu.Unlock()
	})
}

// A recipient refused for good is given up at once; a message that keeps failing is given up
// after MaxAttempts; a payload that does not open with the keyring is given up too.
func TestWorkerGivesUp(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		srv := mailtest.Start(t, mailtest.Options{Reject: []string{"gone@example.com"}})
		failing := senderFunc(func(context.Context, mail.Message) error { return errors.New("421 try again later") })
		ob := outbox.New(keyring(t))
		gone := enqueue(t, st, ob, message("gone@example.com"))[0]
		cfg := fastConfig(sender(srv), nil)
		stop := start(t, outbox.NewWorker(st, keyring(t), cfg))
		row := waitRow(t, st, gone, "failed", func(m store.OutboxMessage) bool { return m.FailedAt != nil })
		if row.Attempts != 1 || row.Payload != "" || !strings.Contains(row.LastError, "550") {
			t.Errorf("refused recipient row = %+v", row)
		}
		stop()

		cfg = fastConfig(failing, nil)
		cfg.MaxAttempts = 3
		start(t, outbox.NewWorker(st, keyring(t), cfg))
		flaky := enqueue(t, st, ob, message("ada@example.com"))[0]
		row = waitRow(t, st, flaky, "failed", func(m store.OutboxMessage) bool { return m.FailedAt != nil })
		if row.Attempts != 3 || row.LastError != "421 try again later" {
			t.Errorf("given-up row = %+v", row)
		}

		otherRing, _ := seal.NewKeyring([]byte("fedcba9876543210fedcba9876543210"))
		foreign := enqueue(t, st, outbox.New(otherRing), message("eve@example.com"))[0]
		row = waitRow(t, st, foreign, "failed", func(m store.OutboxMessage) bool { return m.FailedAt != nil })
		if row.Attempts != 1 || !strings.Contains(row.LastError, "does not open") {
			t.Errorf("foreign payload row = %+v", row)
		}
	})
}

// A stopping worker finishes the attempt in flight and hands the rest of its claim back,
// without counting it as an attempt.
func TestWorkerStopHandsBack(t *testing.T) {
	apptestEach(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		release := make(chan struct{})
		inFlight := make(chan struct{}, 1)
		var sent []string
		blocking := senderFunc(func(_ context.Context, m mail.Message) error {
			inFlight <- struct{}{}
			<-release
			sent = append(sent, m.To)
			return nil
		})
		ids := enqueue(t, st, outbox.New(keyring(t)), message("a@example.com"), message("b@example.com"), message("c@example.com"))
		stop := start(t, outbox.NewWorker(st, keyring(t), fastConfig(blocking, nil)))
		<-inFlight
		go func() { time.Sleep(50 * time.Millisecond); close(release) }()
		stop()
		if strings.Join(sent, ",") != "a@example.com" {
			t.Errorf("sent %v, want the one in flight", sent)
		}
		first, _ := st.OutboxMessageByID(testContext(t), ids[0])
		second, _ := st.OutboxMessageByID(testContext(t), ids[1])
		if first.SentAt == nil || second.SentAt != nil || second.Attempts != 0 || second.NextAttemptAt.After(time.Now()) {
			t.Errorf("after stop: first %+v, second %+v", first, second)
		}
	})
}

type senderFunc func(ctx context.Context, m mail.Message) error

func (f senderFunc) Send(ctx context.Context, m mail.Message) error { return f(ctx, m) }

func apptestEach(t *testing.T, fn func(t *testing.T, b storetest.Backend)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

func openStore(t *testing.T, url string, migrate bool) *store.Store {
	t.Helper()
	st, err := store.Open(testContext(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if migrate {
		if err := st.Migrate(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
