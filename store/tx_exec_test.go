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
