package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Read replicas (PostgreSQL streaming standbys). The server decides, per operation, whether a
// request may read slightly stale data (the spec's x-read: replica) and asks ReplicaReads for a
// replica; the store methods that serve such reads (analytics, the subject directory, audit
// lists) run on the pool readerFor finds in the context. Every other read, every transaction,
// and so all of authentication and authorization, stays on the primary whatever the context.
//
// A checker measures each replica's lag every DefaultReplicaCheckInterval from WAL positions:
// it samples the primary's pg_current_wal_lsn() with the time, and a replica's lag is the age
// of the newest sample its pg_last_wal_replay_lsn() has reached — how old the newest primary
// state it surely holds is. An idle primary's position does not move, so a caught-up replica
// of an idle primary is not lagging; a replica cut off from a busy primary is, even though it
// has replayed all it received. A replica that lags beyond the maximum, or does not answer, is
// skipped (the primary serves) until a check finds it healthy again. docs/read-replicas.md.

// DefaultReplicaMaxLag is the default WithReadReplicas maximum lag (GATEHOUSE_READ_MAX_LAG).
const DefaultReplicaMaxLag = 5 * time.Second

// DefaultReplicaCheckInterval is how often the replicas' lag is measured.
const DefaultReplicaCheckInterval = time.Second

// replicaCheckTimeout bounds one check of one replica (and the primary's sample).
const replicaCheckTimeout = 2 * time.Second

// WithReadReplicas names the PostgreSQL replicas (streaming standbys of the primary) that may
// serve stale-tolerant reads, and the lag beyond which one is skipped. Open connects lazily:
// an unreachable replica does not stop the store from opening. Replicas need a PostgreSQL
// primary (Open fails with ErrInvalid otherwise).
func WithReadReplicas(urls []string, maxLag time.Duration) Option {
	return func(s *Store) {
		s.replicaURLs = urls
		s.replicaMaxLag = maxLag
	}
}

// WithReplicaCheckInterval replaces DefaultReplicaCheckInterval (tests check faster).
func WithReplicaCheckInterval(d time.Duration) Option {
	return func(s *Store) { s.replicaEvery = d }
}

// Pool names the database pool that served a request's reads, for metrics.
type Pool string

const (
	PoolPrimary Pool = "primary"
	PoolReplica Pool = "replica"
)

// ReplicaStatus is a replica's state as its last check found it.
type ReplicaStatus struct {
	// Index is the replica's position in the configured list (from 0): its name in metrics.
	Index int
	// Usable: it answered the last check within the maximum lag, and no read failed on it since.
	Usable bool
	// Lag is the measured lag (0 before the first check or when unreachable).
	Lag time.Duration
	// Reachable: it answered the last check.
	Reachable bool
	CheckedAt time.Time
}

// replica is one configured read replica.
type replica struct {
	index  int
	db     *sqlx.DB
	usable atomic.Bool
	mu     sync.Mutex
	status ReplicaStatus
}

// lsnSample is the primary's WAL position at a time.
type lsnSample struct {
	at  time.Time
	lsn int64
}

// replicaSet holds the replicas and their checker.
type replicaSet struct {
	primary  *sqlx.DB
	nodes    []*replica
	maxLag   time.Duration
	every    time.Duration
	next     atomic.Uint64
	mu       sync.Mutex // guards samples
	samples  []lsnSample
	stop     chan struct{}
	finished chan struct{}
}

type replicaKey struct{}

// openReplicas builds the replica pools of s.replicaURLs and starts their checker.
func (s *Store) openReplicas() error {
	if len(s.replicaURLs) == 0 {
		return nil
	}
	if s.dialect != Postgres {
		return fmt.Errorf("%w: read replicas need a PostgreSQL primary", ErrInvalid)
	}
	rs := &replicaSet{primary: s.writer, maxLag: s.replicaMaxLag, every: s.replicaEvery,
		stop: make(chan struct{}), finished: make(chan struct{})}
	if rs.maxLag <= 0 {
		rs.maxLag = DefaultReplicaMaxLag
	}
	if rs.every <= 0 {
		rs.every = DefaultReplicaCheckInterval
	}
	for i, u := range s.replicaURLs {
		dialect, target, err := parseURL(u)
		if err == nil && dialect != Postgres {
			err = fmt.Errorf("%w: read replica %d: not a postgres:// URL", ErrInvalid, i)
		}
		if err != nil {
			for _, r := range rs.nodes {
				_ = r.db.Close()
			}
			return err
		}
		db, err := sqlx.Open("postgres", target)
		if err != nil {
			for _, r := range rs.nodes {
				_ = r.db.Close()
			}
			return err
		}
		dialect.configurePool(db, false)
		rs.nodes = append(rs.nodes, &replica{index: i, db: db, status: ReplicaStatus{Index: i}})
	}
	s.replicas = rs
	go rs.run()
	return nil
}

// closeReplicas stops the checker and closes the replica pools.
func (s *Store) closeReplicas() []error {
	rs := s.replicas
	if rs == nil {
		return nil
	}
	close(rs.stop)
	<-rs.finished
	var errs []error
	for _, r := range rs.nodes {
		errs = append(errs, r.db.Close())
	}
	return errs
}

func (rs *replicaSet) run() {
	defer close(rs.finished)
	tick := time.NewTicker(rs.every)
	defer tick.Stop()
	for {
		rs.check(context.Background())
		select {
		case <-rs.stop:
			return
		case <-tick.C:
		}
	}
}

// CheckReplicas measures every replica now (the checker does so on its own every interval)
// and returns their states; none without replicas.
func (s *Store) CheckReplicas(ctx context.Context) []ReplicaStatus {
	if s.replicas == nil {
		return nil
	}
	s.replicas.check(ctx)
	return s.ReplicaStatuses()
}

