package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestTxExecPreparesAfterCommit: on SQLite, whose writer pool has one connection, held by the
// transaction, a query Tx.exec meets for the first time runs unprepared and is prepared once
// the transaction has committed (preparing on the pool inside the transaction would wait for
// the transaction itself: the OAuth tests hung that way); the next transaction runs it
// prepared; a rolled-back transaction prepares nothing and leaves the store usable.
func TestTxExecPreparesAfterCommit(t *testing.T) {
	s, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gatehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.InTx(ctx, func(tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, `CREATE TABLE t (a INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const insert, other = `INSERT INTO t (a) VALUES (?)`, `DELETE FROM t WHERE a = ?`
	prepared := func(q string) bool {
		_, ok := s.statements.Load(statementKey{s.writer, q})
		return ok
	}
	rolledBack := errors.New("rolled back")
	if err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, other, 1); err != nil {
			return err
		}
		return rolledBack
	}); !errors.Is(err, rolledBack) {
		t.Fatalf("InTx = %v, want the rollback", err)
	}
	if prepared(other) {
		t.Error("a query of a rolled-back transaction was prepared")
	}
	for i := range 3 {
		if err := s.InTx(ctx, func(tx *Tx) error {
			_, err := tx.exec(ctx, insert, i)
			return err
		}); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		if !prepared(insert) {
			t.Fatalf("after transaction %d: the insert is not prepared", i)
		}
	}
	var n int
	if err := s.writer.GetContext(ctx, &n, `SELECT count(*) FROM t`); err != nil || n != 3 {
		t.Fatalf("rows = %d, %v; want 3", n, err)
	}
}

// TestTxExecPreparedAcrossConnections, on SQLite and (with GATEHOUSE_TEST_POSTGRES_URL)
// PostgreSQL: once a query is prepared on the writer pool, transactions on any of the pool's
// connections run it bound to their own connection, concurrently, so the statement is
// re-prepared on a connection that has not seen it; a rolled-back transaction's prepared
// insert is undone with it (the statement ran inside the transaction, not beside it) and
// leaves the cache usable for the next transactions.
func TestTxExecPreparedAcrossConnections(t *testing.T) {
	urls := map[Dialect]string{SQLite: "sqlite:" + filepath.Join(t.TempDir(), "gatehouse.db")}
	if u := postgresTestURL(t); u != "" {
		urls[Postgres] = u
	}
	for dialect, u := range urls {
		t.Run(string(dialect), func(t *testing.T) {
			s, err := Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if err := s.InTx(ctx, func(tx *Tx) error {
				_, err := tx.tx.ExecContext(ctx, `CREATE TABLE tx_exec_t (a INTEGER)`)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			const insert = `INSERT INTO tx_exec_t (a) VALUES (?)`
			// The first transaction runs it unprepared and prepares it after its commit.
			if err := s.InTx(ctx, func(tx *Tx) error {
				_, err := tx.exec(ctx, insert, 0)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.statements.Load(statementKey{s.writer, insert}); !ok {
				t.Fatal("the insert is not prepared after the first commit")
			}
			rolledBack := errors.New("rolled back")
			if err := s.InTx(ctx, func(tx *Tx) error {
				if _, err := tx.exec(ctx, insert, 100); err != nil {
					return err
				}
				return rolledBack
			}); !errors.Is(err, rolledBack) {
				t.Fatalf("InTx = %v, want the rollback", err)
			}
			// 4 goroutines × 5 transactions, each holding its transaction open until all four
			// have begun, so that PostgreSQL's pool runs them on 4 connections at once.
			const workers, rounds = 4, 5
			errs := make(chan error, workers)
			for w := range workers {
				go func() {
					for r := range rounds {
						err := s.InTx(ctx, func(tx *Tx) error {
							_, err := tx.exec(ctx, insert, 1+w*rounds+r)
							if err == nil && dialect == Postgres {
								_, err = tx.tx.ExecContext(ctx, `SELECT pg_sleep(0.02)`)
							}
							return err
						})
						if err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			for range workers {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			var n, sum int
			if err := s.writer.GetContext(ctx, &n, `SELECT count(*) FROM tx_exec_t`); err != nil {
				t.Fatal(err)
			}
			if err := s.writer.GetContext(ctx, &sum, `SELECT COALESCE(SUM(a), 0) FROM tx_exec_t`); err != nil {
				t.Fatal(err)
			}
			// Rows 0..20: 21 rows summing to 210; the rolled-back 100 is absent.
			if n != 21 || sum != 210 {
				t.Fatalf("rows = %d, sum = %d; want 21 and 210", n, sum)
			}
			if dialect == Postgres {
				if open := s.writer.Stats().OpenConnections; open < 2 {
					t.Fatalf("open connections = %d; the test did not use several", open)
				}
			}
		})
	}
}
