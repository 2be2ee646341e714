package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

const testBaseURL = apptest.BaseURL

// testApp is the real echo app over a real, migrated store, driven through apptest; srv is
// the server for the tests that look into it.
type testApp struct {
	*apptest.App
	t     *testing.T
	srv   *Server
	store *store.Store
	logs  *strings.Builder
	// mailLog is the log of the development-mode outbox worker (testDeps.logMail).
	mailLog *syncBuffer
	// keys are the provider's token signing keys.
	keys *oauth.KeySet
}

// forEachBackend runs fn against SQLite and, when configured, PostgreSQL.
var forEachBackend = apptest.ForEachBackend

// The throttles' limits as docs/security.md states them ("Limits, timeouts and lifetimes";
// identity.AccountFailureLimit and its siblings must equal these): failed password checks per
// account and per client IP within one 15-minute window.
const (
	accountFailureLimit = 5
	ipFailureLimit      = 30
	failureWindow       = 15 * time.Minute
)

func testConfig() Config {
	return Config{
		ListenAddr:     ":0",
		BaseURL:        testBaseURL,
		TrustedOrigins: []string{"https://app.example.com", "http://localhost:5173"},
		BodyLimit:      1 << 20,
		SecretKey:      []byte("0123456789abcdef0123456789abcdef"),
	}
}

// testDeps are the dependencies a test replaces; nil fields are built as main builds them.
type testDeps struct {
	keys *oauth.KeySet
	// smtp, when set, receives the app's mail: an outbox worker runs for the test, delivering
	// over SMTP to it; logMail runs one that logs each message to the app's log instead (the
	// development mode). Without either, messages stay in the outbox.
	smtp    *mailtest.Server
	logMail bool
	// webhooks runs the webhook worker for the test, polling every 10 ms.
	webhooks bool
}

// newServer builds every dependency the way main's wire does (without ensuring signing keys
// up front: the key set makes each on first use), then the server over them.
func newServer(cfg Config, st *store.Store, log *slog.Logger, over testDeps) (*Server, error) {
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		return nil, err
	}
	keys := over.keys
	if keys == nil {
		// Every algorithm offered (GATEHOUSE_SIGNING_ALGS=ES256,EdDSA), so clients may register
		// any; oauth's TestOAuthSigningKeyPerAlgorithm covers one not offered.
		keys = oauth.NewKeySet(st, ring, oauth.KeySetOptions{Algorithms: oauth.SigningAlgorithms})
	}
	social, err := identity.NewSocialProviders(cfg.BaseURL, cfg.Social)
	if err != nil {
		return nil, err
	}
	accounts := identity.NewAccounts(st, cfg.AccountsConfig(social))
	provider, err := oauth.NewProvider(cfg.ProviderConfig(st, keys, accounts))
	if err != nil {
		return nil, err
	}
	metrics := NewMetrics(storePools(st))
	if st != nil {
		metrics.ObserveOutbox(st)
	}
	return New(cfg, Deps{Store: st, Log: log, Keyring: ring, Accounts: accounts, Provider: provider,
		Mailer: cfg.Mailer(st, ring), Metrics: metrics, Webhooks: cfg.Webhooks(st, ring)})
}

// startMailWorker runs, until the test ends, the outbox worker main runs, polling and
// retrying every few milliseconds: delivering over SMTP to smtp, or to log when smtp is nil.
func startMailWorker(t *testing.T, cfg Config, st *store.Store, log *slog.Logger, smtp *mailtest.Server) {
	t.Helper()
	if smtp != nil {
		smtpCfg, err := mail.ParseSMTPURL(smtp.URL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.SMTP, cfg.MailFrom, cfg.SMTPTLSConfig = &smtpCfg, "Gatehouse <no-reply@gatehouse.test>", smtp.ClientTLS
	}
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.OutboxWorker(st, ring, log, outbox.WorkerConfig{PollInterval: 10 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// startWebhookWorker runs, until the test ends, the webhook worker main runs, polling every
// 10 ms, with srv's metrics; srv's pings and redeliveries wake it.
func startWebhookWorker(t *testing.T, cfg Config, st *store.Store, log *slog.Logger, srv *Server) {
	t.Helper()
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.WebhookWorker(st, ring, log, srv.metrics, outbox.WorkerConfig{PollInterval: 10 * time.Millisecond})
	srv.webhookPoke = w.Poke
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func newTestApp(t *testing.T, st *store.Store, cfg Config) *testApp {
	t.Helper()
	return newTestAppWith(t, st, cfg, testDeps{})
}

// newTestAppWith is newTestApp with some dependencies replaced.
func newTestAppWith(t *testing.T, st *store.Store, cfg Config, over testDeps) *testApp {
	t.Helper()
	logs := &strings.Builder{}
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if over.keys == nil {
		ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
		if err != nil {
			t.Fatal(err)
		}
		over.keys = oauth.NewKeySet(st, ring, oauth.KeySetOptions{Algorithms: oauth.SigningAlgorithms}) // as in newServer
	}
	srv, err := newServer(cfg, st, log, over)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	mailLog := &syncBuffer{}
	if over.smtp != nil || over.logMail {
		startMailWorker(t, cfg, st, slog.New(slog.NewTextHandler(mailLog, nil)), over.smtp)
	}
	if over.webhooks {
		startWebhookWorker(t, cfg, st, log, srv)
	}
	app := &apptest.App{T: t, Handler: srv.Handler(), Store: st, CookieKey: srv.cookieKey, CookieName: srv.sessionCookieName}
	return &testApp{App: app, t: t, srv: srv, store: st, logs: logs, keys: over.keys, mailLog: mailLog}
}

// request is an apptest.Request under the names server's tests use.
type request struct {
	method  string
	path    string
	body    string
	headers map[string]string
}

func (r request) exported() apptest.Request {
	return apptest.Request{Method: r.method, Path: r.path, Body: r.body, Headers: r.headers}
}

func fromExported(r apptest.Request) request {
	return request{method: r.Method, path: r.Path, body: r.Body, headers: r.Headers}
}

// response is a recorded answer (apptest.Response) with helpers to decode it.
type response apptest.Response

func (a *testApp) do(r request) response {
	a.t.Helper()
	return response(a.Do(r.exported()))
}

// problem is a decoded problem+json body.
type problem = apptest.Problem[FieldError]

// wantProblem asserts status, content type, type URI, title and that requestId equals the
// x-request-id header; it returns the decoded problem.
func (r response) wantProblem(t *testing.T, status int, kind, title string) problem {
	t.Helper()
	return apptest.WantProblem[FieldError](t, apptest.Response(r), status, kind, title)
}

// decode unmarshals a JSON body into v after checking the status.
func (r response) decode(t *testing.T, status int, v any) {
	t.Helper()
	apptest.Response(r).Decode(t, status, v)
}

// testUser is a user with a live session, and the Cookie header that authenticates as them.
type testUser apptest.User

// newUser creates a user with a password ("password-"+email) and a 7-day session directly in
// the store, independently of the /api/auth handlers.
func (a *testApp) newUser(t *testing.T, name, email string) testUser {
	t.Helper()
	return testUser(a.NewUser(t, name, email))
}

// newFixtureUser is newUser without a usable password (no argon2 cost), for fixtures that only
// need the session.
func (a *testApp) newFixtureUser(t *testing.T, name, email string) testUser {
	t.Helper()
	return testUser(a.NewFixtureUser(t, name, email))
}

// as returns headers that authenticate r as u, with a trusted Origin for unsafe methods.
func (u testUser) as(r request) request {
	return fromExported(apptest.User(u).As(r.exported()))
}
