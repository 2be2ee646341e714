package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// These tests reach inside the store; the behaviour every backend shares is
// in storetest (which cannot be imported here: it imports store).

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		dialect Dialect
		target  string
	}{
		{"postgres://u@h:5432/db?sslmode=disable", Postgres, "postgres://u@h:5432/db?connect_timeout=2&sslmode=disable"},
		{"postgresql://u@h/db?connect_timeout=2", Postgres, "postgresql://u@h/db?connect_timeout=2"},
		{"sqlite:data/gatehouse.db", SQLite, "data/gatehouse.db"},
		{"sqlite://data/gatehouse.db", SQLite, "data/gatehouse.db"},
		{"sqlite:///var/lib/gatehouse.db", SQLite, "/var/lib/gatehouse.db"},
		{"file:data/gatehouse.db", SQLite, "data/gatehouse.db"},
		{"file:///var/lib/gatehouse.db", SQLite, "/var/lib/gatehouse.db"},
		{"./data/gatehouse.db", SQLite, "./data/gatehouse.db"},
		{"/abs/gatehouse.db", SQLite, "/abs/gatehouse.db"},
	} {
		dialect, target, err := parseURL(tc.in)
		if err != nil || dialect != tc.dialect || target != tc.target {
			t.Errorf("parseURL(%q) = %q, %q, %v; want %q, %q", tc.in, dialect, target, err, tc.dialect, tc.target)
		}
	}
	for _, in := range []string{"", "sqlite:", "mysql://h/db", ":memory:", "file::memory:", "sqlite:x.db?mode=ro"} {
		if _, _, err := parseURL(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("parseURL(%q) = %v, want ErrInvalid", in, err)
		}
	}
	if _, err := Open(t.Context(), "mysql://h/db"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(mysql) = %v, want ErrInvalid", err)
	}
}

func TestSQLTime(t *testing.T) {
	for _, in := range []time.Time{
		time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2025, 1, 2, 4, 4, 5, 120000000, time.FixedZone("CET", 3600)),
		time.Date(2025, 12, 31, 23, 59, 59, 999999000, time.UTC),
	} {
		v, _ := sqlTime(in).Value()
		s := v.(string)
		if len(s) != len(sqliteTimeLayout) {
			t.Errorf("%v formats as %q: not fixed width", in, s)
		}
		var back sqlTime
		if err := back.Scan(s); err != nil || !time.Time(back).Equal(in) || time.Time(back).Location() != time.UTC {
			t.Errorf("Scan(%q) = %v, %v; want %v in UTC", s, time.Time(back), err, in)
		}
	}
	a, _ := sqlTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)).Value()
	b, _ := sqlTime(time.Date(2025, 1, 2, 3, 4, 5, 1000, time.UTC)).Value()
	if a.(string) >= b.(string) {
		t.Errorf("%s sorts after %s", a, b)
	}
}

func TestSQLitePools(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	s, err := Open(t.Context(), "sqlite:"+filepath.Join(dir, "gatehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v, %v; want mode 0700", fi, err)
	}
	if s.writer.Stats().MaxOpenConnections != 1 {
		t.Errorf("writer max open = %d, want 1", s.writer.Stats().MaxOpenConnections)
	}
	for name, db := range map[string]*sqlx.DB{"writer": s.writer, "reader": s.reader} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal", "busy_timeout": "5000", "foreign_keys": "1", "synchronous": "1",
		} {
			var got string
			if err := db.Get(&got, "PRAGMA "+pragma); err != nil || got != want {
				t.Errorf("%s: PRAGMA %s = %q, %v; want %q", name, pragma, got, err, want)
			}
		}
	}
	if _, err := s.reader.Exec("CREATE TABLE t (a)"); err == nil {
		t.Error("reader pool accepted a write; want query_only")
	}
}

// TestUniqueViolation covers both SQLite codes (PRIMARY KEY 1555, UNIQUE
// 2067) and PostgreSQL's 23505, each in a rolled-back transaction on a
// temporary table.
func TestUniqueViolation(t *testing.T) {
	urls := map[Dialect]string{SQLite: "sqlite:" + filepath.Join(t.TempDir(), "gatehouse.db")}
	if u := os.Getenv("GATEHOUSE_TEST_POSTGRES_URL"); u != "" {
		urls[Postgres] = u
	}
	errRollback := errors.New("rollback")
	for dialect, u := range urls {
		s, err := Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, tc := range []struct {
			name, insert string
			unique       bool
		}{
			{"primary key", "INSERT INTO tmp_unique (id, slug, note) VALUES ('a', 'y', 'n')", true},
			{"unique index", "INSERT INTO tmp_unique (id, slug, note) VALUES ('b', 'x', 'n')", true},
			{"not null", "INSERT INTO tmp_unique (id, slug, note) VALUES ('c', 'z', NULL)", false},
		} {
			err := s.InTx(t.Context(), func(tx *Tx) error {
				for _, q := range []string{
					"CREATE TEMPORARY TABLE tmp_unique (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, note TEXT NOT NULL)",
					"INSERT INTO tmp_unique (id, slug, note) VALUES ('a', 'x', 'n')",
				} {
					if _, err := tx.tx.Exec(q); err != nil {
						return fmt.Errorf("setup: %w", err)
					}
				}
				_, err := tx.tx.Exec(tc.insert)
				if err == nil {
					return errors.New("insert succeeded")
				}
				if got := isUniqueViolation(err); got != tc.unique {
					t.Errorf("%s %s: isUniqueViolation(%v) = %v, want %v", dialect, tc.name, err, got, tc.unique)
				}
				if mapped := wrapError("insert", err); errors.Is(mapped, ErrConflict) != tc.unique {
					t.Errorf("%s %s: wrapError = %v", dialect, tc.name, mapped)
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Errorf("%s %s: %v", dialect, tc.name, err)
			}
		}
	}
}

// blackHole accepts TCP connections and never answers, like a PostgreSQL
// server that hangs. It returns its address.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestPingHangingServer: without connect_timeout lib/pq would wait forever
// for the startup reply; Ping must return when its context expires.
func TestPingHangingServer(t *testing.T) {
	db, err := sqlx.Open("postgres", "postgres://u@"+blackHole(t)+"/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{dialect: Postgres, writer: db, reader: db, clock: time.Now}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := s.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping = %v, want context.DeadlineExceeded", err)
	}
}

func TestOpenHangingServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := Open(ctx, "postgres://u@"+blackHole(t)+"/db?sslmode=disable")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open = %v, want context.DeadlineExceeded", err)
	}
}
