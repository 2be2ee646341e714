package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestStoreOAuthTokenQueue, on SQLite and (with GATEHOUSE_TEST_POSTGRES_URL) PostgreSQL: rows
// queued together are stored by one take (a transaction on SQLite, a statement on PostgreSQL)
// with their purges added up; when a row of a shared take fails, it alone fails (ErrConflict)
// and the others are stored, each with its own purge; a row its client no longer allows is
// refused alone, its purge run with the others'; 40 concurrent callers are all stored; after
// Close a row is refused.
func TestStoreOAuthTokenQueue(t *testing.T) {
	urls := map[Dialect]string{SQLite: "sqlite:" + filepath.Join(t.TempDir(), "gatehouse.db")}
	if u := postgresTestURL(t); u != "" {
		urls[Postgres] = u
	}
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	row := func(sig string, expires time.Time) OAuthToken {
		return OAuthToken{Kind: OAuthAccess, Signature: sig, RequestID: "req-" + sig, ClientID: "client",
			Scopes: "[]", GrantedScopes: "[]", RequestedAudience: "[]", GrantedAudience: "[]",
			RequestedAt: now.Add(-time.Hour), ExpiresAt: expires}
	}
	live, old := now.Add(time.Hour), now.Add(-48*time.Hour)
	for dialect, u := range urls {
		t.Run(string(dialect), func(t *testing.T) {
			s, err := Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := t.Context()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			count := func(where string) int {
				t.Helper()
				var n int
				if err := s.writer.GetContext(ctx, &n, `SELECT count(*) FROM oauth_tokens WHERE `+where); err != nil {
					t.Fatal(err)
				}
				return n
			}
			seed := func(rows ...OAuthToken) {
				t.Helper()
				if err := s.InTx(ctx, func(tx *Tx) error {
					for _, r := range rows {
						if err := tx.CreateOAuthToken(ctx, r); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			// flush queues ps as one take and runs the flusher's work on it directly.
			q := s.tokens()
			flush := func(ps ...pendingToken) []error {
				t.Helper()
				for i := range ps {
					ps[i].done = make(chan error, 1)
				}
				q.mu.Lock()
				q.pending = append(q.pending, ps...)
				q.mu.Unlock()
				s.flushTokens(q)
				errs := make([]error, len(ps))
				for i, p := range ps {
					errs[i] = <-p.done
				}
				return errs
			}
			purge := func(limit int) TokenPurge { return TokenPurge{ExpiredBefore: now.Add(-24 * time.Hour), Limit: limit} }

			// Shared: two rows, purges of 1 and 1 = 2 of the 3 expired rows.
			seed(row("old-1", old), row("old-2", old), row("old-3", old))
			errs := flush(pendingToken{row: row("a", live), purge: purge(1)}, pendingToken{row: row("b", live), purge: purge(1)})
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("shared flush: %v", errs)
			}
			if got := count(`signature IN ('a', 'b')`); got != 2 {
				t.Errorf("shared flush stored %d rows, want 2", got)
			}
			if got := count(`signature LIKE 'old-%'`); got != 1 {
				t.Errorf("after purges of 1 + 1: %d expired rows left, want 1", got)
			}
			if dialect == Postgres {
				// One commit for the take: both rows carry the inserting transaction's id.
				var xids int
				if err := s.writer.GetContext(ctx, &xids, `SELECT count(DISTINCT xmin::text) FROM oauth_tokens
					WHERE signature IN ('a', 'b')`); err != nil {
					t.Fatal(err)
				}
				if xids != 1 {
					t.Errorf("the shared take's rows were written by %d transactions, want 1", xids)
				}
			}

			// A conflict in a shared take fails alone; the others are stored with their purges.
			seed(row("dup", live), row("old-4", old), row("old-5", old))
			errs = flush(pendingToken{row: row("c", live)}, pendingToken{row: row("dup", live), purge: purge(1)},
				pendingToken{row: row("d", live), purge: purge(2)}, pendingToken{row: row("e", live)})
			for i, want := range []error{nil, ErrConflict, nil, nil} {
				if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
					t.Errorf("row %d: %v, want %v", i, errs[i], want)
				}
			}
			if got := count(`signature IN ('c', 'd', 'e', 'dup')`); got != 4 {
				t.Errorf("after the conflict: %d of c, d, e, dup stored, want 4", got)
			}
			if got := count(`signature LIKE 'old-%'`); got != 1 {
				t.Errorf("after the conflict: %d expired rows left, want 1 (d's purge of 2 only)", got)
			}

			// A row conditioned on a client that is not as read (here: no such client) is refused
			// alone, in the shared take; the others are stored; the purges of all three run
			// (1 + 2 + 1 = 4, of 5 expired rows).
			seed(row("old-7", old), row("old-8", old), row("old-9", old), row("old-10", old))
			stale := row("g", live)
			stale.ClientVersion = 1
			errs = flush(pendingToken{row: row("h", live), purge: purge(1)}, pendingToken{row: stale, purge: purge(2)},
				pendingToken{row: row("i", live), purge: purge(1)})
			for i, want := range []error{nil, ErrClientChanged, nil} {
				if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
					t.Errorf("row %d of the take with a refused row: %v, want %v", i, errs[i], want)
				}
			}
			if got := count(`signature IN ('g', 'h', 'i')`); got != 2 {
				t.Errorf("after the refused row: %d of g, h, i stored, want 2 (h and i)", got)
			}
			if got := count(`signature LIKE 'old-%'`); got != 1 {
				t.Errorf("after the refused row: %d expired rows left, want 1 (purges of 1 + 2 + 1)", got)
			}

			// Concurrent callers through the queue.
			var wg sync.WaitGroup
			concurrent := make([]error, 40)
			for i := range concurrent {
				wg.Go(func() { concurrent[i] = s.StoreOAuthToken(ctx, row(fmt.Sprintf("many-%02d", i), live), TokenPurge{}) })
			}
			wg.Wait()
			for i, err := range concurrent {
				if err != nil {
					t.Errorf("concurrent row %d: %v", i, err)
				}
			}
			if got := count(`signature LIKE 'many-%'`); got != 40 {
				t.Errorf("concurrent rows stored: %d, want 40", got)
			}

			// Through StoreOAuthToken alone: a conflict and an invalid row are refused with their
			// errors, and nothing is written.
			if err := s.StoreOAuthToken(ctx, row("many-00", live), TokenPurge{}); !errors.Is(err, ErrConflict) {
				t.Errorf("a stored signature again: %v, want %v", err, ErrConflict)
			}
			bad := row("bad", live)
			bad.Kind = "nonce"
			if err := s.StoreOAuthToken(ctx, bad, TokenPurge{}); !errors.Is(err, ErrInvalid) {
				t.Errorf("an unknown kind: %v, want %v", err, ErrInvalid)
			}
			if got := count(`signature IN ('many-00', 'bad')`); got != 1 {
				t.Errorf("after the refusals: %d rows of many-00 and bad, want 1", got)
			}
			// A purge asked alone runs with its row.
			seed(row("old-6", old))
			if err := s.StoreOAuthToken(ctx, row("f", live), purge(5)); err != nil {
				t.Fatal(err)
			}
			if got := count(`signature LIKE 'old-%'`); got != 0 {
				t.Errorf("after a purge of 5: %d expired rows left, want 0", got)
			}

			s.closeTokens()
			if err := s.StoreOAuthToken(ctx, row("late", live), TokenPurge{}); !errors.Is(err, errStoreClosed) {
				t.Errorf("after close: %v, want %v", err, errStoreClosed)
			}
		})
	}
}
