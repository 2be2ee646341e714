package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The end-to-end webhook tests run the real binary against a receiver that verifies every
// delivery with the Standard Webhooks reference library (npm standardwebhooks, in
// e2e/js/webhook-receiver.mjs).

// receiverNode returns the node binary, or skips (fails under GATEHOUSE_REQUIRE_NODE_E2E=1)
// when node or the standardwebhooks package is missing.
func receiverNode(t *testing.T) string {
	t.Helper()
	skip := func(why string) {
		if os.Getenv("GATEHOUSE_REQUIRE_NODE_E2E") == "1" {
			t.Fatalf("%s (GATEHOUSE_REQUIRE_NODE_E2E=1: run npm ci)", why)
		}
		t.Skip(why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed")
	}
	for _, dir := range []string{"node_modules", filepath.Join("e2e", "node_modules")} {
		if _, err := os.Stat(filepath.Join(dir, "standardwebhooks", "package.json")); err == nil {
			return node
		}
	}
	skip("node_modules/standardwebhooks is missing")
	return ""
}

// receivedEvent is one line of the receiver: a delivery and the secrets that verify it.
type receivedEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Verified []int  `json:"verified"`
}

// receiver is a running webhook-receiver.mjs.
type receiver struct {
	cmd  *exec.Cmd
	port *receiverPort
	t    *testing.T
	mu   sync.Mutex
	got  []receivedEvent
	done chan struct{}
}

// receiverPort is a port on 127.0.0.1 held for webhook receivers for the whole test. Between
// receivers nothing else can take it (another test's listener, or an outgoing connection's
// ephemeral port: a port that freePort gave back once did, during a 2-minute outage), and a
// connection to it is accepted and reset, so a delivery fails as it does against a receiver
// that is down. A receiver started on it listens on the held socket itself (node's fd 3).
type receiverPort struct {
	port string
	file *os.File // the listening socket, open from reservation to the test's end

	down     net.Listener // the resetting accept loop; nil while a receiver runs
	downDone chan struct{}
}

// reserveReceiverPort binds a port for receivers; no receiver runs on it yet.
func reserveReceiverPort(t *testing.T) *receiverPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p := &receiverPort{port: port, file: f}
	// The socket stays bound through p.file; ln was only the way to make it.
	_ = ln.Close()
	p.refuse(t)
	t.Cleanup(func() {
		p.serve()
		_ = p.file.Close()
	})
	return p
}

// url is the receiver's delivery URL.
func (p *receiverPort) url() string { return "http://127.0.0.1:" + p.port + "/hook" }

// refuse starts accepting on the held socket and resetting every connection.
func (p *receiverPort) refuse(t *testing.T) {
	ln, err := net.FileListener(p.file)
	if err != nil {
		t.Fatal(err)
	}
	p.down, p.downDone = ln, make(chan struct{})
	go func() {
		defer close(p.downDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0) // close with RST, as a port nobody serves
			_ = c.Close()
		}
	}()
}

// serve stops the resetting loop, so a receiver can accept on the socket. Connections that
// arrive in between wait in the socket's backlog.
func (p *receiverPort) serve() {
	if p.down != nil {
		_ = p.down.Close()
		<-p.downDone
		p.down = nil
	}
}

// startReceiver starts the receiver on p with secrets and waits until it listens.
func startReceiver(t *testing.T, node string, p *receiverPort, secrets ...string) *receiver {
	t.Helper()
	return startSlowReceiver(t, node, p, 0, secrets...)
}

// startSlowReceiver is startReceiver with each answer delayed by delay.
func startSlowReceiver(t *testing.T, node string, p *receiverPort, delay time.Duration, secrets ...string) *receiver {
	t.Helper()
	p.serve()
	cmd := exec.Command(node, append([]string{filepath.Join("e2e", "js", "webhook-receiver.mjs"), "fd:3"}, secrets...)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("RECEIVER_DELAY_MS=%d", delay.Milliseconds()))
	cmd.ExtraFiles = []*os.File{p.file}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &receiver{cmd: cmd, port: p, t: t, done: make(chan struct{})}
	listening := make(chan struct{})
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if first {
				first = false
				close(listening)
				continue
			}
			var e receivedEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("receiver line %q: %v", sc.Text(), err)
				continue
			}
			r.mu.Lock()
			r.got = append(r.got, e)
			r.mu.Unlock()
		}
	}()
	select {
	case <-listening:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the receiver did not start: %s", stderr.String())
	}
	t.Cleanup(r.stop)
	return r
}

// stop kills the receiver and waits for its output; its port goes back to resetting
// connections.
func (r *receiver) stop() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		<-r.done
		r.port.refuse(r.t)
	}
}

func (r *receiver) events() []receivedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// webhookFixture is a project with a service account allowed config:update (key) and a
// webhook endpoint for config.update at the receiver's URL, whose secret is secret.
type webhookFixture struct {
	projectID, envID, key, endpointID, secret string
}

