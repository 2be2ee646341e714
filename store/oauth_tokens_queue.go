package store

import (
	"context"
	"errors"
	"time"
)

// Group commit for OAuth token rows written outside a transaction of their own (an access token
// of the client_credentials grant, which fosite stores without storage.Transactional). Rows
// queued while a take is being stored are stored together by the next one, and a row is
// acknowledged only once the take that carried it has committed, as with usage events
// (usage_batch.go); a row sent alone is written at once.
//
//   - On SQLite a take is one transaction. A commit writes every page the row touched (the table
//     and its four indexes) to the WAL: in the pinned ES256 token run
//     (oauth.BenchmarkOAuthPinnedLoad) the insert and its commit were a third of a token's CPU, a
//     quarter of it in pwrite; concurrent requests now share those pages and that commit.
//   - On PostgreSQL a take is one autocommit statement (storeTokensPostgres): one round trip,
//     one commit and one WAL flush for every row queued together. A row written by a statement
//     of its own cost PostgreSQL 440–600 µs of CPU on a slow machine, mostly in the kernel
//     (waking the backend, the socket, fdatasync), and PostgreSQL's core was the limit of the
//     pinned ES256 run. (A shared transaction of one INSERT per row, a round trip each, had
//     gained nothing on a fast machine.) See docs/benchmarks.md, "Token rows stored together on
//     PostgreSQL".
//
// It is the same small group commit as the usage queue's (groupQueue, group_commit.go: a
// mutex-guarded queue, a wake-up channel, one flusher per Store); what a flush takes is its
// own, because the usage flusher's grouping by project and its batch slots have no meaning here.

// maxTokenFlush bounds the rows of one take.
const maxTokenFlush = 64

// tokenFlushTimeout bounds one take; it follows no caller's context, since it
// carries other callers' rows too.
const tokenFlushTimeout = 15 * time.Second

// tokenQueue holds rows waiting for the token flusher.
type tokenQueue = groupQueue[pendingToken]

// pendingToken is one queued row, the purge it asks for, and where its outcome goes
// (buffered, written once).
type pendingToken struct {
	row   OAuthToken
	purge TokenPurge
	done  chan error
	// refused is set by the take (storeTokens, storeTokensPostgres) for a conditional row its
	// client no longer allows (ErrClientChanged): the row fails alone, the others are stored.
	refused error
}

// TokenPurge asks StoreOAuthToken to delete, in the take that stores the row, up to Limit rows
// that expired before ExpiredBefore (DeleteExpiredOAuthTokens); a zero Limit asks for nothing.
// The purges of the rows a take carries run as one statement, their limits added up and the
// earliest ExpiredBefore kept (plus), those of its refused rows too: a purge is housekeeping,
// not part of its row.
type TokenPurge struct {
	ExpiredBefore time.Time
	Limit         int
}

// plus returns p and q as one purge: their limits added up, the earlier ExpiredBefore of those
// that ask for something.
func (p TokenPurge) plus(q TokenPurge) TokenPurge {
	if q.Limit <= 0 {
		return p
	}
	if p.Limit == 0 || q.ExpiredBefore.Before(p.ExpiredBefore) {
		p.ExpiredBefore = q.ExpiredBefore
	}
	p.Limit += q.Limit
	return p
}

// tokens returns the Store's token queue, starting its flusher on first use.
func (s *Store) tokens() *tokenQueue {
	q := &s.tokenQueue
	q.start(nil, func() { s.flushTokens(q) })
	return q
}

// StoreOAuthToken inserts t, and runs purge, and returns once they have committed. The take that
// stores them (a transaction on SQLite, a statement on PostgreSQL) is shared with the rows other
// callers are storing at the same moment (the queue above; ctx is not followed there, the take
// carrying other callers' rows too). Its errors are CreateOAuthToken's and
// DeleteExpiredOAuthTokens's: a row that fails (ErrConflict, ErrInvalid, ErrClientChanged) fails
// alone, the others are stored.
func (s *Store) StoreOAuthToken(ctx context.Context, t OAuthToken, purge TokenPurge) error {
	p := pendingToken{row: t, purge: purge, done: make(chan error, 1)}
	if !s.tokens().add(p) {
		return errStoreClosed
	}
	return <-p.done
}

// flushTokens stores queued rows, at most maxTokenFlush a take, until the queue is empty. When
// a shared take fails, each of its rows is stored again in a take of its own, so that one bad
// row fails only its own caller.
func (s *Store) flushTokens(q *tokenQueue) {
	for {
		q.mu.Lock()
		n := min(len(q.pending), maxTokenFlush)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		q.mu.Unlock()
		if n == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), tokenFlushTimeout)
		err := s.storeTokenTake(ctx, batch)
		for i := range batch {
			rowErr := err
			if err != nil && len(batch) > 1 {
				rowErr = s.storeTokenTake(ctx, batch[i:i+1])
			}
			if rowErr == nil {
				rowErr = batch[i].refused
			}
			batch[i].done <- rowErr
		}
		cancel()
	}
}

// storeTokenTake stores the rows of take together: on PostgreSQL in one statement
// (storeTokensPostgres), on SQLite in one transaction (storeTokens).
func (s *Store) storeTokenTake(ctx context.Context, take []pendingToken) error {
	if s.dialect == Postgres {
		return s.storeTokensPostgres(ctx, take)
	}
	return s.InTx(ctx, func(tx *Tx) error { return storeTokens(ctx, tx, take) })
}

// storeTokens inserts the rows of batch in tx, then runs their purges as one statement. A
// conditional row that its client no longer allows is marked refused, and the others go on.
func storeTokens(ctx context.Context, tx *Tx, batch []pendingToken) error {
	var purge TokenPurge
	for i, p := range batch {
		batch[i].refused = nil // InTx may run this again
		purge = purge.plus(p.purge)
		if err := tx.CreateOAuthToken(ctx, p.row); errors.Is(err, ErrClientChanged) {
			batch[i].refused = err
		} else if err != nil {
			return err
		}
	}
	if purge.Limit == 0 {
		return nil
	}
	_, err := tx.DeleteExpiredOAuthTokens(ctx, purge.ExpiredBefore, purge.Limit)
	return err
}

// closeTokens refuses new rows, waits for the flusher to store the queued ones and stops it.
// It is part of Close, and does nothing the second time.
func (s *Store) closeTokens() { s.tokens().close() }
