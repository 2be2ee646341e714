package server

import (
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The mapping from the configuration to the other packages' settings: main (and the tests
// that start an app) build each dependency with these, then hand them to New.

// AccountsConfig is the identity.AccountsConfig that c describes, with the social providers
// built from c.Social (identity.NewSocialProviders).
func (c Config) AccountsConfig(social []*identity.SocialProvider) identity.AccountsConfig {
	return identity.AccountsConfig{
		SecretKey: c.SecretKey, Secure: c.Secure(),
		Lifetimes:       identity.SessionLifetimes{Idle: c.SessionIdleTimeout, Absolute: c.SessionAbsoluteLifetime},
		HashConcurrency: c.HashConcurrency(), HashWait: c.PasswordHashWait,
		SignUpLimit: c.SignUpLimit, Social: social,
	}
}

// ProviderConfig is the oauth.ProviderConfig that c describes over st, the signing keys and
// the accounts' sessions and social providers; the provider's entitlements and billing claims
// are ProductClaims over st, and its audit entries carry RequestInfo.
func (c Config) ProviderConfig(st *store.Store, keys *oauth.KeySet, acc *identity.Accounts) oauth.ProviderConfig {
	buttons := make([]oauth.SocialButton, len(acc.Social))
	for i, p := range acc.Social {
		buttons[i] = oauth.SocialButton{ID: p.ID, Name: p.Name}
	}
	return oauth.ProviderConfig{
		BaseURL: c.BaseURL, SecretKey: c.SecretKey, Store: st, Keys: keys,
		Sessions: acc.Sessions, TrustedOrigin: NewOrigins(c), Social: buttons,
		Claims: ProductClaims{Store: st}, RequestInfo: RequestInfo,
	}
}