// seedWebhookFixture writes the fixture directly into the (migrated) database at dbURL,
// sealing the endpoint's secret with master as the server would.
func seedWebhookFixture(t *testing.T, dbURL string, master []byte, receiverURL string) webhookFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ring, err := seal.NewKeyring(master)
	if err != nil {
		t.Fatal(err)
	}
	publicID, keySecret, full, err := identity.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	f := webhookFixture{key: full, secret: webhook.NewSecret()}
	ep := store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), URL: receiverURL, EventTypes: []string{"config.update"}}
	if ep.Secret, err = ring.Seal([]byte(f.secret), store.WebhookSecretAAD(ep.ID)); err != nil {
		t.Fatal(err)
	}
	owner := store.User{Name: "Owner", Email: "owner@hooks.example.com"}
	org := store.Organization{Name: "Hooks", Slug: "hooks"}
	prj := store.Project{Name: "Hooks", Slug: "hooks"}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := storetest.CreateOwnedProject(ctx, tx, &owner, "!no-password", &org, &prj); err != nil {
			return err
		}
		sa := store.ServiceAccount{ProjectID: prj.ID, Name: "writer", Scopes: []string{"config:update"}}
		if err := tx.CreateServiceAccount(ctx, &sa, &store.APIKey{PublicID: publicID,
			SecretHash: identity.HashAPIKeySecret(seal.DeriveKey(master, "api-key"), keySecret)}); err != nil {
			return err
		}
		ep.ProjectID = prj.ID
		return tx.CreateWebhookEndpoint(ctx, &ep)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.projectID, f.envID, f.endpointID = prj.ID, prj.Environments[0].ID, ep.ID
	return f
}

// putConfig writes config key name through base with the fixture's API key (an audited
// mutation: config.update) and returns the status, or an error when the server did not answer.
func (f webhookFixture) putConfig(client *http.Client, base, name string) (int, error) {
	req, _ := http.NewRequest(http.MethodPut, base+"/api/v1/environments/"+f.envID+"/configs/"+name,
		strings.NewReader(`{"value":"v"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", f.key)
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// configAuditIDs returns the ids of the project's config.update audit entries.
func configAuditIDs(t *testing.T, dbURL, projectID string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := map[string]bool{}
	f := store.AuditFilter{ProjectID: projectID, Action: "config.update"}
	for {
		page, more, err := st.ListAuditPage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			ids[e.ID] = true
		}
		if !more {
			return ids
		}
		last := page[len(page)-1]
		f.After = &store.AuditPosition{OccurredAt: last.OccurredAt, ID: last.ID}
	}
}

// waitDelivered waits until every id of want was received and verified with secret 0, then
// checks that nothing else arrived and that no delivery failed verification. It returns how
// many deliveries were received in all.
func waitDelivered(t *testing.T, r *receiver, want map[string]bool, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := map[string]bool{}
		for _, e := range r.events() {
			if slices.Contains(e.Verified, 0) {
				got[e.ID] = true
			}
		}
		missing := 0
		for id := range want {
			if !got[id] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d events are missing at the receiver", within, missing, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
	events := r.events()
	for _, e := range events {
		if !want[e.ID] {
			t.Errorf("received %s (%s), which is no audit id of the burst", e.ID, e.Type)
		}
		if !slices.Contains(e.Verified, 0) || e.Type != "config.update" {
			t.Errorf("delivery %+v does not verify with the endpoint's secret", e)
		}
	}
	return len(events)
}

func buildGatehouse(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// binaryEnv is the environment of a gatehouse serve on port over dbURL with master, private
// webhook receivers allowed and the retry schedule.
func binaryEnv(t *testing.T, port, dbURL string, master []byte, schedule string) []string {
	dataDir := t.TempDir()
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir,
		"GATEHOUSE_LISTEN_ADDR=127.0.0.1:" + port, "GATEHOUSE_DATA_DIR=" + dataDir,
		"GATEHOUSE_DATABASE_URL=" + dbURL, "GATEHOUSE_SECRET_KEY=" + base64.StdEncoding.EncodeToString(master),
		"GATEHOUSE_LOG_LEVEL=error", "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true",
		"GATEHOUSE_WEBHOOK_RETRY_SCHEDULE=" + schedule}
}

func testMaster() []byte {
	m := make([]byte, 32)
	for i := range m {
		m[i] = byte(100 + i)
	}
	return m
}

// burst sends n config writes (names prefix-0 … prefix-(n-1)) from 4 connections and returns
// how many were acknowledged with 201; sends the server did not answer are not retried.
func (f webhookFixture) burst(t *testing.T, base, prefix string, n int, onAck func(acked int)) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	var mu sync.Mutex
	acked := 0
	next := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				code, err := f.putConfig(client, base, fmt.Sprintf("%s_%03d", prefix, i))
				if err != nil {
					continue
				}
				if code != http.StatusCreated {
					t.Errorf("put %d: status %d", i, code)
					continue
				}
				mu.Lock()
				acked++
				a := acked
				mu.Unlock()
				if onAck != nil {
					onAck(a)
				}
			}
		})
	}
	wg.Wait()
	return acked
}
