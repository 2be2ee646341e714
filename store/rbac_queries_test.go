package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"
)

// TestDecisionReadsAreOneQuery: DecideBatch runs one query whatever the number of checks, and
// EffectivePermissions and PermissionHolders one each, on both databases. The store's reader
// pool is replaced by one whose driver counts every statement it runs.
func TestDecisionReadsAreOneQuery(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, dbURL string, s *Store) {
		ctx := t.Context()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		projectID := seedQueryCountProject(t, s)

		var queries atomic.Int64
		dsn := dbURL
		if dialect == SQLite {
			dsn = sqliteReaderDSN(dbURL)
		}
		base, err := sql.Open(string(dialect), "")
		if err != nil {
			t.Fatal(err)
		}
		counted := sqlx.NewDb(sql.OpenDB(countingConnector{driver: base.Driver(), dsn: dsn, queries: &queries}), string(dialect))
		defer counted.Close()
		s.reader, s.reads = counted, reads{q: counted, store: s}
		s.statements = sync.Map{}

		now := s.Now()
		count := func(what string, read func() error) {
			t.Helper()
			if err := read(); err != nil { // the first call may prepare the statement
				t.Fatalf("%s: %v", what, err)
			}
			queries.Store(0)
			if err := read(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if n := queries.Load(); n != 1 {
				t.Errorf("%s ran %d queries, want 1", what, n)
			}
		}
		for _, n := range []int{1, 2, 37, MaxChecks} {
			checks := make([]Check, n)
			for i := range checks {
				checks[i] = Check{PrincipalType: []string{PrincipalUser, PrincipalServiceAccount}[i%2],
					PrincipalID: fmt.Sprintf("p%d", i%40), Permission: fmt.Sprintf("r%d:a%d", i%3, i%10)}
			}
			for _, explain := range []bool{true, false} {
				count(fmt.Sprintf("DecideBatch of %d, explain %v", n, explain), func() error {
					res, err := s.DecideBatch(ctx, projectID, checks, now, explain)
					if err == nil && len(res) != n {
						err = fmt.Errorf("%d results", len(res))
					}
					return err
				})
			}
		}
		count("EffectivePermissions", func() error {
			_, err := s.EffectivePermissions(ctx, projectID, PrincipalUser, "p2", now)
			return err
		})
		for _, f := range []HolderFilter{{Limit: 5}, {PrincipalType: PrincipalUser, After: &PrincipalRef{Type: PrincipalUser, ID: "p10"}}} {
			count(fmt.Sprintf("PermissionHolders %+v", f), func() error {
				_, _, err := s.PermissionHolders(ctx, projectID, "r1:a1", f, now)
				return err
			})
		}
	})
}

// seedQueryCountProject writes a project with three roles and 40 principals of each type, each
// bound to two of the roles, and returns its id.
func seedQueryCountProject(t *testing.T, s *Store) string {
	t.Helper()
	ctx := t.Context()
	var projectID string
	err := s.InTx(ctx, func(tx *Tx) error {
		_, p, err := ownedProject(ctx, tx, "owner@example.com", "p")
		if err != nil {
			return err
		}
		projectID = p.ID
		var roles []ProjectRole
		for r := range 3 {
			role := ProjectRole{ProjectID: p.ID, Name: fmt.Sprint("R", r), Slug: fmt.Sprint("r", r)}
			for a := range 10 {
				role.Permissions = append(role.Permissions, fmt.Sprintf("r%d:a%d", r, a))
			}
			if err := tx.CreateProjectRole(ctx, &role); err != nil {
				return err
			}
			roles = append(roles, role)
		}
		for i := range 40 {
			for _, typ := range []string{PrincipalUser, PrincipalServiceAccount} {
				for k := range 2 {
					b := RoleBinding{ProjectID: p.ID, RoleID: roles[(i+k)%3].ID, PrincipalType: typ, PrincipalID: fmt.Sprintf("p%d", i)}
					if err := tx.CreateRoleBinding(ctx, &b); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return projectID
}

// countingConnector opens connections of driver to dsn whose statements count each run in
// queries. Its connections offer no direct query path, so database/sql runs every query
// through a statement.
type countingConnector struct {
	driver  driver.Driver
	dsn     string
	queries *atomic.Int64
}

func (c countingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c.queries}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.driver }

type countingConn struct {
	conn    driver.Conn
	queries *atomic.Int64
}

func (c countingConn) Prepare(query string) (driver.Stmt, error) {
	st, err := c.conn.Prepare(query)
	if err != nil {
		return nil, err
	}
	return countingStmt{st, c.queries}, nil
}

func (c countingConn) Close() error { return c.conn.Close() }

//lint:ignore SA1019 driver.Conn requires Begin
func (c countingConn) Begin() (driver.Tx, error) { return c.conn.Begin() }

type countingStmt struct {
	stmt    driver.Stmt
	queries *atomic.Int64
}

func (s countingStmt) Close() error  { return s.stmt.Close() }
func (s countingStmt) NumInput() int { return s.stmt.NumInput() }

// Exec and Query are driver.Stmt's own (database/sql calls them when a statement lacks the
// context variants).
func (s countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.queries.Add(1)
	//lint:ignore SA1019 the wrapped statement's own method
	return s.stmt.Exec(args)
}

func (s countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.queries.Add(1)
	//lint:ignore SA1019 the wrapped statement's own method
	return s.stmt.Query(args)
}
