package apptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A pinned child: a benchmark re-executes its own test binary as a second process, running one
// test that serves something and hands the benchmark a description of it (a handshake line on
// its standard output), pinned to one core under taskset with GOMAXPROCS=1, so that the server
// and the load generator run on cores of their own and the server's CPU is counted apart.
//
// The child lives until its standard input closes (the parent's cleanup closes it; the kernel
// closes it when the parent dies) or it gets SIGTERM (sent, on Linux, when the parent dies),
// then returns from its test so that its cleanups (a PostgreSQL schema dropped) run.

// handshakePrefix starts the one line of the child's standard output that carries the
// handshake; the test binary's own lines (PASS, --- FAIL) are not mistaken for it.
const handshakePrefix = "gatehouse-pinned-child: "

// childLifetime bounds a child's life when its parent neither closes its standard input nor
// dies (a stuck parent): the child's test times out.
const childLifetime = 30 * time.Minute

// PinnedProfileEnv names a folder in the parent's environment: when set, each pinned child
// writes a CPU profile of its whole life (seeding, the runs, their warm-ups) to
// cpu-<benchmark>-<n>.out there. Select one run with -test.bench to profile only it, e.g.
//
//	GATEHOUSE_BENCH_PROFILE=/tmp/prof ./oauth.test -test.run '^$' -test.bench 'OAuthPinnedLoad/sqlite/ES256/token$' -test.benchtime 1x
//	go tool pprof -top -cum ./oauth.test /tmp/prof/cpu-*.out
const PinnedProfileEnv = "GATEHOUSE_BENCH_PROFILE"

// childProfiles numbers the children's profiles, so that two children never share a file.
var childProfiles atomic.Int64

// PinnedChild describes the child to start: Test is the name of the test function the child
// runs, Env the variables (NAME=value) that switch that test into serving, CPU the core it is
// pinned to.
type PinnedChild struct {
	Test string
	Env  []string
	CPU  int
}

// StartPinnedChild starts the child c describes, waits up to startTimeout for its handshake
// and decodes it into out; it returns the child's process id (its CPU time is ProcCPU(pid)).
// The child is stopped when tb ends: its standard input closed, then, if it has not exited
// within 30 s, killed; a child that exits with an error fails tb. A child that exits or stays
// silent before its handshake fails tb with what it printed.
func StartPinnedChild(tb testing.TB, c PinnedChild, startTimeout time.Duration, out any) int {
	tb.Helper()
	if _, err := exec.LookPath("taskset"); err != nil {
		tb.Fatalf("pinned child: taskset (util-linux) is required: %v", err)
	}
	args := []string{"-c", strconv.Itoa(c.CPU), os.Args[0],
		"-test.run=^" + c.Test + "$", "-test.count=1", "-test.timeout=" + childLifetime.String()}
	if dir := os.Getenv(PinnedProfileEnv); dir != "" {
		file := filepath.Join(dir, fmt.Sprintf("cpu-%s-%d.out", strings.ReplaceAll(tb.Name(), "/", "_"), childProfiles.Add(1)))
		args = append(args, "-test.cpuprofile="+file)
		tb.Logf("pinned child %s: CPU profile of its whole life in %s", c.Test, file)
	}
	cmd := exec.Command("taskset", args...)
	cmd.Env = append(append(os.Environ(), c.Env...), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("pinned child: %v", err)
	}
	exited := make(chan error, 1)
	lines := bufio.NewReaderSize(stdout, 1<<20)
	type handshake struct {
		raw []byte
		err error
	}
	got := make(chan handshake, 1)
	go func() {
		raw, err := readHandshake(lines)
		got <- handshake{raw, err}
		var after strings.Builder // the test binary's PASS, or its failure
		if err == nil {
			_, _ = io.Copy(&after, lines)
		}
		err = cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w; it printed after its handshake:\n%s", err, after.String())
		}
		exited <- err
	}()
	tb.Cleanup(func() {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				tb.Errorf("pinned child %s: %v", c.Test, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			tb.Errorf("pinned child %s: still running 30 s after its input closed; killed", c.Test)
			<-exited
		}
	})
	select {
	case h := <-got:
		if h.err != nil {
			tb.Fatalf("pinned child %s: %v", c.Test, h.err)
		}
		if err := json.Unmarshal(h.raw, out); err != nil {
			tb.Fatalf("pinned child %s: handshake: %v", c.Test, err)
		}
	case <-time.After(startTimeout):
		tb.Fatalf("pinned child %s: no handshake within %v", c.Test, startTimeout)
	}
	return cmd.Process.Pid
}

// readHandshake reads lines from r up to the handshake line and returns its JSON. When r ends
// first, the error holds the lines read (the child's failure, as its test printed it).
func readHandshake(r *bufio.Reader) ([]byte, error) {
	var before strings.Builder
	for {
		line, err := r.ReadBytes('\n')
		if rest, ok := bytes.CutPrefix(line, []byte(handshakePrefix)); ok && err == nil {
			return bytes.TrimSpace(rest), nil
		}
		if before.Len() < 8<<10 {
			before.Write(line)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("exited before its handshake; it printed:\n%s", before.String())
			}
			return nil, err
		}
	}
}

// WriteHandshake writes v as the child's handshake line to w (the child's os.Stdout).
func WriteHandshake(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", handshakePrefix, raw)
	return err
}

// AwaitParent blocks the child until its parent lets it go: its standard input ends (closed
// by the parent, or by the kernel when the parent dies) or SIGTERM arrives.
func AwaitParent() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	select {
	case <-closed:
	case <-term:
	}
}
