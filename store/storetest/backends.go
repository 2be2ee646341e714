// Package storetest holds the store conformance suite (Run) and the test
// databases every other test package uses (Backends).
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/lib/pq" // driver "postgres", for creating test schemas

	"github.com/gatehouse-dev/gatehouse/store"
)

// PostgresURLEnv names the environment variable that enables the PostgreSQL
// backend, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
const PostgresURLEnv = "GATEHOUSE_TEST_POSTGRES_URL"

// Backend is one database engine to run tests against.
type Backend struct {
	// Name is "sqlite" or "postgres"; use it as the subtest name.
	Name string
	// Open returns a fresh, isolated, migrated store, closed when the test
	// ends.
	Open func(t *testing.T) *store.Store
	// URL returns the URL of a fresh, isolated, EMPTY (not migrated)
	// database, for tests that call store.Open and Migrate themselves. The
	// database is dropped when the test ends.
	URL func(t *testing.T) string
}

// Backends returns SQLite (always) and PostgreSQL (when PostgresURLEnv is
// set). Every Open or URL call gets its own database: a new file in
// t.TempDir() for SQLite, a new schema (gh_test_<random>, selected through
// the URL's search_path parameter) for PostgreSQL, so test packages may run
// in parallel against one PostgreSQL database.
func Backends(t *testing.T) []Backend {
	t.Helper()
	backends := []Backend{{Name: string(store.SQLite), URL: sqliteURL}}
	if base := os.Getenv(PostgresURLEnv); base != "" {
		backends = append(backends, Backend{
			Name: string(store.Postgres),
			URL:  func(t *testing.T) string { return postgresURL(t, base) },
		})
	}
	for i := range backends {
		url := backends[i].URL
		backends[i].Open = func(t *testing.T) *store.Store { return openMigrated(t, url(t)) }
	}
	return backends
}

func openMigrated(t *testing.T, url string) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open test store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close test store: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate test store: %v", err)
	}
	return s
}

func sqliteURL(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "gatehouse.db")
}

// postgresURL creates a schema with a random name and returns base with
// search_path set to it; lib/pq sends unknown URL parameters as run-time
// parameters, so every connection of the returned URL lives in the schema.
func postgresURL(t *testing.T, base string) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "gh_test_" + hex.EncodeToString(b)

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresURLEnv, err)
	}
	adminExec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { adminExec(t, base, "DROP SCHEMA "+schema+" CASCADE") })

	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// adminExec runs one statement on a short-lived connection to base.
func adminExec(t *testing.T, base, statement string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresURLEnv, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, statement); err != nil {
		t.Fatalf("%s: %v", statement, err)
	}
}
