package apptest

import (
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// OpenBenchBackend opens a fresh store of the backend named (one of BenchBackends), for a
// pinned child: it fails tb when that backend is not configured here (variable names the
// child's mode switch, for the message).
func OpenBenchBackend(tb testing.TB, variable, name string) *store.Store {
	tb.Helper()
	for _, be := range BenchBackends(tb) {
		if be.Name == name {
			return be.Open(tb)
		}
	}
	tb.Fatalf("%s names backend %q: no such backend here (PostgreSQL needs %s)", variable, name, storetest.PostgresURLEnv)
	return nil
}

// PinnedCPU returns the CPU readers of a pinned run on backend, in the order RunLoad takes
// them: PostgreSQL's processes serving the database GATEHOUSE_TEST_POSTGRES_URL names (nil on
// another backend; PostgreSQL is not pinned), then the server child pid's.
func PinnedCPU(b *testing.B, backend string, pid int) (db, server func() time.Duration) {
	server = func() time.Duration {
		cpu, err := ProcCPU(pid)
		if err != nil {
			b.Errorf("server child CPU: %v", err)
		}
		return cpu
	}
	if backend != string(store.Postgres) {
		return nil, server
	}
	conn, err := sql.Open("postgres", os.Getenv(storetest.PostgresURLEnv))
	if err != nil {
		b.Fatal(err)
	}
	conn.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = conn.Close() })
	return PostgresCPU(b, conn), server
}
