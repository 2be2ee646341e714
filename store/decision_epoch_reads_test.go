package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSharedEpochReads: concurrent DecisionEpoch calls each get their own project's epoch as the
// table holds it (0 for a project without a row on PostgreSQL), whatever reads they shared a
// statement with; a read that queued while another's statement was out is answered by a later
// statement, so it sees a change committed before it began, which the earlier read did
// not; a caller whose context ends stops waiting without disturbing the others.
func TestSharedEpochReads(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, _ string, s *Store) {
		ctx := t.Context()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var projects []Project
		for i := range 3 {
			if err := s.InTx(ctx, func(tx *Tx) error {
				owner := User{Name: "Owner", Email: fmt.Sprintf("shared-epoch-%d@example.com", i)}
				if err := tx.CreateUser(ctx, &owner, ""); err != nil {
					return err
				}
				p, err := projectOwnedBy(ctx, tx, owner.ID, fmt.Sprintf("shared-epoch-%d", i))
				projects = append(projects, p)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		// rename moves the epoch of project p (a write its trigger sees), by plain SQL.
		rename := func(p Project, name string) {
			t.Helper()
			if _, err := s.writer.ExecContext(ctx, s.writer.Rebind(`UPDATE projects SET name = ? WHERE id = ?`), name, p.ID); err != nil {
				t.Fatal(err)
			}
		}
		rename(projects[0], "moved once")
		rename(projects[0], "moved twice")
		// stored reads the epoch as the table holds it, by plain SQL: 0 for no row.
		stored := func(projectID string) Epoch {
			t.Helper()
			query := `SELECT COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = $1), 0)`
			args := []any{projectID}
			if dialect == SQLite {
				query, args = `SELECT epoch FROM decision_epoch WHERE id = 1`, nil
			}
			var e Epoch
			if err := s.writer.QueryRowContext(ctx, query, args...).Scan(&e); err != nil {
				t.Fatal(err)
			}
			return e
		}
		ids := []string{projects[0].ID, projects[1].ID, projects[2].ID, "prj_without_a_row"}
		want := map[string]Epoch{}
		for _, id := range ids {
			want[id] = stored(id)
		}
		if dialect == Postgres {
			if want[ids[0]] == want[ids[1]] || want[ids[3]] != 0 {
				t.Fatalf("the fixture's epochs are %v: want the moved project's apart from the others', 0 without a row", want)
			}
		}

		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := ids[i%len(ids)]
				got, err := s.DecisionEpoch(ctx, id)
				if err == nil && got != want[id] {
					err = fmt.Errorf("read %d, of %s: epoch %d, want %d", i, id, got, want[id])
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// A read held after its statement returned; a change; a read queued meanwhile.
		reached, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		s.epochsRead = func() {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
		p := projects[1]
		// readLater reads p's epoch in a goroutine of its own; the channel gets the answer.
		readLater := func() <-chan Epoch {
			answer := make(chan Epoch, 1)
			go func() {
				e, err := s.DecisionEpoch(ctx, p.ID)
				if err != nil {
					t.Error(err)
				}
				answer <- e
			}()
			return answer
		}
		before := stored(p.ID)
		first := readLater()
		<-reached
		rename(p, "moved while a read was out")
		after := stored(p.ID)
		if after == before {
			t.Fatal("renaming the project did not move its epoch")
		}
		second := readLater()
		// A caller that gives up while the reader is held.
		gaveUp, cancel := context.WithCancel(ctx)
		abandoned := make(chan error, 1)
		go func() {
			_, err := s.DecisionEpoch(gaveUp, p.ID)
			abandoned <- err
		}()
		waitQueued(t, s, 2)
		cancel()
		select {
		case err := <-abandoned:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a read whose context ended: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("a read whose context ended still waits")
		}
		close(release)
		if got := <-first; got != before {
			t.Errorf("the read out before the change: epoch %d, want %d", got, before)
		}
		if got := <-second; got != after {
			t.Errorf("the read queued after the change: epoch %d, want %d (the change's)", got, after)
		}
	})
}

// waitQueued waits until n epoch reads are queued behind the reader.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	q := s.epochs()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		q.mu.Lock()
		queued := len(q.pending)
		q.mu.Unlock()
		if queued >= n {
			return
		}
	}
	t.Fatalf("fewer than %d epoch reads queued", n)
}
