// Package pgcluster builds, from a Go test, a real PostgreSQL 15 topology on spare ports of
// this machine: a fresh primary (initdb in a temporary directory) and a streaming standby made
// from it with pg_basebackup -R, optionally synchronous (synchronous_standby_names). Tests use
// it for read replicas (store/replicas.go) and for failover: kill the primary, promote the
// standby.
//
// The binaries come from GATEHOUSE_TEST_PG_BIN, else /usr/lib/postgresql/15/bin. When they are
// absent, Start skips the test, unless GATEHOUSE_REQUIRE_PG_CLUSTER is set (CI sets it), in
// which case it fails. Tests running as root (as here) run every PostgreSQL program as the
// postgres user through `runuser -u postgres --`.
//
// Both clusters run with fsync=off and full_page_writes=off, which keeps start-up around a
// second or two. That loses nothing when a server process is killed (the kernel keeps what was
// written); it would only matter for a crash of the machine itself, which no test simulates.
package pgcluster

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/lib/pq" // driver "postgres"
)

// RequireEnv is the variable that turns "PostgreSQL binaries absent" from a skip into a failure.
const RequireEnv = "GATEHOUSE_REQUIRE_PG_CLUSTER"

// BinEnv names a directory holding initdb, pg_ctl and pg_basebackup, instead of DefaultBin.
const BinEnv = "GATEHOUSE_TEST_PG_BIN"

// DefaultBin is where Debian's postgresql-15 installs its server programs.
const DefaultBin = "/usr/lib/postgresql/15/bin"

// Database is the database Start creates on the primary (so the standby has it too); the URLs
// name it.
const Database = "gatehouse"

// StandbyName is the standby's application_name, the name synchronous_standby_names lists.
const StandbyName = "standby"

// Options shape the topology.
type Options struct {
	// Sync makes the standby synchronous: the primary runs with synchronous_standby_names
	// naming it, so a commit is acknowledged only once the standby has the WAL.
	Sync bool
	// NoStandby starts the primary alone (Topology.Standby is nil).
	NoStandby bool
	// Conf lines are appended to both servers' postgresql.conf after the fixture's own, which
	// they override (the fixture runs with fsync and full_page_writes off and 32 MB of shared
	// buffers, for tests; a benchmark puts back the defaults of a packaged cluster).
	Conf []string
	// ReplayTimeout bounds WaitReplayed (default 30 s).
	ReplayTimeout time.Duration
}

// Topology is a running primary and, unless Options.NoStandby, its streaming standby. Start
// registers its teardown with t.Cleanup: both servers stopped, their directory removed.
type Topology struct {
	Primary, Standby *Node
	// PrimaryURL and StandbyURL are the nodes' URLs (lib/pq, database Database, sslmode=disable).
	PrimaryURL, StandbyURL string
	dir                    string
	replayTimeout          time.Duration
	standbyPort            int
}

// Node is one PostgreSQL server of a topology.
type Node struct {
	Name    string
	Port    int
	DataDir string
	t       testing.TB
	bin     string
	log     string
	mu      sync.Mutex
	running bool
}

// URL is the node's URL for database Database.
func (n *Node) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.Port, Database)
}

