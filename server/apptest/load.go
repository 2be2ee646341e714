package apptest

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// A loopback load harness: RunLoad drives a handler served on 127.0.0.1 from a fixed number of
// keep-alive connections for a fixed time and reports throughput and latency percentiles. It is
// bounded in every direction: connections (maxLoadConns), time (maxLoadDuration) and requests
// (maxLoadRequests), and it dials 127.0.0.1 only, whatever URL a request names, and never
// through a proxy.

const (
	maxLoadConns    = 256
	maxLoadDuration = 2 * time.Minute
	maxLoadRequests = 10_000_000
)

// LoadResult is what one RunLoad measured. Requests counts completed requests (errors
// included) in the measured window, RPS is Requests per second of that window, and P50/P99 are
// latency percentiles over all of them. Errors counts transport failures and non-2xx answers.
type LoadResult struct {
	Requests int
	RPS      float64
	P50, P99 time.Duration
	// P95 is the 95th latency percentile; Max the slowest request (a stall shows here).
	P95, Max time.Duration
	Errors   int
	// CPU is the process's CPU time (user + system, client and server alike when both run in
	// this process) over the measured window: CPU / Requests is what one request costs,
	// whatever else the machine is running.
	CPU time.Duration
	// DBCPU is the CPU time of the PostgreSQL server processes serving the store over the
	// measured window (see PostgresBackendCPU), when the run measured it: CPU + DBCPU per
	// request is what one request costs the machine.
	DBCPU time.Duration
	// ReaderCPU is, for each CPU reader RunLoad was given, in order, the CPU time it counted
	// over the measured window (DBCPU is the first): a server in a process of its own
	// (ProcCPU), the database's processes.
	ReaderCPU []time.Duration
	// FirstError describes the first error seen, for the benchmark's log.
	FirstError string
}

func (r LoadResult) String() string {
	out := fmt.Sprintf("%d requests, %.0f req/s, p50 %v, p99 %v, %d errors, %v CPU per request",
		r.Requests, r.RPS, r.P50, r.P99, r.Errors, r.CPUPerRequest())
	if r.DBCPU > 0 && r.Requests > 0 {
		out += fmt.Sprintf(" + %v in PostgreSQL", r.DBCPU/time.Duration(r.Requests))
	}
	return out
}

// CPUPerRequest is CPU / Requests.
func (r LoadResult) CPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Requests)
}

// RunLoad sends target() requests from conns goroutines, each holding one keep-alive
// connection, for duration after a short warm-up (duration/10, at most one second, not
// measured) that opens the connections. target must return a new request each call (the
// body is consumed) addressed to 127.0.0.1; it is called concurrently. cpuReaders each read
// some processes' CPU time so far; each is read when the measured window opens and when it
// closes, and the difference is in ReaderCPU (a nil reader counts 0). The first, when given,
// is the database server's (see PostgresBackendCPU) and is DBCPU too.
func RunLoad(tb testing.TB, target func() *http.Request, conns int, duration time.Duration, cpuReaders ...func() time.Duration) LoadResult {
	tb.Helper()
	readAll := func() []time.Duration {
		out := make([]time.Duration, len(cpuReaders))
		for i, read := range cpuReaders {
			if read != nil {
				out[i] = read()
			}
		}
		return out
	}
	if conns < 1 || conns > maxLoadConns {
		tb.Fatalf("RunLoad: %d connections, want 1..%d", conns, maxLoadConns)
	}
	if duration <= 0 || duration > maxLoadDuration {
		tb.Fatalf("RunLoad: duration %v, want (0, %v]", duration, maxLoadDuration)
	}

	warmup := min(duration/10, time.Second)
	start := time.Now()
	measureFrom, deadline := start.Add(warmup), start.Add(warmup+duration)
	var sent atomic.Int64
	type worker struct {
		latencies []time.Duration
		errors    int
		firstErr  string
	}
	workers := make([]worker, conns)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			me := &workers[w]
			me.latencies = make([]time.Duration, 0, 4096)
			buf := make([]byte, 4096)
			var conn loadConn
			defer conn.close()
			for {
				begin := time.Now()
				if !begin.Before(deadline) || sent.Add(1) > maxLoadRequests {
					return
				}
				err := conn.roundTrip(target(), buf)
				if begin.Before(measureFrom) {
					continue
				}
				me.latencies = append(me.latencies, time.Since(begin))
				if err != nil {
					if me.errors++; me.firstErr == "" {
						me.firstErr = err.Error()
					}
				}
			}
		})
	}
	var cpuStart time.Duration
	var readersStart []time.Duration
	wg.Go(func() {
		time.Sleep(time.Until(measureFrom))
		cpuStart, readersStart = ProcessCPU(), readAll()
	})
	wg.Wait()
	elapsed := time.Since(measureFrom)
	cpu := ProcessCPU() - cpuStart
	readersUsed := readAll()
	for i := range readersUsed {
		readersUsed[i] = max(readersUsed[i]-readersStart[i], 0)
	}

	var res LoadResult
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.latencies...)
		res.Errors += w.errors
		if res.FirstError == "" {
			res.FirstError = w.firstErr
		}
	}
	res.Requests, res.CPU, res.ReaderCPU = len(all), cpu, readersUsed
	if len(readersUsed) > 0 {
		res.DBCPU = readersUsed[0]
	}
	if res.Requests == 0 {
		return res
	}
	slices.Sort(all)
	res.RPS = float64(res.Requests) / elapsed.Seconds()
	res.P50 = all[(len(all)-1)*50/100]
	res.P95 = all[(len(all)-1)*95/100]
	res.P99 = all[(len(all)-1)*99/100]
	res.Max = all[len(all)-1]
	return res
}