// ReplicaStatuses returns the replicas' states as their last check found them.
func (s *Store) ReplicaStatuses() []ReplicaStatus {
	if s.replicas == nil {
		return nil
	}
	out := make([]ReplicaStatus, len(s.replicas.nodes))
	for i, r := range s.replicas.nodes {
		r.mu.Lock()
		out[i] = r.status
		r.mu.Unlock()
		out[i].Usable = r.usable.Load()
	}
	return out
}

// check samples the primary's WAL position, then measures each replica against the samples.
func (rs *replicaSet) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, replicaCheckTimeout)
	defer cancel()
	at := time.Now()
	var lsn int64
	if err := rs.primary.GetContext(ctx, &lsn, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`); err == nil {
		rs.mu.Lock()
		rs.samples = append(rs.samples, lsnSample{at: at, lsn: lsn})
		// Samples older than twice the maximum lag are no longer needed: a replica behind all
		// the kept ones lags more than the maximum anyway. The newest is always kept.
		keep := 0
		for keep < len(rs.samples)-1 && at.Sub(rs.samples[keep].at) > 2*rs.maxLag {
			keep++
		}
		rs.samples = rs.samples[keep:]
		rs.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, r := range rs.nodes {
		wg.Go(func() { rs.measure(ctx, r) })
	}
	wg.Wait()
}

// measure reads one replica's replay position and sets its status.
func (rs *replicaSet) measure(ctx context.Context, r *replica) {
	var row struct {
		InRecovery bool            `db:"in_recovery"`
		Replayed   sql.NullInt64   `db:"replayed"`
		ReplayAge  sql.NullFloat64 `db:"replay_age"`
	}
	// A server that is not in recovery (a promoted standby, or a database of the primary's own
	// server in tests) holds everything it wrote: its own position counts as replayed.
	err := r.db.GetContext(ctx, &row, `SELECT pg_is_in_recovery() AS in_recovery,
		(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::bigint AS replayed,
		EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8 AS replay_age`)
	now := time.Now()
	st := ReplicaStatus{Index: r.index, CheckedAt: now, Reachable: err == nil}
	usable := false
	if err == nil && row.Replayed.Valid {
		lag, known := rs.lag(row.Replayed.Int64, now, row.ReplayAge)
		st.Lag = lag
		usable = known && lag <= rs.maxLag
	}
	r.mu.Lock()
	r.status = st
	r.mu.Unlock()
	r.usable.Store(usable)
}

// lag is how old the newest primary sample at or below replayed is. A replica behind every
// kept sample lags at least as long as the oldest one is old, and at least since its last
// replayed commit (replayAge) — the larger counts. known is false before any sample.
func (rs *replicaSet) lag(replayed int64, now time.Time, replayAge sql.NullFloat64) (time.Duration, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.samples) == 0 {
		return 0, false
	}
	for i := len(rs.samples) - 1; i >= 0; i-- {
		if rs.samples[i].lsn <= replayed {
			return max(now.Sub(rs.samples[i].at), 0), true
		}
	}
	lag := now.Sub(rs.samples[0].at)
	if replayAge.Valid {
		lag = max(lag, time.Duration(replayAge.Float64*float64(time.Second)))
	}
	return lag, true
}

// ReplicaReads returns ctx carrying a usable replica (round robin over the usable ones), for
// the store methods that serve stale-tolerant reads, and PoolReplica; or ctx unchanged and
// PoolPrimary when no replica is configured or usable.
func (s *Store) ReplicaReads(ctx context.Context) (context.Context, Pool) {
	rs := s.replicas
	if rs == nil {
		return ctx, PoolPrimary
	}
	n := uint64(len(rs.nodes))
	start := rs.next.Add(1)
	for i := range n {
		if r := rs.nodes[(start+i)%n]; r.usable.Load() {
			return context.WithValue(ctx, replicaKey{}, r), PoolReplica
		}
	}
	return ctx, PoolPrimary
}

// RetryOnPrimary is for a read that failed on the replica ctx carries: when err says the
// replica could not serve it (unreachable, or the query cancelled by a conflict with the
// standby's recovery), it returns ctx without the replica and true, and an unreachable replica
// is skipped until a check finds it answering again. Otherwise it returns ctx and false.
func (s *Store) RetryOnPrimary(ctx context.Context, err error) (context.Context, bool) {
	r, _ := ctx.Value(replicaKey{}).(*replica)
	if r == nil || err == nil {
		return ctx, false
	}
	unavailable := errors.Is(err, ErrUnavailable)
	pqErr, isPQ := errors.AsType[*pq.Error](err)
	conflict := isPQ && pqErr.Code.Class() == "40"
	if !unavailable && !conflict {
		return ctx, false
	}
	if unavailable {
		r.usable.Store(false)
	}
	return context.WithValue(ctx, replicaKey{}, (*replica)(nil)), true
}

// readerFor is the pool for a stale-tolerant read: the replica ctx carries (ReplicaReads), else
// the primary's reader.
func (s *Store) readerFor(ctx context.Context) *sqlx.DB {
	if r, _ := ctx.Value(replicaKey{}).(*replica); r != nil {
		return r.db
	}
	return s.reader
}

// replicaPools names the replica pools for their statistics: "postgres-replica-0", ….
func (s *Store) replicaPools(out map[string]*sql.DB) {
	if s.replicas == nil {
		return
	}
	for _, r := range s.replicas.nodes {
		out["postgres-replica-"+strconv.Itoa(r.index)] = r.db.DB
	}
}
