package store

import (
	"context"
	"errors"
	"time"
)

// Group commit, on SQLite, for OAuth token rows written outside a transaction of their own
// (an access token of the client_credentials grant, which fosite stores without
// storage.Transactional). On SQLite a commit writes every page the row touched (the table and
// its four indexes) to the WAL: in the pinned ES256 token run (oauth.BenchmarkOAuthPinnedLoad)
// the insert and its commit were a third of a token's CPU, a quarter of it in pwrite. Rows
// queued while a transaction is running are stored together by the next one, so concurrent
// requests share those pages and that commit. As with usage events (usage_batch.go), a row is
// acknowledged only once the transaction that carried it has committed, and a row sent alone
// is written at once.
//
// It is the same small group commit as the usage queue's (groupQueue, group_commit.go: a
// mutex-guarded queue, a wake-up channel, one flusher per Store); what a flush takes is its
// own, because the usage flusher's grouping by project and its batch slots have no meaning here.

// maxTokenFlush bounds the rows of one shared transaction.
const maxTokenFlush = 64

// tokenFlushTimeout bounds one shared transaction; it follows no caller's context, since it
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
	// refused is set by storeTokens for a conditional row its client no longer allows
	// (ErrClientChanged): the row fails alone, and the transaction goes on with the others.
	refused error
}

// TokenPurge asks StoreOAuthToken to delete, in the transaction that stores the row, up to
// Limit rows that expired before ExpiredBefore (DeleteExpiredOAuthTokens); a zero Limit asks
// for nothing. The purges of the rows a transaction carries run as one statement, their
// limits added up and the earliest ExpiredBefore kept.
type TokenPurge struct {
	ExpiredBefore time.Time
	Limit         int
}

// tokens returns the Store's token queue, starting its flusher on first use.
func (s *Store) tokens() *tokenQueue {
	q := &s.tokenQueue
	q.start(nil, func() { s.flushTokens(q) })
	return q
}

// StoreOAuthToken inserts t, and runs purge, in a transaction of its own and returns once it
// has committed. On SQLite that transaction is shared with the rows other callers are storing
// at the same moment (the queue above; ctx is not followed there, the transaction carrying
// other callers' rows too); on PostgreSQL, whose transactions commit side by side, it is t's
// alone (paired pinned runs showed no gain from the queue there): one autocommit INSERT, or a
// transaction when purge asks for one. Its errors are CreateOAuthToken's and
// DeleteExpiredOAuthTokens's: a row that fails (ErrConflict, ErrInvalid, ErrClientChanged)
// fails alone, the others are stored.
func (s *Store) StoreOAuthToken(ctx context.Context, t OAuthToken, purge TokenPurge) error {
	if s.dialect == Postgres && purge.Limit == 0 {
		// One autocommit statement, not BEGIN, INSERT and COMMIT: two round trips fewer.
		query, args, err := oauthTokenInsertArgs(t)
		if err != nil {
			return err
		}
		stmt, err := s.writeStatement(ctx, query)
		if err != nil {
			return wrapError("create oauth token", err)
		}
		res, err := stmt.ExecContext(ctx, args...)
		return oauthTokenInserted(t, res, err)
	}
	if s.dialect == Postgres {
		alone := []pendingToken{{row: t, purge: purge}}
		if err := s.InTx(ctx, func(tx *Tx) error { return storeTokens(ctx, tx, alone) }); err != nil {
			return err
		}
		return alone[0].refused
	}
	p := pendingToken{row: t, purge: purge, done: make(chan error, 1)}
	if !s.tokens().add(p) {
		return errStoreClosed
	}
	return <-p.done
}

// flushTokens stores queued rows, at most maxTokenFlush a transaction, until the queue is
// empty. When a shared transaction fails, each of its rows is stored again in a transaction
// of its own, so that one bad row fails only its own caller.
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
		err := s.InTx(ctx, func(tx *Tx) error { return storeTokens(ctx, tx, batch) })
		for i := range batch {
			rowErr := err
			if err != nil && len(batch) > 1 {
				rowErr = s.InTx(ctx, func(tx *Tx) error { return storeTokens(ctx, tx, batch[i:i+1]) })
			}
			if rowErr == nil {
				rowErr = batch[i].refused
			}
			batch[i].done <- rowErr
		}
		cancel()
	}
}

// storeTokens inserts the rows of batch in tx, then runs their purges as one statement. A
// conditional row that its client no longer allows is marked refused, and the others go on.
func storeTokens(ctx context.Context, tx *Tx, batch []pendingToken) error {
	var purge TokenPurge
	for i, p := range batch {
		batch[i].refused = nil // InTx may run this again
		if err := tx.CreateOAuthToken(ctx, p.row); errors.Is(err, ErrClientChanged) {
			batch[i].refused = err
			continue
		} else if err != nil {
			return err
		}
		if p.purge.Limit > 0 {
			if purge.Limit == 0 || p.purge.ExpiredBefore.Before(purge.ExpiredBefore) {
				purge.ExpiredBefore = p.purge.ExpiredBefore
			}
			purge.Limit += p.purge.Limit
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
