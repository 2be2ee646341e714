package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/haload"
	"github.com/gatehouse-dev/gatehouse/internal/tcpproxy"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The HA tests (make test-ha, docs/failover.md) are named TestHA…: Gatehouse reaches "the
// primary" through one address, a TCP proxy, and rides through that address going away.

// haServer is `gatehouse serve` running in the test, reaching its PostgreSQL database at
// dbURL through proxy.
type haServer struct {
	serving
	proxy *tcpproxy.Proxy
	// dbURL is the database itself (not through the proxy), for the checks.
	dbURL string
	f     *haload.Fixture
}

// startHAServer serves on a fresh schema of the test PostgreSQL behind a proxy to target (the
// database's own address when empty), with the load's fixture created. It skips without
// GATEHOUSE_TEST_POSTGRES_URL.
func startHAServer(t *testing.T, dbURL string) *haServer {
	t.Helper()
	if dbURL == "" {
		for _, b := range storetest.Backends(t) {
			if b.Name == "postgres" {
				dbURL = b.URL(t)
			}
		}
	}
	if dbURL == "" {
		t.Skip("the failover tests need PostgreSQL: set " + storetest.PostgresURLEnv + " (make test-ha)")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Listen("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	const origin = "http://gatehouse.test"
	sv := startServe(t, testEnv(t, map[string]string{
		"GATEHOUSE_DATABASE_URL":          u.String(),
		"GATEHOUSE_SECRET_KEY":            base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		"GATEHOUSE_BASE_URL":              origin,
		"GATEHOUSE_WEBHOOK_ALLOW_PRIVATE": "true",
	}))
	f := haload.Setup(t, "http://"+sv.addr.String(), origin, 4)
	return &haServer{serving: sv, proxy: proxy, dbURL: dbURL, f: f}
}

// TestHADatabaseOutageRideThrough runs mixed load (sign-ins, /authorize, config writes, single
// and batch usage ingest) while every connection to PostgreSQL is dropped and new ones are
// refused for 3 s, then allowed again, with no restart; rideThrough says what must hold.
func TestHADatabaseOutageRideThrough(t *testing.T) {
	h := startHAServer(t, "")
	h.rideThrough(t, h.dbURL, func() {
		h.proxy.Refuse(true)
		t.Logf("%d connections dropped", h.proxy.DropAll())
		time.Sleep(3 * time.Second)
		h.proxy.Refuse(false)
	})
}

// rideThrough runs the mixed load for 2 s, then disrupt (which returns once the database is
// reachable through the proxy again, at dbURL), then 4 s more, and checks that no answer was a
// 500 or went missing; that every 503 was /problems/unavailable with Retry-After; that every
// acknowledged write is in the database at dbURL; that every kind of request succeeded again
// after the disruption (the usage flusher included), within 5 s; that every committed config
// change's event reached the webhook receiver (the event outbox); that the sign-in throttle
// still counts the failures from before; and that the server still drains and exits 0 (no
// worker stuck). It prints the unavailability window.
func (h *haServer) rideThrough(t *testing.T, dbURL string, disrupt func()) {
	f := h.f
	throttled := "throttle@load.example.com"
	if code, raw := f.Do(http.MethodPost, "/api/auth/sign-up/email",
		fmt.Sprintf(`{"name":"T","email":%q,"password":%q}`, throttled, haload.Password), nil); code != http.StatusOK {
		t.Fatalf("sign up: %d %s", code, raw)
	}
	wrong := func(step string, want int) {
		t.Helper()
		code, raw := f.Do(http.MethodPost, "/api/auth/sign-in/email", fmt.Sprintf(`{"email":%q,"password":"wrong"}`, throttled), nil)
		if code != want {
			t.Fatalf("%s: %d %s, want %d", step, code, raw, want)
		}
	}
	for i := range 3 {
		wrong(fmt.Sprintf("failed sign-in %d before the disruption", i+1), http.StatusUnauthorized)
	}

	load := &haload.Load{F: f}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { load.Run(ctx); close(done) }()
	time.Sleep(2 * time.Second)
	down := time.Now()
	disrupt()
	up := time.Now()
	time.Sleep(4 * time.Second)
	stop()
	<-done

	w := load.CheckAnswers(t)
	t.Logf("disruption %v; answers by kind and status: %v", up.Sub(down).Round(time.Millisecond), load.Ledger.Statuses())
	if w.Failed == 0 {
		t.Fatal("no request failed during the disruption: the load did not reach the database through the proxy")
	}
	t.Logf("unavailability window: %v (first failure %s, first success after the last failure %s; %d of %d requests failed)",
		w.Duration().Round(time.Millisecond), w.FirstFailure.Format("15:04:05.000"), w.Recovered.Format("15:04:05.000"), w.Failed, w.Total)
	if w.Recovered.IsZero() || w.Recovered.Sub(up) > 5*time.Second {
		t.Errorf("service recovered at %v, %v after the database came back; want within 5 s", w.Recovered, w.Recovered.Sub(up))
	}
	last := map[haload.Kind]time.Duration{}
	resumed := map[haload.Kind]bool{}
	for _, o := range load.Ledger.Outcomes {
		if o.Failed() && o.End.Sub(up) > last[o.Kind] {
			last[o.Kind] = o.End.Sub(up).Round(time.Millisecond)
		}
		if o.Start.After(up) && (o.Status == http.StatusOK || o.Status == http.StatusCreated) {
			resumed[o.Kind] = true
		}
	}
	t.Logf("last failure after the database came back, by kind: %v", last)
	for _, k := range haload.Kinds {
		if !resumed[k] {
			t.Errorf("%s: no success after the disruption", k)
		}
	}
	n := load.CheckDurable(t, dbURL)
	waited := time.Now()
	// A delivery claimed when the connection broke comes back when its 45 s lease ends.
	events := load.WaitEventsDelivered(t, dbURL, 90*time.Second)
	t.Logf("%d acknowledged writes present; %d config.update events delivered, the last %v after the load stopped",
		n, events, time.Since(waited).Round(time.Millisecond))
	if n == 0 || events == 0 {
		t.Error("nothing acknowledged or no event delivered: the checks saw nothing")
	}

	wrong("failed sign-in 4 after the disruption", http.StatusUnauthorized)
	wrong("failed sign-in 5 after the disruption", http.StatusUnauthorized)
	wrong("failed sign-in 6: the counter kept the failures from before the disruption", http.StatusTooManyRequests)

	if t.Failed() {
		var internal []string
		for _, line := range strings.Split(h.stderr.String(), "\n") {
			if strings.Contains(line, "level=ERROR") && len(internal) < 5 {
				internal = append(internal, line)
			}
		}
		t.Logf("the server's first errors:\n%s", strings.Join(internal, "\n"))
	}
	h.cancel()
	select {
	case code := <-h.done:
		if code != 0 {
			t.Errorf("serve exited %d after the disruption: %s", code, h.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not drain and exit within 30 s after the disruption (a worker stuck?)")
	}
}
