package oauth_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// The provider's HTTP tests drive the whole app, built here as main's wire builds it, through
// apptest.

// testApp is the real app over a real, migrated store; accounts and keys are the dependencies
// the tests look into (sessions, the current signing key).
type testApp struct {
	*apptest.App
	accounts *identity.Accounts
	keys     *oauth.KeySet
}

var forEachBackend = apptest.ForEachBackend

func testConfig() server.Config {
	return server.Config{
		ListenAddr:     ":0",
		BaseURL:        apptest.BaseURL,
		TrustedOrigins: []string{"https://app.example.com", "http://localhost:5173"},
		BodyLimit:      1 << 20,
		SecretKey:      []byte("0123456789abcdef0123456789abcdef"),
	}
}

// built is what newServer builds: the server and the dependencies the tests look into.
type built struct {
	srv      *server.Server
	accounts *identity.Accounts
	keys     *oauth.KeySet
}

// newServer builds every dependency the way main's wire does (without ensuring a signing key
// up front: the key set makes one on first use), then the server over them; keys, when not
// nil, are the signing keys to use.
func newServer(cfg server.Config, st *store.Store, keys *oauth.KeySet) (built, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		return built{}, err
	}
	if keys == nil {
		keys = oauth.NewKeySet(st, ring, oauth.KeySetOptions{})
	}
	social, err := identity.NewSocialProviders(cfg.BaseURL, cfg.Social)
	if err != nil {
		return built{}, err
	}
	accounts := identity.NewAccounts(st, cfg.AccountsConfig(social))
	provider, err := oauth.NewProvider(cfg.ProviderConfig(st, keys, accounts))
	if err != nil {
		return built{}, err
	}
	srv, err := server.New(cfg, server.Deps{Store: st, Log: log, Keyring: ring, Accounts: accounts, Provider: provider,
		Mailer: cfg.Mailer(st, ring), Metrics: server.NewMetrics(st.Pools()), Webhooks: cfg.Webhooks(st, ring)})
	if err != nil {
		return built{}, err
	}
	return built{srv: srv, accounts: accounts, keys: keys}, nil
}

// newTestApp builds the app over st with cfg (and keys, when not nil) for t.
func newTestApp(t testing.TB, st *store.Store, cfg server.Config, keys *oauth.KeySet) *testApp {
	t.Helper()
	b, err := newServer(cfg, st, keys)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	return &testApp{
		App: &apptest.App{T: t, Handler: b.srv.Handler(), Store: st,
			CookieKey: identity.SessionCookieKey(cfg.SecretKey), CookieName: b.accounts.Sessions.CookieName()},
		accounts: b.accounts, keys: b.keys,
	}
}
