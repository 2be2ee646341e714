package store

import (
	"context"
	"errors"
	"time"
)

// Group commit for single usage events. Every committed transaction waits for its WAL flush
// (PostgreSQL) or its journal write (SQLite), and concurrent single-event transactions also
// queue on the same rollup rows, so one transaction per event caps ingest at roughly one
// event per commit. Instead, single events are queued here and one goroutine per Store, the
// flusher, records them together: it takes the queued events of every project (up to
// MaxUsageBatch per project), records them in one transaction (on PostgreSQL one statement
// for all their projects, usage_postgres.go; on SQLite the batch path once for them all),
// hands each waiter its own result and goes on at once with what queued meanwhile. Taking
// one project per flush instead halved ingest when the load came from 10 projects: each
// commit then carried a tenth of the queue. Nothing is acknowledged before its transaction
// commits, so the durability of an acknowledged event is the same as one event per
// transaction; an event sent alone (no queue) is recorded at once, with no added wait.
//
// No library does this for database/sql; it is the usual group commit, kept small: a
// mutex-guarded queue, a wake-up channel and the flusher. A dedicated flusher rather than
// whichever caller finds the slot free: handing the slot from one caller to the next left it
// idle ~0.5 ms per transaction (the next caller had to be scheduled behind the previous
// callers' responses) out of a 3 ms cycle.

// postgresBatchSlots is how many batch calls may run their transactions at once per Store
// on PostgreSQL, besides the flusher's. Measured with 16 senders on loopback (docs/benchmarks.md,
// "What the ingest figures rest on"):
// batches of 500 record 31,100–32,800 events/s with 2 against 25,600–26,400 with 1, and
// 14,500 when all 16 batch transactions ran at once, queueing on each other's rollup row
// locks. Single events have one transaction at a time, the flusher's: two at once recorded
// 3,330 events/s against 4,340 with one (three: 2,900; four: 2,470), smaller transactions
// each with its statement, commit and wake-ups, and two writers contending for the same pages.
const postgresBatchSlots = 2

// usageFlushTimeout bounds one shared transaction; it does not follow any one caller's
// context, since the transaction carries other callers' events too.
const usageFlushTimeout = 15 * time.Second

// maxUsageFlush bounds the events of one flush, whatever their projects.
const maxUsageFlush = 4 * MaxUsageBatch

// usageQueue holds single events waiting for the flusher.
type usageQueue struct {
	groupQueue[*pendingUsage]
	// batchSlots bounds the batch calls running at once; on SQLite (one writer) the flusher
	// takes one too (shared).
	batchSlots chan struct{}
	shared     bool
}

// pendingUsage is one queued event and where its result goes (buffered, written once).
type pendingUsage struct {
	event UsageEvent
	done  chan usageOutcome
}

type usageOutcome struct {
	result IngestResult
	err    error
}

// errStoreClosed answers an event queued after Close.
var errStoreClosed = errors.New("store is closed")

// usage returns the Store's queue, starting its flusher on first use.
func (s *Store) usage() *usageQueue {
	q := &s.usageQueue
	q.start(func() {
		q.shared = s.dialect != Postgres
		q.batchSlots = make(chan struct{}, 1)
		if !q.shared {
			q.batchSlots = make(chan struct{}, postgresBatchSlots)
		}
	}, func() { s.flushQueued(q) })
	return q
}

// ingestQueued records one prepared event through the queue and returns its result once the
// transaction that carried it has committed (or failed).
func (s *Store) ingestQueued(e UsageEvent) (IngestResult, error) {
	p := &pendingUsage{event: e, done: make(chan usageOutcome, 1)}
	if !s.usage().add(p) {
		return IngestResult{}, errStoreClosed
	}
	out := <-p.done
	return out.result, out.err
}

// flushQueued records queued events, one transaction per take, until the queue is empty.
func (s *Store) flushQueued(q *usageQueue) {
	for batch := q.take(); len(batch) > 0; batch = q.take() {
		if q.shared {
			q.batchSlots <- struct{}{}
		}
		s.flushUsage(batch)
		if q.shared {
			<-q.batchSlots
		}
	}
}

// closeUsage refuses new single events, waits for the flusher to record the queued ones and
// stops it. It is part of Close, and does nothing the second time.
func (s *Store) closeUsage() { s.usage().close() }

// ingestBatch records a batch call's events in a transaction of its own, once a batch slot
// is free.
func (s *Store) ingestBatch(ctx context.Context, events []UsageEvent) ([]IngestResult, error) {
	q := s.usage()
	select {
	case q.batchSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-q.batchSlots }()
	return s.ingestPrepared(ctx, events)
}

