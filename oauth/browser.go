package oauth

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The provider's browser side: the authorization endpoint with its sign-in and consent pages,
// userinfo and RP-initiated logout. Every route is a protocol route (x-surface: protocol):
// the pipeline neither authenticates nor checks Origin for it, so the handlers here read the
// /api/auth session themselves and defend their own form posts (trusted Origin plus a signed
// challenge bound to the session).

// challengeTTL bounds how long a consent or logout page may be left open before its form
// post is refused.
const challengeTTL = 15 * time.Minute

// loginErrorParam is the parameter sign-in adds to its callbackURL on failure: the sign-in
// page shows the matching message and never forwards the parameter.
const loginErrorParam = "login_error"

// browserProvider serves the browser-side protocol routes (Provider.Routes).
type browserProvider struct {
	p        *Provider
	store    *store.Store
	sessions identity.Sessions
	keys     *KeySet
	// trustedOrigin, social, claims and requestInfo are ProviderConfig's fields of those names.
	trustedOrigin func(origin string) bool
	social        []SocialButton
	claims        ProductClaims
	requestInfo   func(ctx context.Context) (requestID, ip, userAgent string)
	// signUpURL and forgotPasswordURL are ProviderConfig's SignUpURL and ForgotPasswordURL.
	signUpURL, forgotPasswordURL string
	// brand is ProviderConfig's Brand, with the defaults filled in.
	brand mail.Brand
	// key signs consent and logout challenges.
	key []byte
}

// noProductClaims answers the entitlements and billing claims when no ProductClaims is
// configured: no entitlements, no subscription.
type noProductClaims struct{}

func (noProductClaims) EntitlementClaims(context.Context, string, string) ([]any, error) {
	return []any{}, nil
}

func (noProductClaims) BillingClaims(context.Context, string, string) (map[string]any, error) {
	return map[string]any{"plan": nil, "status": nil, "currentPeriodEnd": nil}, nil
}