// Start builds the topology that o describes, or skips t when the PostgreSQL binaries are
// absent and RequireEnv is unset. It fails t when a step fails, with the server's log.
func Start(t testing.TB, o Options) *Topology {
	t.Helper()
	bin := os.Getenv(BinEnv)
	if bin == "" {
		bin = DefaultBin
	}
	for _, prog := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, prog)); err != nil {
			if os.Getenv(RequireEnv) != "" {
				t.Fatalf("pgcluster: %s is set but %s is missing: %v", RequireEnv, prog, err)
			}
			t.Skipf("pgcluster: PostgreSQL binaries absent (%v); set %s to make this a failure", err, RequireEnv)
		}
	}
	dir, err := os.MkdirTemp("", "pgcluster-")
	if err != nil {
		t.Fatalf("pgcluster: %v", err)
	}
	top := &Topology{dir: dir, replayTimeout: cmp.Or(o.ReplayTimeout, 30*time.Second)}
	t.Cleanup(top.teardown)
	if err := chownToPostgres(dir); err != nil {
		t.Fatalf("pgcluster: %v", err)
	}
	ports := freePorts(t, 2)
	top.Primary = &Node{Name: "primary", Port: ports[0], DataDir: filepath.Join(dir, "primary"), t: t, bin: bin,
		log: filepath.Join(dir, "primary.log")}
	top.Primary.initdb()
	conf := []string{
		"port = " + strconv.Itoa(ports[0]),
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + dir + "'",
		"fsync = off", "full_page_writes = off",
		"shared_buffers = 32MB", "max_connections = 100",
		"wal_level = replica", "max_wal_senders = 5", "wal_keep_size = '256MB'",
		"hot_standby = on", "hot_standby_feedback = on",
		// Read replicas measure lag from the primary's WAL position; a short checkpoint timeout is
		// not needed, but a standby must report often.
		"wal_receiver_status_interval = '1s'",
	}
	appendConf(t, filepath.Join(top.Primary.DataDir, "postgresql.conf"), append(conf, o.Conf...))
	top.Primary.Start()
	top.Primary.exec("CREATE DATABASE "+Database+" STRATEGY FILE_COPY", "postgres")
	top.PrimaryURL = top.Primary.URL()
	top.standbyPort = ports[1]
	if !o.NoStandby {
		top.AddStandby(o.Sync)
	}
	return top
}

// AddStandby builds the primary's streaming standby (pg_basebackup of the primary as it is,
// then streaming), synchronous when sync is set, and waits until it streams. Start calls it
// unless Options.NoStandby; a test that starts the primary alone may call it later, once,
// to add a replica to a primary that already holds data.
func (top *Topology) AddStandby(sync bool) {
	t := top.Primary.t
	t.Helper()
	if top.Standby != nil {
		t.Fatalf("pgcluster: the topology has a standby already")
	}
	dir, bin, port := top.dir, top.Primary.bin, top.standbyPort
	top.Standby = &Node{Name: "standby", Port: port, DataDir: filepath.Join(dir, "standby"), t: t, bin: bin,
		log: filepath.Join(dir, "standby.log")}
	top.Standby.run("pg_basebackup", "-D", top.Standby.DataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-d", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres", top.Primary.Port))
	// postgresql.auto.conf is read last: the standby's own port, its name for
	// synchronous_standby_names, and no synchronous standby of its own once promoted (it has none).
	appendConf(t, filepath.Join(top.Standby.DataDir, "postgresql.auto.conf"), []string{
		"port = " + strconv.Itoa(port),
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'", top.Primary.Port, StandbyName),
		"synchronous_standby_names = ''",
	})
	top.Standby.Start()
	top.StandbyURL = top.Standby.URL()
	if sync {
		// Named only now: with no standby connected, every commit would wait.
		top.Primary.exec("ALTER SYSTEM SET synchronous_standby_names = '"+StandbyName+"'", "postgres")
		top.Primary.exec("SELECT pg_reload_conf()", "postgres")
	}
	top.WaitStreaming()
}