// ProcessCPU is the user and system CPU time this process has used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PostgresBackendCPU returns a function reading the CPU time (user + system) used so far by the
// PostgreSQL server processes connected to st's database (PostgresCPU), or nil when st is not
// PostgreSQL. The load benchmarks run alone on their database, so these are the processes
// serving them; on a machine shared with other work, CPU per request is the steadier figure
// than requests per second.
func PostgresBackendCPU(tb testing.TB, st *store.Store) func() time.Duration {
	db := st.Pools()["postgres"]
	if db == nil {
		return nil
	}
	return PostgresCPU(tb, db)
}

// PostgresCPU returns a function reading the CPU time used so far by the PostgreSQL server
// processes connected to db's database (pg_stat_activity, then /proc/<pid>/stat: the server
// must run on this host); a process not found here, or gone, counts 0.
func PostgresCPU(tb testing.TB, db *sql.DB) func() time.Duration {
	return func() time.Duration {
		rows, err := db.Query("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
		if err != nil {
			tb.Errorf("pg_stat_activity: %v", err)
			return 0
		}
		defer rows.Close()
		var total time.Duration
		for rows.Next() {
			var pid int
			if rows.Scan(&pid) != nil {
				continue
			}
			cpu, err := ProcCPU(pid)
			if err != nil {
				continue // not on this host, or gone
			}
			total += cpu
		}
		return total
	}
}

// ProcCPU is the CPU time (user + system) process pid has used so far, from /proc/<pid>/stat
// (Linux only: elsewhere an error).
func ProcCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(raw))
}

// parseProcStatCPU reads utime + stime (fields 14 and 15, in clock ticks) from the text of a
// /proc/<pid>/stat file. The command name, field 2, is in parentheses and may hold spaces and
// parentheses itself, so fields are counted after its last ")".
func parseProcStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %q", stat)
	}
	// Fields after the command: state (3) … utime (14) and stime (15) are the 12th and 13th.
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command, want at least 13", len(fields))
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: utime: %w", err)
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: stime: %w", err)
	}
	return time.Duration(utime+stime) * (time.Second / clockTicks), nil
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat CPU times.
const clockTicks = 100

// LoopbackClient is an HTTP/1.1 client with conns keep-alive connections that dials
// 127.0.0.1 only, never through a proxy, and does not follow redirects.
func LoopbackClient(conns int) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy: nil, // never the environment's proxy
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil || host != "127.0.0.1" {
				return nil, fmt.Errorf("RunLoad: refusing to dial %q: loopback 127.0.0.1 only", addr)
			}
			return dialer.DialContext(ctx, "tcp4", addr)
		},
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// loadConn is one worker's keep-alive HTTP/1.1 connection to 127.0.0.1: a request is written
// with http.Request.Write and its answer read with http.ReadResponse, in the worker's own
// goroutine. net/http's Transport runs two goroutines per connection and hands every request
// and answer across channels between them; on this 2-core machine that was a quarter of the
// harness process's CPU (usage ingest profile), taken from the server it measures. The
// connection is dialled on first use and again after any failure.
type loadConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// roundTrip sends req, reads the whole answer (so the connection is reused) and returns an
// error for a transport failure or a non-2xx status.
func (lc *loadConn) roundTrip(req *http.Request, buf []byte) error {
	if req.URL.Hostname() != "127.0.0.1" {
		return fmt.Errorf("request to %s: loopback 127.0.0.1 only", req.URL.Host)
	}
	if lc.conn == nil {
		conn, err := net.DialTimeout("tcp4", req.URL.Host, 5*time.Second)
		if err != nil {
			return err
		}
		lc.conn, lc.r, lc.w = conn, bufio.NewReader(conn), bufio.NewWriter(conn)
	}
	status, body, err := lc.exchange(req, buf)
	if err != nil {
		lc.close()
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("status %d: %s", status, body)
	}
	return nil
}

// exchange writes req and reads its answer: the status and, for a non-2xx one, the start of
// the body. A connection the server closes after the answer is closed here too.
func (lc *loadConn) exchange(req *http.Request, buf []byte) (int, string, error) {
	if err := lc.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return 0, "", err
	}
	if err := req.Write(lc.w); err != nil {
		return 0, "", err
	}
	if err := lc.w.Flush(); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(lc.r, req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body strings.Builder
	for {
		n, err := resp.Body.Read(buf)
		if resp.StatusCode/100 != 2 && body.Len() < 512 {
			body.Write(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, "", err
		}
	}
	if resp.Close {
		lc.close()
	}
	return resp.StatusCode, body.String(), nil
}

// close closes the connection, if open.
func (lc *loadConn) close() {
	if lc.conn != nil {
		lc.conn.Close()
		lc.conn = nil
	}
}

// StartLoopback serves h on an IPv4 loopback port (the load client dials 127.0.0.1) until the
// benchmark ends.
func StartLoopback(tb testing.TB, h http.Handler) *httptest.Server {
	tb.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	var err error
	if ts.Listener, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	ts.Start()
	tb.Cleanup(ts.Close)
	return ts
}

// The load benchmarks' settings: LoadConns keep-alive connections for DefaultLoadDuration per
// run, unless GATEHOUSE_BENCH_DURATION (a Go duration) says otherwise (LoadDuration).
const (
	LoadConns           = 16
	DefaultLoadDuration = 5 * time.Second
)

// LoadDuration is the time per load run: GATEHOUSE_BENCH_DURATION when set, else
// DefaultLoadDuration.
func LoadDuration(tb testing.TB) time.Duration {
	tb.Helper()
	if v := os.Getenv("GATEHOUSE_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			tb.Fatalf("GATEHOUSE_BENCH_DURATION: %v", err)
		}
		return d
	}
	return DefaultLoadDuration
}
