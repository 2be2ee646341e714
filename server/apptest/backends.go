package apptest

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

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// ForEachBackend runs fn against SQLite and, when configured, PostgreSQL, each as a subtest
// named after the backend.
func ForEachBackend(t *testing.T, fn func(t *testing.T, b storetest.Backend)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// BenchBackend is a database engine to benchmark on.
type BenchBackend struct {
	Name string
	Open func(tb testing.TB) *store.Store
}

// BenchBackends returns SQLite and, when GATEHOUSE_TEST_POSTGRES_URL is set, PostgreSQL, each
// opening a fresh migrated database (a file in tb.TempDir(), or a schema dropped afterwards).
// Open takes any testing.TB: the pinned load benchmark's server child is a test.
func BenchBackends(testing.TB) []BenchBackend {
	out := []BenchBackend{{Name: string(store.SQLite), Open: func(tb testing.TB) *store.Store {
		return openBenchStore(tb, "sqlite:"+filepath.Join(tb.TempDir(), "bench.db"))
	}}}
	if base := os.Getenv(storetest.PostgresURLEnv); base != "" {
		out = append(out, BenchBackend{Name: string(store.Postgres), Open: func(tb testing.TB) *store.Store {
			return openBenchStore(tb, benchPostgresSchema(tb, base))
		}})
	}
	return out
}

func openBenchStore(b testing.TB, databaseURL string) *store.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, databaseURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return st
}

// benchPostgresSchema creates a schema of its own and returns base selecting it.
func benchPostgresSchema(b testing.TB, base string) string {
	b.Helper()
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	schema := "gh_bench_" + hex.EncodeToString(raw)
	exec := func(stmt string) {
		db, err := sql.Open("postgres", base)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(stmt); err != nil {
			b.Fatalf("%s: %v", stmt, err)
		}
	}
	exec("CREATE SCHEMA " + schema)
	b.Cleanup(func() { exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
