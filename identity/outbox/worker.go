package outbox

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Worker defaults.
const (
	// DefaultPollInterval is how often an idle worker looks for due messages (one indexed read).
	DefaultPollInterval = time.Second
	// DefaultBatchSize is how many messages one claim takes.
	DefaultBatchSize = 10
	// DefaultAttemptTimeout bounds one delivery attempt.
	DefaultAttemptTimeout = 30 * time.Second
	// DefaultRetryBase and DefaultRetryMax shape the backoff: the n-th retry waits between half
	// and all of min(RetryBase × 2^(n-1), RetryMax).
	DefaultRetryBase = 30 * time.Second
	DefaultRetryMax  = time.Hour
	// DefaultMaxAttempts attempts are made before a message is given up: with the default
	// backoff they span about a day (30 s, 1 min, 2 min, … then hourly).
	DefaultMaxAttempts = 30
	// DefaultRetention is how long delivered and given-up rows are kept (without payload).
	DefaultRetention = 7 * 24 * time.Hour
)

// sweepInterval is how often, at most, a worker deletes finished rows past the retention.
const sweepInterval = time.Hour

// WorkerConfig configures a Worker. Zero fields take the defaults above.
type WorkerConfig struct {
	// Handlers deliver payloads by kind; the worker claims only these kinds.
	Handlers map[string]Handler
	// PollInterval is how often an idle worker looks for due messages.
	PollInterval time.Duration
	// BatchSize is how many messages one claim takes.
	BatchSize int
	// AttemptTimeout bounds one delivery attempt; a claim's lease is BatchSize attempts long
	// (plus a minute), so a message is never claimed twice while an attempt may still run.
	AttemptTimeout time.Duration
	// RetryBase, RetryMax and MaxAttempts shape the retries.
	RetryBase, RetryMax time.Duration
	MaxAttempts         int
	// Schedule, when set, replaces the exponential backoff: the n-th failed attempt waits
	// Schedule[n-1], and a message is given up after len(Schedule)+1 attempts (MaxAttempts is
	// then ignored).
	Schedule []time.Duration
	// Lease, when set, is how long a claim holds a message: a worker renews the lease of each
	// message right before attempting it, so Lease need only cover one attempt (AttemptTimeout
	// plus a margin), and a replica that dies holds its claim no longer than Lease. Without it
	// the lease is BatchSize attempts long (plus a minute).
	Lease time.Duration
	// Concurrency is how many partitions (rows of one PartitionKey, or single rows without
	// one) one worker attempts at the same time; default 1. A slow receiver holds one slot.
	Concurrency int
	// Retention is how long finished rows are kept.
	Retention time.Duration
	// OnSweep, when set, runs with each sweep of finished rows (at most hourly): a kind's own
	// history is swept there (webhook events and attempts).
	OnSweep func(ctx context.Context, now time.Time)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives one line per failed attempt and per message given up (never a payload).
	Log *slog.Logger
}

// Worker delivers the outbox's due messages of its handlers' kinds. Run it on every replica:
// claims keep the replicas from delivering a message twice.
type Worker struct {
	st    *store.Store
	ring  *seal.Keyring
	cfg   WorkerConfig
	kinds []string
	lease time.Duration
	poke  chan struct{}
	// slots bounds the partitions in flight; busy holds their keys, so that a claim skips
	// them and a partition is never attempted by two goroutines at once.
	slots    chan struct{}
	busyMu   sync.Mutex
	busy     map[string]bool
	inflight sync.WaitGroup
	// nextSweep is when the next sweep of finished rows is due.
	mu        sync.Mutex
	nextSweep time.Time
}

