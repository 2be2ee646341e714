package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/consoleui"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// consoleUser is a seeded user the browser signs in as.
type consoleUser struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Password string `json:"password"`
}

// consoleFixtures is what the node tests receive as GATEHOUSE_E2E_FIXTURES.
type consoleFixtures struct {
	// Operators start with no organization, one per viewport width ("1280", "390").
	Operators map[string]consoleUser `json:"operators"`
	// Owner owns Org (with Project) and Viewer is a viewer there.
	Owner     consoleUser `json:"owner"`
	Viewer    consoleUser `json:"viewer"`
	OrgID     string      `json:"orgId"`
	ProjectID string      `json:"projectId"`
}

// TestConsoleBrowser runs the console's Playwright tests (console/e2e/*.test.mjs, node's test
// runner, playwright-core with Debian's Chromium) against the real server over real SQLite (and
// PostgreSQL's store when GATEHOUSE_TEST_POSTGRES_URL is set), serving the console embedded in
// this test binary. It needs the console built (`make console`, which `make test` runs).
func TestConsoleBrowser(t *testing.T) {
	browser := findBrowser(t)
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..")
	node := findNode(t, root)
	if _, err := os.Stat(filepath.Join(root, "console", "node_modules", "playwright-core", "package.json")); err != nil {
		skipOrFail(t, "console/node_modules/playwright-core is missing: run `make console`")
	}
	if !consoleui.New(consoleui.Dist(), "").Available() {
		skipOrFail(t, "the console is not built into this binary: run `make console` (make test does)")
	}
	backends := storetest.Backends(t)
	st := backends[len(backends)-1].Open(t) // PostgreSQL when configured: the browser's writes hit both engines across CI
	srv := httptest.NewUnstartedServer(nil)
	// localhost, not 127.0.0.1: WebAuthn (the sign-in page's passkey button) takes no IP address
	// as a relying party id.
	base := "http://localhost:" + strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	// WebhookAllowPrivate: the webhooks view registers endpoints on this machine (no DNS here).
	cfg := server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: bytes.Repeat([]byte{7}, 32), WebhookAllowPrivate: true}
	app, err := newServer(cfg, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	fx := seedConsole(t, st)
	raw, err := json.Marshal(fx)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "console", "e2e", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no console/e2e/*.test.mjs (%v)", err)
	}
	shots := os.Getenv("GATEHOUSE_E2E_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := append([]string{"--test", "--test-concurrency=1", "--test-reporter=spec"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = filepath.Join(root, "console")
	cmd.Env = append(os.Environ(), "GATEHOUSE_URL="+base, "GATEHOUSE_E2E_FIXTURES="+string(raw),
		"GATEHOUSE_E2E_SHOTS="+shots, "CHROMIUM="+browser)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("console browser tests failed (%v):\n%s", err, out)
	}
	t.Logf("console browser tests passed:\n%s", out)
}

// seedConsole writes the users and the organization the browser tests start from.
func seedConsole(t *testing.T, st *store.Store) consoleFixtures {
	t.Helper()
	ctx := context.Background()
	user := func(name, email string) (store.User, consoleUser) {
		password := "console-password-" + strconv.Itoa(len(email))
		hash, err := identity.HashPassword(password)
		if err != nil {
			t.Fatal(err)
		}
		u := store.User{Name: name, Email: email}
		err = st.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.CreateUser(ctx, &u, hash); err != nil {
				return err
			}
			_, err := tx.VerifyEmail(ctx, u.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return u, consoleUser{ID: u.ID, Email: email, Password: password}
	}
	fx := consoleFixtures{Operators: map[string]consoleUser{}}
	for _, w := range []string{"1280", "390"} {
		_, fx.Operators[w] = user("Operator "+w, "operator-"+w+"@example.com")
	}
	_, fx.Viewer = user("Vera Viewer", "viewer@example.com")
	owner := store.User{Name: "Olive Owner", Email: "owner@example.com"}
	hash, err := identity.HashPassword("console-owner-password")
	if err != nil {
		t.Fatal(err)
	}
	org := store.Organization{Name: "Viewer Co", Slug: "viewer-co"}
	p := store.Project{Name: "Storefront", Slug: "storefront"}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := storetest.CreateOwnedProject(ctx, tx, &owner, hash, &org, &p); err != nil {
			return err
		}
		_, err := tx.AddMember(ctx, org.ID, fx.Viewer.ID, server.RoleViewer)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.Owner = consoleUser{ID: owner.ID, Email: owner.Email, Password: "console-owner-password"}
	fx.OrgID, fx.ProjectID = org.ID, p.ID
	return fx
}
