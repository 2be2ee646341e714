package e2e

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server"
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
	base := startAuthServer(t, logs)

	ctx, cancel := context.WithTimeout(context.Background(), authClientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", filepath.Join("e2e", "js")+string(filepath.Separator))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GATEHOUSE_BASE_URL="+base, "NO_COLOR=1", "FORCE_COLOR=0")
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
// 127.0.0.1 port, logging into logs, and returns its base URL. Invitations go
// to the default log mailer: the client gets the invitation id from
// invite-member, so no mail is needed.
func startAuthServer(t *testing.T, logs *syncBuffer) string {
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
	app, err := newServer(server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32),
		Social: []server.SocialConfig{{ID: identity.GitHub, ClientID: socialtest.ClientID,
			ClientSecret: socialtest.ClientSecret, Endpoints: fake.Endpoints(identity.GitHub)}}},
		storetest.Backends(t)[0].Open(t), log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
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
