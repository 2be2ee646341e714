package pgcluster

import (
	"context"
	"database/sql"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestTopology builds a synchronous primary/standby pair, sees a committed row on the standby,
// kills the primary with SIGKILL, promotes the standby and writes to it.
func TestTopology(t *testing.T) {
	top := Start(t, Options{Sync: true})
	top.Primary.Exec("CREATE TABLE marks (n int PRIMARY KEY)")
	top.Primary.Exec("INSERT INTO marks VALUES (1)")

	standby := top.Standby.DB(Database)
	defer standby.Close()
	ctx := context.Background()
	var inRecovery bool
	if err := standby.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("standby in recovery = %v, %v; want true", inRecovery, err)
	}
	// Synchronous commit waits for the standby's flush, not its replay: poll for the row.
	waitCount(t, standby, 1)

	var syncState string
	primary := top.Primary.DB("postgres")
	if err := primary.QueryRowContext(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", StandbyName).Scan(&syncState); err != nil || syncState != "sync" {
		t.Fatalf("sync_state = %q, %v; want sync", syncState, err)
	}
	primary.Close()

	top.Primary.Kill(syscall.SIGKILL)
	if _, err := top.Primary.postmasterPID(); err != nil {
		t.Fatalf("postmaster.pid gone after SIGKILL: %v (a crash leaves it)", err)
	}
	top.Standby.Promote()
	if err := standby.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil || inRecovery {
		t.Fatalf("promoted standby in recovery = %v, %v; want false", inRecovery, err)
	}
	top.Standby.Exec("INSERT INTO marks VALUES (2)")
	waitCount(t, standby, 2)
}

// waitCount waits (up to 10 s) until table marks holds want rows on db.
func waitCount(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := db.QueryRow("SELECT count(*) FROM marks").Scan(&n)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("marks holds %d rows (%v); want %d", n, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is a testing.TB that records how Start ended instead of ending the test.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Cleanup(func())        {}
func (r *recorder) Skipf(string, ...any)  { r.skipped = true; runtime.Goexit() }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }

// TestMissingBinaries: without the PostgreSQL binaries Start skips, unless RequireEnv is set,
// when it fails.
func TestMissingBinaries(t *testing.T) {
	t.Setenv(BinEnv, t.TempDir())
	for _, require := range []string{"", "1"} {
		t.Setenv(RequireEnv, require)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); Start(r, Options{}) }()
		<-done
		if want := require == ""; r.skipped != want || r.failed == want {
			t.Errorf("%s=%q: skipped %v, failed %v; want skipped %v", RequireEnv, require, r.skipped, r.failed, want)
		}
	}
}