// NewWorker returns a worker over st that opens payloads with ring (the Outbox's ring) and
// delivers them with cfg.Handlers.
func NewWorker(st *store.Store, ring *seal.Keyring, cfg WorkerConfig) *Worker {
	if st == nil || ring == nil || len(cfg.Handlers) == 0 {
		panic("outbox: new worker: a store, a keyring and at least one handler are required")
	}
	cfg.PollInterval = orDefault(cfg.PollInterval, DefaultPollInterval)
	cfg.AttemptTimeout = orDefault(cfg.AttemptTimeout, DefaultAttemptTimeout)
	cfg.RetryBase = orDefault(cfg.RetryBase, DefaultRetryBase)
	cfg.RetryMax = orDefault(cfg.RetryMax, DefaultRetryMax)
	cfg.Retention = orDefault(cfg.Retention, DefaultRetention)
	cfg.BatchSize = orDefault(cfg.BatchSize, DefaultBatchSize)
	cfg.MaxAttempts = orDefault(cfg.MaxAttempts, DefaultMaxAttempts)
	if len(cfg.Schedule) > 0 {
		cfg.MaxAttempts = len(cfg.Schedule) + 1
	}
	cfg.Concurrency = orDefault(cfg.Concurrency, 1)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	kinds := make([]string, 0, len(cfg.Handlers))
	for k := range cfg.Handlers {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return &Worker{st: st, ring: ring, cfg: cfg, kinds: kinds, poke: make(chan struct{}, 1),
		slots: make(chan struct{}, cfg.Concurrency), busy: map[string]bool{},
		lease: leaseOf(cfg)}
}

// leaseOf is cfg's claim lease: cfg.Lease (at least AttemptTimeout plus 10 s), else BatchSize
// attempts plus a minute.
func leaseOf(cfg WorkerConfig) time.Duration {
	if cfg.Lease > 0 {
		return max(cfg.Lease, cfg.AttemptTimeout+10*time.Second)
	}
	return time.Duration(cfg.BatchSize)*cfg.AttemptTimeout + time.Minute
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Run delivers due messages until ctx is done, polling every PollInterval (at once after
// Poke). On ctx's end it finishes the attempt in flight (within AttemptTimeout), hands the
// rest of its claim back for other replicas, and returns.
func (w *Worker) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	defer w.inflight.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.poke:
		}
		for {
			n, err := w.claimAndDispatch(ctx)
			if err != nil && ctx.Err() == nil {
				w.cfg.Log.Warn("outbox: poll", "err", err)
			}
			if err != nil || n < w.cfg.BatchSize || ctx.Err() != nil {
				break
			}
		}
		w.sweep(ctx)
		timer.Reset(w.cfg.PollInterval)
	}
}

// Poke makes a running worker poll now instead of at its next interval.
func (w *Worker) Poke() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// RunOnce claims the messages due now (one batch), attempts each, waits for the attempts and
// returns how many it claimed. When ctx ends meanwhile, the messages not yet attempted are
// handed back.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	n, err := w.claimAndDispatch(ctx)
	w.inflight.Wait()
	return n, err
}

// claimAndDispatch claims one batch of due messages, skipping the partitions in flight, and
// starts attempting them: the rows of one partition one after the other in one goroutine, at
// most Concurrency partitions at a time (it waits for a free slot; the claim's lease covers a
// whole batch attempted one by one). It returns the number claimed without waiting for the
// attempts.
func (w *Worker) claimAndDispatch(ctx context.Context) (int, error) {
	now := w.cfg.Now()
	if due, err := w.st.OutboxDue(ctx, now, w.kinds); err != nil || !due {
		return 0, err
	}
	w.busyMu.Lock()
	skip := make([]string, 0, len(w.busy))
	for k := range w.busy {
		skip = append(skip, k)
	}
	w.busyMu.Unlock()
	claimed, err := w.st.ClaimOutbox(ctx, now, w.lease, w.cfg.BatchSize, w.kinds, skip...)
	if err != nil {
		return 0, err
	}
	groups := partitions(claimed)
	for i, g := range groups {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			for _, rest := range groups[i:] {
				w.release(ctx, rest)
			}
			break
		}
		key := g[0].PartitionKey
		if key != "" {
			w.busyMu.Lock()
			w.busy[key] = true
			w.busyMu.Unlock()
		}
		w.inflight.Add(1)
		go func() {
			defer w.inflight.Done()
			defer func() {
				if key != "" {
					w.busyMu.Lock()
					delete(w.busy, key)
					w.busyMu.Unlock()
				}
				<-w.slots
				w.Poke()
			}()
			w.attemptInOrder(ctx, g)
		}()
	}
	return len(claimed), nil
}

// partitions groups claimed messages (oldest first) by PartitionKey, keeping their order; a
// message without a key is a group of its own.
func partitions(ms []store.OutboxMessage) [][]store.OutboxMessage {
	var out [][]store.OutboxMessage
	index := map[string]int{}
	for _, m := range ms {
		if m.PartitionKey == "" {
			out = append(out, []store.OutboxMessage{m})
			continue
		}
		if i, ok := index[m.PartitionKey]; ok {
			out[i] = append(out[i], m)
			continue
		}
		index[m.PartitionKey] = len(out)
		out = append(out, []store.OutboxMessage{m})
	}
	return out
}

// attemptInOrder attempts the messages of one partition in order. After a failed attempt the
// rest are handed back, due now, for a later claim (order is kept while the receiver accepts;
// a failing receiver does not hold the others back for a whole schedule).
func (w *Worker) attemptInOrder(ctx context.Context, ms []store.OutboxMessage) {
	for i, m := range ms {
		if ctx.Err() != nil {
			w.release(ctx, ms[i:])
			return
		}
		if w.cfg.Lease > 0 {
			// Renew the claim for this attempt: the ones before may have used up the lease.
			err := w.st.RenewOutbox(ctx, m.ID, m.Attempts, w.cfg.Now().Add(w.lease))
			if err != nil {
				// Another worker claimed it after the lease ended (or the store is out of
				// reach): leave it, and the rest, to the lease.
				w.cfg.Log.Warn("outbox: renew claim", "outbox_id", m.ID, "err", err)
				return
			}
		}
		if !w.attempt(ctx, m) {
			w.release(ctx, ms[i+1:])
			return
		}
	}
}

