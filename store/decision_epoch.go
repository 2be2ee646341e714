package store

import (
	"context"
	"time"

	"github.com/lib/pq"
)

// Epoch is a decision epoch as read: a number that triggers move, in the transaction of the
// change, on every insert, update and delete of a row that APIKeyDecision reads (organizations,
// projects, service accounts, API keys, bindings, roles and role permissions), except an API
// key's last_used_at (TouchAPIKey), whoever writes it. Equal epochs of one project mean that
// nothing those reads read has changed in between.
//
//   - On SQLite it is one number for the whole file (migrations/sqlite/0036_decision_epoch.up.sql).
//   - On PostgreSQL it is the epoch of one project, moved by the writes under that project
//     (through a key's account, a permission's role) and by any change to its organization, each
//     move a fresh value of a sequence, so that a row never shows a value twice
//     (migrations/postgres/0037_decision_epochs.up.sql). Writes to other projects leave it, and
//     RBAC writes of different projects do not wait on each other.
type Epoch int64

// decisionEpochQuery reads SQLite's epoch, the file's one number.
const decisionEpochQuery = `SELECT epoch FROM decision_epoch WHERE id = 1`

// epochColumn is the column of APIKeyDecision's query that reads the epoch of the key's project
// (a.project_id).
var epochColumn = map[Dialect]string{
	SQLite:   `(SELECT epoch FROM decision_epoch WHERE id = 1) AS decision_epoch`,
	Postgres: `COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = a.project_id), 0) AS decision_epoch`,
}

// DecisionEpoch returns the decision epoch of project projectID (SQLite's is the file's one
// number, whatever the project). The reads of concurrent callers share one statement
// (epochReads, below): it runs on every kept /authorize request.
//
// The contract: a key of that project and a decision about it that APIKeyDecision read together
// with epoch e (or that were read after DecisionEpoch returned e) are still what it would
// return for as long as DecisionEpoch returns e, up to the expiries the rows carry (the key's,
// KeyDecision.Until), which the caller judges against the clock. The epoch returned was read
// after the call began: a change committed before it is always seen.
func (s *Store) DecisionEpoch(ctx context.Context, projectID string) (Epoch, error) {
	e, err := s.sharedEpochRead(ctx, projectID)
	if err != nil {
		return 0, wrapError("decision epoch", err)
	}
	return e, nil
}

// BatchDecisionEpoch is DecisionEpoch, with the same contract, for a caller that does much more
// than read the epoch: a batch of checks (server.keptChecks). On PostgreSQL it is DecisionEpoch,
// whose shared statement saves the batch a round trip. On SQLite the read is a statement of the
// caller's own: there the epoch is a local read, and sharing it released the waiting batches
// together, each then holding the one scheduler thread for a batch's worth of work, so the
// last of them waited behind the others (paired, pinned, nine rounds: median p99 12.9 ms alone
// against 14.5 shared; docs/benchmarks.md, "A batch's epoch read on SQLite: its own").
func (s *Store) BatchDecisionEpoch(ctx context.Context, projectID string) (Epoch, error) {
	if s.dialect != SQLite {
		return s.DecisionEpoch(ctx, projectID)
	}
	epochOf, err := s.queryEpochs(ctx, nil)
	if err != nil {
		return 0, wrapError("decision epoch", err)
	}
	return epochOf(projectID), nil
}

// KeepsBatchKeys reports whether a batch of checks or an RBAC lookup (x-api-key-lookup:
// with-epoch) called with an API key should keep the key at its project's decision epoch, and
// read it with that epoch when it is not kept (server.keptKeyPrincipal), rather than read it on
// its own for every request. On PostgreSQL it does: the key's query was most of a batch's
// database CPU (pinned, alternately: 84–91 µs of PostgreSQL CPU a batch against 14–16 kept),
// and a third or more of a lookup's. On SQLite, where both reads are local, keeping it
// served 8–15 % more batches on a saturated core, but their p99 grew by half (8.1–8.5 ms against
// 12.8–13.2), so the key is read (docs/benchmarks.md, "A batch's key kept at its epoch"). The
// tail comes from the scheduler, not the work: a saturated core serves its connections in turn
// only while a statement runs after the body was read (docs/benchmarks.md, "Why a SQLite
// batch's tail follows its statements").
func (s *Store) KeepsBatchKeys() bool { return s.dialect != SQLite }

