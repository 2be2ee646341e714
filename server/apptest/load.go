package apptest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
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
// body is consumed) addressed to 127.0.0.1; it is called concurrently. dbCPU, when given and
// not nil, reads the database server's CPU time so far (see PostgresBackendCPU).
func RunLoad(tb testing.TB, target func() *http.Request, conns int, duration time.Duration, dbCPU ...func() time.Duration) LoadResult {
	tb.Helper()
	readDB := func() time.Duration { return 0 }
	if len(dbCPU) > 0 && dbCPU[0] != nil {
		readDB = dbCPU[0]
	}
	tb.Helper()
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
	var cpuStart, dbStart time.Duration
	wg.Go(func() {
		time.Sleep(time.Until(measureFrom))
		cpuStart, dbStart = ProcessCPU(), readDB()
	})
	wg.Wait()
	elapsed := time.Since(measureFrom)
	cpu := ProcessCPU() - cpuStart
	dbUsed := readDB() - dbStart

	var res LoadResult
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.latencies...)
		res.Errors += w.errors
		if res.FirstError == "" {
			res.FirstError = w.firstErr
		}
	}
	res.Requests, res.CPU, res.DBCPU = len(all), cpu, max(dbUsed, 0)
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
// PostgreSQL server processes connected to st's database (pg_stat_activity, then /proc/<pid>/stat:
// the server must run on this host), or nil when st is not PostgreSQL. The load benchmarks run
// alone on their database, so these are the processes serving them; on a machine shared with
// other work, CPU per request is the steadier figure than requests per second.
func PostgresBackendCPU(tb testing.TB, st *store.Store) func() time.Duration {
	db := st.Pools()["postgres"]
	if db == nil {
		return nil
	}
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
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue // not on this host, or gone
			}
			// Fields after the parenthesised command: utime and stime are the 14th and 15th.
			fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
			if len(fields) < 13 {
				continue
			}
			var utime, stime int64
			fmt.Sscan(fields[11], &utime)
			fmt.Sscan(fields[12], &stime)
			total += time.Duration(utime+stime) * (time.Second / clockTicks)
		}
		return total
	}
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