// Attempt describes the delivery attempt a Handler is called for (AttemptFrom).
type Attempt struct {
	// MessageID is the outbox row's id.
	MessageID string
	// Number counts the attempts of the message, from 1.
	Number int
	// RetryAt is when the message is attempted again if this attempt fails with an error that
	// is not Permanent; zero when this is the last attempt.
	RetryAt time.Time
}

type attemptKey struct{}

// AttemptFrom returns the attempt a Handler's ctx belongs to.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(Attempt)
	return a, ok
}

// attempt delivers m once, records the outcome and reports whether it was delivered. The
// attempt and its record outlive ctx (a stopping worker finishes what it started), bounded by
// AttemptTimeout.
func (w *Worker) attempt(ctx context.Context, m store.OutboxMessage) bool {
	var retryAt time.Time
	if m.Attempts < w.cfg.MaxAttempts {
		retryAt = w.cfg.Now().Add(w.backoff(m.Attempts))
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.AttemptTimeout)
	defer cancel()
	actx = context.WithValue(actx, attemptKey{}, Attempt{MessageID: m.ID, Number: m.Attempts, RetryAt: retryAt})
	err := w.deliver(actx, m)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	now := w.cfg.Now()
	log := w.cfg.Log.With("outbox_id", m.ID, "kind", m.Kind, "attempt", m.Attempts)
	var rerr error
	switch {
	case err == nil:
		rerr = w.st.CompleteOutbox(rctx, m.ID, m.Attempts, now)
	case IsPermanent(err) || retryAt.IsZero():
		log.Error("outbox: message given up", "err", err, "permanent", IsPermanent(err))
		rerr = w.st.FailOutbox(rctx, m.ID, m.Attempts, now, errorText(err))
	default:
		next := retryAt
		log.Warn("outbox: attempt failed; retrying", "err", err, "next_attempt_at", next.UTC().Format(time.RFC3339))
		rerr = w.st.RetryOutbox(rctx, m.ID, m.Attempts, next, errorText(err))
	}
	if rerr != nil {
		// The lease ends and the message is attempted again: at least once, never lost.
		log.Warn("outbox: record attempt", "err", rerr)
	}
	return err == nil
}

// deliver opens m's payload and hands it to its kind's handler.
func (w *Worker) deliver(ctx context.Context, m store.OutboxMessage) error {
	h := w.cfg.Handlers[m.Kind]
	if h == nil {
		return Permanent(errors.New("no handler for kind " + m.Kind))
	}
	payload, err := w.ring.Open(m.Payload, store.OutboxPayloadAAD(m.ID, m.Kind))
	if err != nil {
		return Permanent(errors.New("the payload does not open with GATEHOUSE_SECRET_KEY or GATEHOUSE_SECRET_KEYS_OLD"))
	}
	return h(ctx, payload)
}

// release hands claimed messages back, due now, without counting the claim as an attempt.
func (w *Worker) release(ctx context.Context, ms []store.OutboxMessage) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	now := w.cfg.Now()
	for _, m := range ms {
		if err := w.st.ReleaseOutbox(rctx, m.ID, m.Attempts, now); err != nil {
			w.cfg.Log.Warn("outbox: release", "outbox_id", m.ID, "err", err)
		}
	}
}

// backoff is the wait after the attempts-th failed attempt: between half and all of
// min(RetryBase × 2^(attempts-1), RetryMax), so that messages that failed together (a mail
// server outage) do not all come back at the same moment.
// With a Schedule, it is the schedule's entry for the attempt, as it stands.
func (w *Worker) backoff(attempts int) time.Duration {
	if len(w.cfg.Schedule) > 0 {
		return w.cfg.Schedule[min(max(attempts, 1), len(w.cfg.Schedule))-1]
	}
	d := w.cfg.RetryMax
	if attempts < 1 {
		attempts = 1
	}
	if attempts <= 40 {
		d = min(w.cfg.RetryBase<<(attempts-1), w.cfg.RetryMax)
		if d <= 0 { // overflow
			d = w.cfg.RetryMax
		}
	}
	return d/2 + rand.N(d/2+1)
}

// sweep deletes finished rows older than the retention, at most once per sweepInterval.
func (w *Worker) sweep(ctx context.Context) {
	now := w.cfg.Now()
	w.mu.Lock()
	due := !now.Before(w.nextSweep)
	if due {
		w.nextSweep = now.Add(sweepInterval)
	}
	w.mu.Unlock()
	if !due {
		return
	}
	if w.cfg.OnSweep != nil {
		w.cfg.OnSweep(ctx, now)
	}
	for range 10 {
		n, err := w.st.DeleteFinishedOutbox(ctx, now.Add(-w.cfg.Retention), 500)
		if err != nil || n < 500 {
			return
		}
	}
}

// errorText is err's message as stored in last_error, at most 500 bytes.
func errorText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:500], "")
	}
	return s
}
