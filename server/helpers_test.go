package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

const testBaseURL = "http://gatehouse.test"

// testApp is the real echo app over a real, migrated store.
type testApp struct {
	t     *testing.T
	srv   *Server
	store *store.Store
	logs  *strings.Builder
	// keys are the provider's token signing keys.
	keys *oauth.KeySet
}

// forEachBackend runs fn against SQLite and, when configured, PostgreSQL.
func forEachBackend(t *testing.T, fn func(t *testing.T, b storetest.Backend)) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

// The throttles' limits as the README states them (identity.AccountFailureLimit and its
// siblings must equal these): failed password checks per account and per client IP within
// one 15-minute window.
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
	mailer Mailer
	keys   *oauth.KeySet
}

// newServer builds every dependency the way main's wire does (without ensuring a signing key
// up front: the key set makes one on first use), then the server over them.
func newServer(cfg Config, st *store.Store, log *slog.Logger, over testDeps) (*Server, error) {
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		return nil, err
	}
	keys := over.keys
	if keys == nil {
		keys = oauth.NewKeySet(st, ring, oauth.KeySetOptions{})
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
	mailer := over.mailer
	if mailer == nil {
		mailer = LogMailer{Log: log}
	}
	return New(cfg, Deps{Store: st, Log: log, Keyring: ring, Accounts: accounts, Provider: provider,
		Mailer: mailer, Metrics: NewMetrics(storePools(st))})
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
		over.keys = oauth.NewKeySet(st, ring, oauth.KeySetOptions{})
	}
	srv, err := newServer(cfg, st, log, over)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	return &testApp{t: t, srv: srv, store: st, logs: logs, keys: over.keys}
}

// request describes one HTTP call in a scenario.
type request struct {
	method  string
	path    string
	body    string
	headers map[string]string
}

// response is a recorded answer with helpers to decode it.
type response struct {
	*httptest.ResponseRecorder
}

func (a *testApp) do(r request) response {
	a.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req := httptest.NewRequest(r.method, r.path, body)
	req.RemoteAddr = "192.0.2.10:51234"
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	a.srv.Handler().ServeHTTP(rec, req)
	return response{rec}
}

// problem is a decoded problem+json body.
type problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Errors    []FieldError `json:"errors"`
	RequestID string       `json:"requestId"`
}

// wantProblem asserts status, content type, type URI, title and that requestId equals the
// x-request-id header; it returns the decoded problem.
func (r response) wantProblem(t *testing.T, status int, kind, title string) problem {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if ct := r.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content-type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(r.Body.Bytes(), &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, r.Body)
	}
	if want := testBaseURL + "/problems/" + kind; p.Type != want {
		t.Errorf("type = %q, want %q", p.Type, want)
	}
	if p.Title != title {
		t.Errorf("title = %q, want %q", p.Title, title)
	}
	if p.Status != status {
		t.Errorf("body status = %d, want %d", p.Status, status)
	}
	if p.RequestID == "" || p.RequestID != r.Header().Get("X-Request-Id") {
		t.Errorf("requestId = %q, header x-request-id = %q", p.RequestID, r.Header().Get("X-Request-Id"))
	}
	return p
}

// decode unmarshals a JSON body into v after checking the status.
func (r response) decode(t *testing.T, status int, v any) {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if err := json.Unmarshal(r.Body.Bytes(), v); err != nil {
		t.Fatalf("decode: %v; body %s", err, r.Body)
	}
}

// testUser is a user with a live session, and the Cookie header that authenticates as them.
type testUser struct {
	store.User
	Session store.Session
	Token   string
	Cookie  string
}

// newUser creates a user with a password ("password-"+email) and a 7-day session directly in
// the store, independently of the /api/auth handlers.
func (a *testApp) newUser(t *testing.T, name, email string) testUser {
	t.Helper()
	hash, err := identity.HashPassword("password-" + email)
	if err != nil {
		t.Fatal(err)
	}
	return a.newUserWithHash(t, name, email, hash)
}

// newFixtureUser is newUser without a usable password (no argon2 cost), for fixtures that only
// need the session.
func (a *testApp) newFixtureUser(t *testing.T, name, email string) testUser {
	t.Helper()
	return a.newUserWithHash(t, name, email, "!no-password")
}

func (a *testApp) newUserWithHash(t *testing.T, name, email, hash string) testUser {
	t.Helper()
	ctx := context.Background()
	u := store.User{Name: name, Email: email}
	token, err := identity.NewSessionToken()
	if err != nil {
		t.Fatal(err)
	}
	sess := store.Session{TokenHash: identity.HashToken(token), ExpiresAt: time.Now().Add(7 * 24 * time.Hour), RememberMe: true}
	err = a.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, &u, hash); err != nil {
			return err
		}
		sess.UserID = u.ID
		return tx.CreateSession(ctx, &sess)
	})
	if err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	value := identity.CookieValue(a.srv.cookieKey, token)
	return testUser{User: u, Session: sess, Token: token, Cookie: a.srv.sessionCookieName + "=" + value}
}

// as returns headers that authenticate r as u, with a trusted Origin for unsafe methods.
func (u testUser) as(r request) request {
	h := map[string]string{"Cookie": u.Cookie, "Origin": testBaseURL}
	for k, v := range r.headers {
		h[k] = v
	}
	r.headers = h
	return r
}
