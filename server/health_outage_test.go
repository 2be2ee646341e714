package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestHealthDatabaseOutage cuts the connection to a real PostgreSQL with a TCP proxy: health
// answers 503 within a second while it is down, and 200 again once it is back, in the same
// process. It needs GATEHOUSE_TEST_POSTGRES_URL (an embedded SQLite file cannot go away).
func TestHealthDatabaseOutage(t *testing.T) {
	proxy, st := proxiedPostgres(t)
	app := newTestApp(t, st, testConfig())
	health := func() (int, time.Duration) {
		start := time.Now()
		res := app.do(request{method: http.MethodGet, path: "/api/v1/health"})
		return res.Code, time.Since(start)
	}

	if code, _ := health(); code != http.StatusOK {
		t.Fatalf("before the outage: %d", code)
	}
	proxy.cut()
	for i := 0; i < 3; i++ {
		code, took := health()
		if code != http.StatusServiceUnavailable || took > time.Second {
			t.Fatalf("during the outage: %d after %v, want 503 within 1s", code, took)
		}
	}
	res := app.do(request{method: http.MethodGet, path: "/api/v1/health"})
	res.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "Service unavailable")

	proxy.restore(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := health()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage: still %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxiedPostgres opens a store on the test PostgreSQL through a TCP proxy the test controls.
// It skips without GATEHOUSE_TEST_POSTGRES_URL (an embedded SQLite file cannot go away).
func proxiedPostgres(t *testing.T) (*tcpProxy, *store.Store) {
	t.Helper()
	var pg *storetest.Backend
	for _, b := range storetest.Backends(t) {
		if b.Name == string(store.Postgres) {
			pg = &b
		}
	}
	if pg == nil {
		t.Skip("needs " + storetest.PostgresURLEnv + " (run by .ci/run)")
	}
	u, err := url.Parse(pg.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	st, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return proxy, st
}

// TestDatabaseOutageIs503: while PostgreSQL is unreachable — refusing connections, or holding
// them unanswered — every route that needs it answers 503 /problems/unavailable with
// Retry-After (never a 500), within the connect timeout rather than hanging; the auth surface
// adds better-auth's code. Once the database is back, the same requests succeed.
func TestDatabaseOutageIs503(t *testing.T) {
	proxy, st := proxiedPostgres(t)
	app := newTestApp(t, st, testConfig())
	ada := app.newFixtureUser(t, "Ada", "ada-outage@example.com")
	requests := []request{
		ada.as(request{method: http.MethodGet, path: "/api/v1/organizations"}),
		ada.as(request{method: http.MethodPost, path: "/api/v1/organizations", body: `{"name":"Acme"}`}),
		ada.as(request{method: http.MethodGet, path: "/api/auth/get-session"}),
		{method: http.MethodGet, path: "/api/v1/organizations", headers: map[string]string{"X-API-Key": "svc_sk_abcdefghijkl_" + strings.Repeat("A", 43)}},
	}
	check := func(t *testing.T) {
		for _, r := range requests {
			start := time.Now()
			res := app.do(r)
			// connect_timeout=2 bounds each attempt; a generous ceiling, not a speed goal.
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("%s %s took %v", r.method, r.path, took)
			}
			p := res.wantProblem(t, http.StatusServiceUnavailable, "unavailable", "Service unavailable")
			_ = p
			if res.Header().Get("Retry-After") == "" {
				t.Errorf("%s %s: no Retry-After", r.method, r.path)
			}
		}
	}
	proxy.cut()
	t.Run("refused", check)
	proxy.restore(t)
	proxy.blackhole()
	t.Run("unanswered", check)
	proxy.reopen()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := app.do(requests[0])
		if res.Code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage: still %d %s", res.Code, res.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(app.logs.String(), "level=ERROR") {
		t.Errorf("the outage was logged as an internal error:\n%s", app.logs.String())
	}
}

// tcpProxy forwards a loopback port to a target; cut drops every connection and stops
// listening, restore listens on the same port again.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	// blackholed: accepted connections are held open and never forwarded, as a database host
	// that stopped answering on the network would.
	blackholed bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			hold := p.blackholed
			if hold {
				p.conns = append(p.conns, c)
			}
			p.mu.Unlock()
			if hold {
				continue
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// blackhole drops the live connections and holds every new one unanswered.
func (p *tcpProxy) blackhole() {
	p.mu.Lock()
	p.blackholed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

// reopen ends a blackhole.
func (p *tcpProxy) reopen() {
	p.mu.Lock()
	p.blackholed = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

func (p *tcpProxy) restore(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("re-listen %s: %v", p.addr, err)
	}
	p.serve(ln)
}