// WaitStreaming waits (up to 30 s) until the primary reports the standby streaming and, when
// the primary runs with synchronous_standby_names, counted as synchronous.
func (top *Topology) WaitStreaming() {
	t := top.Primary.t
	t.Helper()
	db := top.Primary.DB("postgres")
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE application_name = $1
			AND state = 'streaming' AND (current_setting('synchronous_standby_names') = '' OR sync_state = 'sync'))`,
			StandbyName).Scan(&ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgcluster: the standby is not streaming after 30 s (last error %v)\n%s", err, top.Standby.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitReplayed waits (up to Options.ReplayTimeout, 30 s by default) until the standby has replayed everything the primary had
// written when WaitReplayed was called.
func (top *Topology) WaitReplayed() {
	t := top.Primary.t
	t.Helper()
	primary, standby := top.Primary.DB("postgres"), top.Standby.DB("postgres")
	defer primary.Close()
	defer standby.Close()
	var target string
	if err := primary.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatalf("pgcluster: primary position: %v", err)
	}
	deadline := time.Now().Add(top.replayTimeout)
	for {
		var done bool
		err := standby.QueryRow("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", target).Scan(&done)
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgcluster: the standby has not replayed %s after %v (%v)", target, top.replayTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PauseReplay pauses the standby's WAL replay (pg_wal_replay_pause): it keeps receiving WAL
// but its data stays as it is, so its lag grows with every write on the primary.
func (n *Node) PauseReplay() { n.t.Helper(); n.Exec("SELECT pg_wal_replay_pause()") }

// ResumeReplay resumes the standby's WAL replay.
func (n *Node) ResumeReplay() { n.t.Helper(); n.Exec("SELECT pg_wal_replay_resume()") }

// DB opens database name on the node (lib/pq); the caller closes it.
func (n *Node) DB(name string) *sql.DB {
	db, err := sql.Open("postgres", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=5", n.Port, name))
	if err != nil {
		n.t.Fatalf("pgcluster: %v", err)
	}
	return db
}

// Exec runs statements on database Database of the node, failing the test on an error.
func (n *Node) Exec(query string, args ...any) {
	n.t.Helper()
	n.execIn(Database, query, args...)
}

func (n *Node) exec(query, dbname string) { n.t.Helper(); n.execIn(dbname, query) }

func (n *Node) execIn(dbname, query string, args ...any) {
	n.t.Helper()
	db := n.DB(dbname)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		n.t.Fatalf("pgcluster: %s: %s: %v", n.Name, query, err)
	}
}

// templateDir holds a fresh initdb, made once on this machine for every later topology and
// copied for each primary: initdb is most of a topology's start-up. It is built beside it and
// renamed into place, so concurrent test processes never see half of one.
var templateDir = filepath.Join(os.TempDir(), "gatehouse-pgcluster-template-15")

var template struct {
	once sync.Once
	err  error
}

// initdb makes the node's data directory: a copy of the template cluster.
func (n *Node) initdb() {
	n.t.Helper()
	template.once.Do(func() { template.err = n.makeTemplate() })
	if template.err != nil {
		n.t.Fatalf("pgcluster: initdb: %v", template.err)
	}
	// cp -a keeps the owner (postgres) and the modes initdb set.
	if out, err := exec.Command("cp", "-a", filepath.Join(templateDir, "data"), n.DataDir).CombinedOutput(); err != nil {
		n.t.Fatalf("pgcluster: copy the template cluster: %v\n%s", err, out)
	}
}

func (n *Node) makeTemplate() error {
	if _, err := os.Stat(filepath.Join(templateDir, "data", "PG_VERSION")); err == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "pgcluster-template-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := chownToPostgres(dir); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	args := []string{"-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"}
	if out, err := command(n.bin, "initdb", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	if err := os.Rename(dir, templateDir); err != nil && !errors.Is(err, os.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return err
	}
	return nil
}

// Start starts the node's server (pg_ctl start -w) and waits until it accepts connections.
func (n *Node) Start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.run("pg_ctl", "-D", n.DataDir, "-l", n.log, "-w", "-t", "60", "start")
	n.running = true
}

// Stop stops the node's server (pg_ctl stop, mode fast: sessions are ended, a checkpoint is
// written). A stopped node may be started again.
func (n *Node) Stop() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		n.run("pg_ctl", "-D", n.DataDir, "-m", "fast", "-w", "-t", "60", "stop")
		n.running = false
	}
}

// Kill sends sig to the node's postmaster. For SIGKILL it kills every server process of the
// node at once (the postmaster first stopped so that it forks no more), as a crash of the
// machine would, and returns once none is left; the node may be started again afterwards (it
// recovers from its WAL).
func (n *Node) Kill(sig syscall.Signal) {
	n.t.Helper()
	pid, err := n.postmasterPID()
	if err != nil {
		n.t.Fatalf("pgcluster: %s: %v", n.Name, err)
	}
	if sig != syscall.SIGKILL {
		if err := syscall.Kill(pid, sig); err != nil {
			n.t.Fatalf("pgcluster: %s: kill %d: %v", n.Name, pid, err)
		}
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	procs := append(childrenOf(pid), pid)
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range procs {
		for alive(p) {
			if time.Now().After(deadline) {
				n.t.Fatalf("pgcluster: %s: process %d survives SIGKILL", n.Name, p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	n.running = false
}

// Promote ends the standby's recovery (pg_ctl promote -w): it becomes a primary and accepts
// writes when Promote returns. It has no standby of its own, so its commits do not wait.
func (n *Node) Promote() {
	n.t.Helper()
	n.run("pg_ctl", "-D", n.DataDir, "-w", "-t", "60", "promote")
}

// Log returns the node's server log so far (for failure messages).
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.log)
	return string(b)
}

func (n *Node) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.DataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("not running: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// run runs a PostgreSQL program as the postgres user (through runuser when the test runs as
// root), failing the test with its output and the node's log when it fails.
func (n *Node) run(prog string, args ...string) {
	n.t.Helper()
	cmd := command(n.bin, prog, args...)
	// pg_ctl start leaves the server running with its output going to the log file: no pipes
	// that the test would wait on.
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("pgcluster: %s: %s %s: %v\n%s\n%s", n.Name, prog, strings.Join(args, " "), err, out, n.Log())
	}
}

// teardown stops every node that still runs (immediate mode: nothing to keep) and removes the
// topology's directory.
func (top *Topology) teardown() {
	for _, n := range []*Node{top.Primary, top.Standby} {
		if n == nil {
			continue
		}
		if pid, err := n.postmasterPID(); err == nil && alive(pid) {
			_ = command(n.bin, "pg_ctl", "-D", n.DataDir, "-m", "immediate", "-w", "-t", "30", "stop").Run()
		}
	}
	_ = os.RemoveAll(top.dir)
}

// command is PostgreSQL program prog of bin, to run as the postgres user: through runuser when
// the test runs as root (initdb and the server refuse root).
func command(bin, prog string, args ...string) *exec.Cmd {
	path := filepath.Join(bin, prog)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// chownToPostgres gives dir to the postgres user when running as root (initdb refuses root).
func chownToPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

func appendConf(t testing.TB, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("pgcluster: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatalf("pgcluster: %v", err)
	}
}

// portBase is where freePorts starts looking, away from the default 5432.
const portBase = 55432

// freePorts finds n TCP ports from portBase on that nothing listens on at 127.0.0.1, starting
// at an offset drawn from the process id so that concurrent test processes rarely collide.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	start := portBase + (os.Getpid()*7)%2000
	for p := start; p < start+4000 && len(out) < n; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		out = append(out, p)
	}
	if len(out) < n {
		t.Fatalf("pgcluster: no free port from %d", start)
	}
	return out
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, err := procStat(p); err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, state, err := procStat(pid)
	return err == nil && state != "Z" && state != "X"
}

// procStat reads a process's parent id and state from /proc/PID/stat.
func procStat(pid int) (ppid int, state string, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", err
	}
	// The command name is in parentheses and may contain spaces: fields follow the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, "", errors.New("bad stat")
	}
	fields := strings.Fields(string(b)[i+1:])
	if len(fields) < 2 {
		return 0, "", errors.New("bad stat")
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0], err
}
