package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// accountsEnv is the real app over SQLite on 127.0.0.1 with email verification required, its
// mail delivered by the outbox worker to a real SMTP server started by the test, and a native
// OAuth client (public: it always asks for consent) whose redirect URI is a local relying
// party.
type accountsEnv struct {
	base  string
	store *store.Store
	mail  *mailtest.Server
	rp    *relyingParty
	// client is the OAuth client; oauth is its x/oauth2 configuration.
	client store.OIDCClient
	oauth  oauth2.Config
	// orgID is an organization owned by owner@example.com.
	orgID, ownerID string
	// extra serves a test's own pages beside the app, on its origin, for the paths it has
	// patterns for (e2e/passkey_client_browser_test.go); the app serves everything else.
	extra *http.ServeMux
}

// startAccountsEnv starts an accountsEnv; configure changes its server.Config before the app
// is built.
func startAccountsEnv(t *testing.T, configure ...func(*server.Config)) *accountsEnv {
	t.Helper()
	ctx := context.Background()
	env := &accountsEnv{rp: startRelyingParty(t), mail: mailtest.Start(t, mailtest.Options{})}
	srv := httptest.NewUnstartedServer(nil)
	env.base = "http://" + srv.Listener.Addr().String()
	env.store = storetest.Backends(t)[0].Open(t)
	smtp, err := mail.ParseSMTPURL(env.mail.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{BaseURL: env.base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32),
		RequireEmailVerification: true, SMTP: &smtp, MailFrom: "Gatehouse <no-reply@gatehouse.test>"}
	for _, c := range configure {
		c(&cfg)
	}
	env.base = cfg.BaseURL // a configure may name the listener by another host (localhost)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := newServer(cfg, env.store, log)
	if err != nil {
		t.Fatal(err)
	}
	env.extra = http.NewServeMux()
	appHandler := app.Handler()
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := env.extra.Handler(r); pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		appHandler.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	ring, err := seal.NewKeyring(cfg.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	worker := cfg.OutboxWorker(env.store, ring, log, outbox.WorkerConfig{PollInterval: 20 * time.Millisecond,
		RetryBase: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { worker.Run(wctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	hash, err := identity.HashPassword("owner-password-1")
	if err != nil {
		t.Fatal(err)
	}
	owner := store.User{Name: "Olive Owner", Email: "owner@example.com"}
	env.client = store.OIDCClient{Name: "Compiler Desktop", Type: store.OIDCClientNative,
		RedirectURIs: []string{env.rp.url + "/cb"}, GrantTypes: []string{"authorization_code", "refresh_token"},
		Scopes: []string{"openid", "profile", "email"}}
	err = env.store.InTx(ctx, func(tx *store.Tx) error {
		org := store.Organization{Name: "Navy Labs", Slug: "navy"}
		p := store.Project{Name: "Compilers", Slug: "compilers"}
		if err := storetest.CreateOwnedProject(ctx, tx, &owner, hash, &org, &p); err != nil {
			return err
		}
		env.orgID, env.ownerID, env.client.ProjectID = org.ID, owner.ID, p.ID
		return tx.CreateOIDCClient(ctx, &env.client)
	})
	if err != nil {
		t.Fatal(err)
	}
	env.oauth = oauth2.Config{ClientID: env.client.ID, RedirectURL: env.rp.url + "/cb", Scopes: []string{"openid", "profile", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: env.base + oauth.AuthorizePath, TokenURL: env.base + oauth.TokenPath, AuthStyle: oauth2.AuthStyleInParams}}
	return env
}

// verifiedUser creates a user with a verified address and password.
func (env *accountsEnv) verifiedUser(t *testing.T, name, email, password string) store.User {
	t.Helper()
	hash, err := identity.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	u := store.User{Name: name, Email: email}
	ctx := context.Background()
	err = env.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, &u, hash); err != nil {
			return err
		}
		_, err := tx.VerifyEmail(ctx, u.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// invite writes an invitation of email to the organization, expiring at expires.
func (env *accountsEnv) invite(t *testing.T, email string, expires time.Time) store.Invitation {
	t.Helper()
	inv := store.Invitation{OrganizationID: env.orgID, Email: email, Role: "developer", InviterID: env.ownerID, ExpiresAt: expires}
	ctx := context.Background()
	if err := env.store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &inv) }); err != nil {
		t.Fatal(err)
	}
	return inv
}

// link waits for the n-th message to address and returns its link under the base URL.
func (env *accountsEnv) link(t *testing.T, address string, n int, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(env.mail.To(address)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages to %s within 30s, want %d", len(env.mail.To(address)), address, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return env.mail.To(address)[n-1].Link(t, env.base+prefix)
}

// axeSource is axe-core's browser bundle from the npm dependencies (package.json pins it).
func axeSource(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		skipOrFail(t, "axe-core is not installed ("+err.Error()+"); run npm ci")
	}
	return string(src)
}

// axeSerious runs axe-core on the current page and returns its serious and critical
// violations, one line each.
const axeSerious = `(async () => {
  const r = await axe.run(document, {resultTypes: ['violations']});
  return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => v.id + ' (' + v.impact + '): ' + v.help + ' at ' + v.nodes.map((n) => n.target.join(' ')).join(', '));
})()`

// pageDriver drives one browser through the hosted pages.
type pageDriver struct {
	t   *testing.T
	ctx context.Context
	// shots names the screenshots' prefix ("" takes none).
	shots string
}

// do runs steps, failing the test on error.
func (d pageDriver) do(name string, steps ...chromedp.Action[chromedp.Void]) {
	d.t.Helper()
	if err := chromedp.Do(d.ctx, steps...); err != nil {
		screenshot(d.ctx, d.t, d.shots+"failed.png")
		d.t.Fatalf("%s: %v", name, err)
	}
}

// waitHeading waits until the page's h1 is heading.
func (d pageDriver) waitHeading(heading string) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`(document.querySelector('h1') || {}).textContent || ''`))
		if err == nil && got == heading {
			return
		}
		if time.Now().After(deadline) {
			loc, _ := chromedp.Run(d.ctx, chromedp.Location())
			body, _ := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
			d.t.Fatalf("heading %q, want %q (%v) at %s:\n%s", got, heading, err, loc, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the page's main element contains text.
func (d pageDriver) waitText(text string) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`(document.querySelector('main') || {}).innerText || ''`))
		if err == nil && strings.Contains(got, text) {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("the page lacks %q (%v) at %s:\n%s", text, err, d.location(), got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// location is the page's URL.
func (d pageDriver) location() string {
	d.t.Helper()
	loc, err := chromedp.Run(d.ctx, chromedp.Location())
	if err != nil {
		d.t.Fatal(err)
	}
	return loc
}