// take removes and returns queued events in queue order: of each project at most
// MaxUsageBatch, and at most maxUsageFlush in all. The rest stay queued, in order, for the
// next take.
func (q *usageQueue) take() []*pendingUsage {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return nil
	}
	var batch, rest []*pendingUsage
	perProject := map[string]int{}
	for _, p := range q.pending {
		if len(batch) < maxUsageFlush && perProject[p.event.ProjectID] < MaxUsageBatch {
			perProject[p.event.ProjectID]++
			batch = append(batch, p)
		} else {
			rest = append(rest, p)
		}
	}
	q.pending = rest
	return batch
}

// flushUsage records batch, whatever its projects, in one transaction (ingestShared) and
// delivers every result. If that transaction fails and it carried several projects, each
// project's events are recorded again in a transaction of their own, so that a failure (a
// poisoned event, say) fails only the events of its own project's transaction, as with one
// project per flush.
func (s *Store) flushUsage(batch []*pendingUsage) {
	ctx, cancel := context.WithTimeout(context.Background(), usageFlushTimeout)
	defer cancel()
	// Group by project, keeping queue order within each project.
	var groups [][]UsageEvent
	var members [][]*pendingUsage
	index := map[string]int{}
	for _, p := range batch {
		g, ok := index[p.event.ProjectID]
		if !ok {
			g = len(groups)
			index[p.event.ProjectID] = g
			groups, members = append(groups, nil), append(members, nil)
		}
		groups[g] = append(groups[g], p.event)
		members[g] = append(members[g], p)
	}
	deliver := func(ps []*pendingUsage, results []IngestResult, err error) {
		for i, p := range ps {
			if err != nil {
				p.done <- usageOutcome{err: err}
				continue
			}
			p.done <- usageOutcome{result: results[i]}
		}
	}
	if len(groups) == 1 {
		results, err := s.ingestPrepared(ctx, groups[0])
		deliver(members[0], results, err)
		return
	}
	all, err := s.ingestShared(ctx, groups)
	if err == nil {
		for g := range groups {
			deliver(members[g], all[g], nil)
		}
		return
	}
	for g := range groups {
		results, err := s.ingestPrepared(ctx, groups[g])
		deliver(members[g], results, err)
	}
}

// ingestGroups records the groups' events (SQLite) with as few tx.ingestUsage calls as
// MaxUsageBatch allows, consecutive groups together, and puts each group's results in all.
// One call per group instead cost a flush of single events from 10 projects about eight times
// the statements of a flush from one (docs/benchmarks.md, "Ingest: profile and changes").
func (tx *Tx) ingestGroups(ctx context.Context, groups [][]UsageEvent, all [][]IngestResult, now time.Time) error {
	for from := 0; from < len(groups); {
		to, events := from, []UsageEvent(nil)
		for ; to < len(groups) && (to == from || len(events)+len(groups[to]) <= MaxUsageBatch); to++ {
			events = append(events, groups[to]...)
		}
		results, err := tx.ingestUsage(ctx, events, now)
		if err != nil {
			return err
		}
		splitResults(all[from:to], groups[from:to], results)
		from = to
	}
	return nil
}

// splitResults puts the results of the groups' events, recorded in group order, into all: one
// slice per group, each capped so that appending to one cannot overwrite the next.
func splitResults(all [][]IngestResult, groups [][]UsageEvent, results []IngestResult) {
	for g := range groups {
		all[g], results = results[:len(groups[g]):len(groups[g])], results[len(groups[g]):]
	}
}

// ingestShared records prepared events of several projects (one group each) together and
// returns one result slice per group, in group order, or an error with nothing recorded. On
// PostgreSQL that is one postgresIngest statement for all the groups' events, committed on its
// own (usage_postgres.go: every rollup is keyed, locked and joined by project); on SQLite one
// transaction running the batch path's statements once for all the groups (ingestGroups). A
// deadlock or a legacy table dropped meanwhile runs it again.
func (s *Store) ingestShared(ctx context.Context, groups [][]UsageEvent) ([][]IngestResult, error) {
	var all [][]IngestResult
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		all = make([][]IngestResult, len(groups))
		if s.dialect == Postgres {
			var events []UsageEvent
			for _, g := range groups {
				events = append(events, g...)
			}
			var results []IngestResult
			if results, err = s.ingestPostgres(ctx, events); err == nil {
				splitResults(all, groups, results)
			}
		} else {
			err = s.InTx(ctx, func(tx *Tx) error { return tx.ingestGroups(ctx, groups, all, s.Now()) })
		}
		if isUndefinedTable(err) {
			// Another replica finished the conversion and dropped usage_events_legacy.
			if rerr := s.refreshUsageLegacy(ctx); rerr != nil {
				return nil, rerr
			}
			continue
		}
		if err == nil || !isRetryableWrite(err) {
			break
		}
	}
	return all, err
}