// Shared epoch reads. Every kept /authorize request reads its project's epoch before anything
// else, and that read was a statement of its own: in the pinned runs about a quarter of a
// decision's server CPU on both databases, on PostgreSQL mostly lib/pq's socket write and read,
// on SQLite the read transaction's locks on the WAL index (docs/benchmarks.md, "Epoch reads
// shared"). Callers queue their project here and one reader goroutine per Store takes every
// queued read, reads all their projects' epochs in one statement (epochsQuery; on SQLite the
// one row, decisionEpochQuery) and answers each, then takes what queued meanwhile: the usual
// group commit (groupQueue, group_commit.go), for reads. Freshness is the same as a read of
// one's own: a read is taken from the queue, and its statement begun, only after the caller
// queued it, so the statement sees every change committed before the call began. A read that
// queues while a statement is out waits for the next statement rather than sharing one that may
// have begun before it. A read queued alone is sent at once.

// epochsQuery reads the epochs of the projects $1; a project without a row has none in the
// answer and reads as 0, a value the sequence never gives (as in epochColumn).
const epochsQuery = `SELECT scope_id, epoch FROM decision_epochs WHERE scope_id = ANY($1::text[])`

// epochReadTimeout bounds one shared read; it follows no caller's context, since it answers
// other callers too.
const epochReadTimeout = 5 * time.Second

// maxEpochRead bounds the distinct projects of one shared read.
const maxEpochRead = 256

// epochReads holds the reads waiting for the reader.
type epochReads = groupQueue[pendingEpoch]

// pendingEpoch is one queued read and where its outcome goes (buffered, written once).
type pendingEpoch struct {
	projectID string
	done      chan epochOutcome
}

type epochOutcome struct {
	epoch Epoch
	err   error
}

// epochs returns the Store's queue of epoch reads, starting its reader on first use.
func (s *Store) epochs() *epochReads {
	q := &s.epochReads
	q.start(nil, func() { s.readQueuedEpochs(q) })
	return q
}

// sharedEpochRead queues a read of projectID's epoch and waits for its answer, or for ctx.
func (s *Store) sharedEpochRead(ctx context.Context, projectID string) (Epoch, error) {
	p := pendingEpoch{projectID: projectID, done: make(chan epochOutcome, 1)}
	if !s.epochs().add(p) {
		return 0, errStoreClosed
	}
	select {
	case out := <-p.done:
		return out.epoch, out.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// readQueuedEpochs answers queued reads, one statement per take, until the queue is empty.
func (s *Store) readQueuedEpochs(q *epochReads) {
	for batch, ids := takeEpochReads(q); len(batch) > 0; batch, ids = takeEpochReads(q) {
		s.readEpochs(batch, ids)
	}
}

// takeEpochReads removes and returns queued reads, in queue order, of at most maxEpochRead
// distinct projects, and those projects' ids; the rest stay queued for the next take.
func takeEpochReads(q *epochReads) (batch []pendingEpoch, ids []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	projects := map[string]struct{}{}
	n := 0
	for ; n < len(q.pending); n++ {
		id := q.pending[n].projectID
		if _, ok := projects[id]; !ok {
			if len(ids) == maxEpochRead {
				break
			}
			projects[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	batch = q.pending[:n:n]
	q.pending = append([]pendingEpoch(nil), q.pending[n:]...)
	return batch, ids
}

// readEpochs reads the epochs of projects ids (batch's, each once) in one statement and
// answers every read of batch.
func (s *Store) readEpochs(batch []pendingEpoch, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), epochReadTimeout)
	defer cancel()
	epochOf, err := s.queryEpochs(ctx, ids)
	if s.epochsRead != nil {
		s.epochsRead()
	}
	for _, p := range batch {
		out := epochOutcome{err: err}
		if err == nil {
			out.epoch = epochOf(p.projectID)
		}
		p.done <- out
	}
}

// queryEpochs reads the epochs of projects ids and returns the epoch of each: on PostgreSQL
// with epochsQuery (a project without a row is absent: 0), on SQLite the file's one epoch,
// whatever the project.
func (s *Store) queryEpochs(ctx context.Context, ids []string) (func(projectID string) Epoch, error) {
	if s.dialect == SQLite {
		stmt, err := s.readStatement(ctx, decisionEpochQuery)
		if err != nil {
			return nil, err
		}
		var e Epoch
		if err := stmt.QueryRowContext(ctx).Scan(&e); err != nil {
			return nil, err
		}
		return func(string) Epoch { return e }, nil
	}
	stmt, err := s.readStatement(ctx, epochsQuery)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	epochs := make(map[string]Epoch, len(ids))
	for rows.Next() {
		var id string
		var e Epoch
		if err := rows.Scan(&id, &e); err != nil {
			return nil, err
		}
		epochs[id] = e
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return func(projectID string) Epoch { return epochs[projectID] }, nil
}

// closeEpochs refuses new epoch reads, answers the queued ones and stops the reader. It is part
// of Close, and does nothing the second time.
func (s *Store) closeEpochs() {
	s.epochs().close()
}
