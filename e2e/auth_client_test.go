package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// requireNodeE2EEnv makes a missing node or node_modules/better-auth fail
// TestAuthClientE2E instead of skipping it; make test sets it.
const requireNodeE2EEnv = "GATEHOUSE_REQUIRE_NODE_E2E"

// authClientTimeout bounds the whole node run.
const authClientTimeout = 2 * time.Minute

// TestAuthClientE2E drives the /api/auth surface with the real better-auth
// browser client (npm better-auth, createAuthClient with organizationClient):
// e2e/js/*.test.mjs run under node --test against the real server on a fresh
// SQLite store.
func TestAuthClientE2E(t *testing.T) {
	root, err := filepath.Abs("..") // go test runs in e2e/
	if err != nil {
		t.Fatal(err)
	}
	node := findNode(t, root)

	logs := &syncBuffer{}
	base, mailbox := startAuthServer(t, logs, false)
	// A second server requires verified addresses (GATEHOUSE_REQUIRE_EMAIL_VERIFICATION).
	strictBase, strictMailbox := startAuthServer(t, logs, true)

	ctx, cancel := context.WithTimeout(context.Background(), authClientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", filepath.Join("e2e", "js")+string(filepath.Separator))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GATEHOUSE_BASE_URL="+base, "GATEHOUSE_TEST_MAILBOX_URL="+mailbox,
		"GATEHOUSE_STRICT_BASE_URL="+strictBase, "GATEHOUSE_STRICT_MAILBOX_URL="+strictMailbox, "NO_COLOR=1", "FORCE_COLOR=0")
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if err != nil {
		reason := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "timed out after " + authClientTimeout.String()
		}
		t.Fatalf("node --test e2e/js/ failed (%s) against %s\n\n----- node output -----\n%s\n----- server log -----\n%s",
			reason, base, strings.TrimSpace(out.String()), strings.TrimSpace(logs.String()))
	}
	t.Logf("node --test e2e/js/ passed in %s\n%s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out.String()))
}

// findNode returns the node executable, after checking that npm ci has
// installed better-auth under root. Otherwise it skips the test, or fails it
// when GATEHOUSE_REQUIRE_NODE_E2E=1.
func findNode(t *testing.T, root string) string {
	t.Helper()
	skip := func(msg string) {
		t.Helper()
		if os.Getenv(requireNodeE2EEnv) == "1" {
			t.Fatalf("%s (%s=1)", msg, requireNodeE2EEnv)
		}
		t.Skipf("%s; run `make test` (it runs npm ci first), or set %s=1 to make this a failure", msg, requireNodeE2EEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed (Node.js 20 or later)")
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "better-auth", "package.json")); err != nil {
		skip("node_modules/better-auth is missing")
		return ""
	}
	return node
}

// startAuthServer runs the real Gatehouse app over a fresh SQLite store on a
// 127.0.0.1 port, logging into logs, and returns its base URL and the URL of
// its mailbox: the app's outbox worker delivers mail over SMTP to a real SMTP
// server (mailtest), and GET <mailbox>?to=<address> answers the messages
// delivered to address as JSON [{subject, text}], for the JS scenarios to read
// links out of.
// requireVerification sets RequireEmailVerification (the strict server of the JS tests).
func startAuthServer(t *testing.T, logs *syncBuffer, requireVerification bool) (string, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil) // listens on 127.0.0.1
	base := "http://" + srv.Listener.Addr().String()
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// GitHub sign-in goes to a local fake (the JS scenario "social sign-in" needs it).
	fake, err := socialtest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.SetUser(identity.GitHub, socialtest.User{ID: "5151", Login: "dorothy", Name: "Dorothy Vaughan",
		Email: "dorothy@example.com", EmailVerified: true})
	cfg := server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32),
		Social: []server.SocialConfig{{ID: identity.GitHub, ClientID: socialtest.ClientID,
			ClientSecret: socialtest.ClientSecret, Endpoints: fake.Endpoints(identity.GitHub)}},
		RequireEmailVerification: requireVerification}
	st := storetest.Backends(t)[0].Open(t)
	app, err := newServer(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, startMailbox(t, cfg, st, log)
}

// startMailbox runs the outbox worker of cfg over st, delivering to a real SMTP server, and an
// HTTP endpoint that lists what arrived per recipient; it returns the endpoint's URL.
func startMailbox(t *testing.T, cfg server.Config, st *store.Store, log *slog.Logger) string {
	t.Helper()
	smtp := mailtest.Start(t, mailtest.Options{})
	smtpCfg, err := mail.ParseSMTPURL(smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SMTP, cfg.MailFrom = &smtpCfg, "Gatehouse <no-reply@gatehouse.test>"
	ring, err := seal.NewKeyring(cfg.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.OutboxWorker(st, ring, log, outbox.WorkerConfig{PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	box := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		type message struct {
			Subject string `json:"subject"`
			Text    string `json:"text"`
		}
		out := []message{}
		for _, m := range smtp.To(r.URL.Query().Get("to")) {
			out = append(out, message{Subject: m.Subject, Text: m.Text})
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(out)
	}))
	t.Cleanup(box.Close)
	return box.URL
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
