package e2e

import (
	"log/slog"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// newServer builds the app over st the way the binary's wiring does: the keyring, the signing
// keys, the accounts, the OAuth provider, the mailer and the metrics, then server.New.
func newServer(cfg server.Config, st *store.Store, log *slog.Logger) (*server.Server, error) {
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		return nil, err
	}
	social, err := identity.NewSocialProviders(cfg.BaseURL, cfg.Social)
	if err != nil {
		return nil, err
	}
	accounts := identity.NewAccounts(st, cfg.AccountsConfig(social))
	provider, err := oauth.NewProvider(cfg.ProviderConfig(st, oauth.NewKeySet(st, ring, oauth.KeySetOptions{}), accounts))
	if err != nil {
		return nil, err
	}
	return server.New(cfg, server.Deps{Store: st, Log: log, Keyring: ring, Accounts: accounts, Provider: provider,
		Mailer: cfg.Mailer(st, ring), Metrics: server.NewMetrics(st.Pools()), Webhooks: cfg.Webhooks(st, ring)})
}
