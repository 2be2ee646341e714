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
	// Retention is how long finished rows are kept.
	Retention time.Duration
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
		lease: time.Duration(cfg.BatchSize)*cfg.AttemptTimeout + time.Minute}
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-w.poke:
		}
		for {
			n, err := w.RunOnce(ctx)
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

// RunOnce claims the messages due now (one batch) and attempts each, and returns how many it
// claimed. When ctx ends meanwhile, the messages not yet attempted are handed back.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	now := w.cfg.Now()
	if due, err := w.st.OutboxDue(ctx, now, w.kinds); err != nil || !due {
		return 0, err
	}
	claimed, err := w.st.ClaimOutbox(ctx, now, w.lease, w.cfg.BatchSize, w.kinds)
	if err != nil {
		return 0, err
	}
	for i, m := range claimed {
		if ctx.Err() != nil {
			w.release(ctx, claimed[i:])
			break
		}
		w.attempt(ctx, m)
	}
	return len(claimed), nil
}

// attempt delivers m once and records the outcome. The attempt and its record outlive ctx (a
// stopping worker finishes what it started), bounded by AttemptTimeout.
func (w *Worker) attempt(ctx context.Context, m store.OutboxMessage) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.AttemptTimeout)
	defer cancel()
	err := w.deliver(actx, m)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	now := w.cfg.Now()
	log := w.cfg.Log.With("outbox_id", m.ID, "kind", m.Kind, "attempt", m.Attempts)
	var rerr error
	switch {
	case err == nil:
		rerr = w.st.CompleteOutbox(rctx, m.ID, m.Attempts, now)
	case IsPermanent(err) || m.Attempts >= w.cfg.MaxAttempts:
		log.Error("outbox: message given up", "err", err, "permanent", IsPermanent(err))
		rerr = w.st.FailOutbox(rctx, m.ID, m.Attempts, now, errorText(err))
	default:
		next := now.Add(w.backoff(m.Attempts))
		log.Warn("outbox: attempt failed; retrying", "err", err, "next_attempt_at", next.UTC().Format(time.RFC3339))
		rerr = w.st.RetryOutbox(rctx, m.ID, m.Attempts, next, errorText(err))
	}
	if rerr != nil {
		// The lease ends and the message is attempted again: at least once, never lost.
		log.Warn("outbox: record attempt", "err", rerr)
	}
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
func (w *Worker) backoff(attempts int) time.Duration {
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
