package oauth

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/store/seal"

	"github.com/mohae/deepcopy"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/openid"
	"github.com/ory/fosite/token/jwt"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Token lifetimes of the provider (docs/oauth.md, "The provider: tokens"). Refresh tokens also have an
// absolute lifetime, MaxRefreshGrantAge (90 days), enforced by FositeStore.
const (
	AccessTokenLifespan   = time.Hour
	IDTokenLifespan       = time.Hour
	RefreshTokenLifespan  = 30 * 24 * time.Hour // idle: each rotation starts it again
	AuthorizeCodeLifespan = 10 * time.Minute
	// PARLifespan is how long a pushed authorization request's request_uri may be used
	// (expires_in of the PAR response; RFC 9126 section 2.2).
	PARLifespan = 60 * time.Second
)

// Provider routes, relative to the base URL (the issuer).
const (
	AuthorizePath  = "/api/auth/oauth2/authorize"
	TokenPath      = "/api/auth/oauth2/token"
	IntrospectPath = "/api/auth/oauth2/introspect"
	RevokePath     = "/api/auth/oauth2/revoke"
	PARPath        = "/api/auth/oauth2/par"
	JWKSPath       = "/.well-known/jwks.json"
)

// Scopes are the eight scopes a client may be granted (ARCHITECTURE.md).
var Scopes = []string{"openid", "profile", "email", "offline_access", "organization", "roles", "entitlements", "billing"}

// ProviderConfig is what NewProvider needs.
type ProviderConfig struct {
	// BaseURL is the service origin, e.g. https://gatehouse.example.com: the issuer of every
	// token and the prefix of every endpoint URL.
	BaseURL string
	// SecretKey is the master key; the HMAC secret of codes and refresh tokens, the
	// client-secret pepper and the key of the browser pages' challenges derive from it.
	SecretKey []byte
	// Store holds clients and grant state; it is first used by a request, not by NewProvider.
	Store *store.Store
	// Keys signs access and ID tokens (kid and alg in the header) and makes the JWKS.
	Keys *KeySet
	// Sessions are the /api/auth browser sessions: the authorization endpoint signs users in
	// and end-session signs them out through them.
	Sessions identity.Sessions
	// TrustedOrigin reports whether an Origin is the base URL or a trusted product origin:
	// the consent and logout form posts must come from one (nil: the base URL alone).
	TrustedOrigin func(origin string) bool
	// Social are the sign-in page's "Continue with …" buttons, in order (none: no buttons).
	Social []SocialButton
	// SignUpURL and ForgotPasswordURL are the hosted sign-up and "forgot password" pages (paths
	// on this site) the sign-in page links to, with its authorization request as callbackURL so
	// that they return to it; "" hides the link (sign-up when self-registration is not open).
	SignUpURL, ForgotPasswordURL string
	// Brand is the product's name, logo and accent colour on the pages (empty fields: Gatehouse's;
	// no logo shows the name).
	Brand mail.Brand
	// Claims supplies the entitlements and billing userinfo claims (nil: both empty).
	Claims ProductClaims
	// RequestInfo returns the id, client IP and user agent of the request ctx belongs to, for
	// the audit entries the browser side writes (nil: empty).
	RequestInfo func(ctx context.Context) (requestID, ip, userAgent string)
}

// ProductClaims supplies the claims the provider cannot compute from identity alone: a
// subject's entitlements and billing state in a client's project (package server implements
// it over the store's billing tables).
type ProductClaims interface {
	// EntitlementClaims is the `entitlements` claim: the subject's effective entitlements.
	EntitlementClaims(ctx context.Context, projectID, subjectID string) ([]any, error)
	// BillingClaims is the `billing` claim: plan, status and current period end, each null
	// when the subject has no subscription.
	BillingClaims(ctx context.Context, projectID, subjectID string) (map[string]any, error)
}

// Provider is the OAuth 2.1 / OpenID Connect provider: fosite composed with the grants OAuth
// 2.1 keeps, over FositeStore. Its handlers serve the token side (token.go).
type Provider struct {
	fosite.OAuth2Provider
	config  *fosite.Config
	store   *FositeStore
	baseURL string
	keys    *KeySet
	// browser serves the authorization, consent, userinfo and end-session routes.
	browser *browserProvider
}

// NewProvider composes the provider: the fosite handlers of handlerFactories (grants.go).
//
// Clients authenticate with client_secret_basic, client_secret_post, none (public clients)
// or private_key_jwt (KeyClient).
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	if len(cfg.SecretKey) < 32 {
		return nil, errors.New("oauth: new provider: the secret key must be 32 bytes")
	}
	if cfg.Keys == nil || cfg.BaseURL == "" {
		return nil, errors.New("oauth: new provider: keys and base url are required")
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	pepper := seal.DeriveKey(cfg.SecretKey, "oidc-client-secret")
	conf := &fosite.Config{
		AccessTokenLifespan:            AccessTokenLifespan,
		IDTokenLifespan:                IDTokenLifespan,
		RefreshTokenLifespan:           RefreshTokenLifespan,
		AuthorizeCodeLifespan:          AuthorizeCodeLifespan,
		AccessTokenIssuer:              base,
		IDTokenIssuer:                  base,
		TokenURL:                       base + TokenPath,
		GlobalSecret:                   seal.DeriveKey(cfg.SecretKey, "oauth-hmac"),
		EnforcePKCE:                    true,
		EnforcePKCEForPublicClients:    true,
		EnablePKCEPlainChallengeMethod: false,
		RefreshTokenScopes:             []string{"offline_access"},
		ScopeStrategy:                  fosite.ExactScopeStrategy,
		AudienceMatchingStrategy:       fosite.ExactAudienceMatchingStrategy,
		JWTScopeClaimKey:               jwt.JWTScopeFieldString,
		ClientSecretsHasher:            SecretHasher{Pepper: pepper},
		MinParameterEntropy:            fosite.MinParameterEntropy,
		PushedAuthorizeContextLifespan: PARLifespan,
	}
	fs := NewFositeStore(cfg.Store)
	keyGetter := func(ctx context.Context) (interface{}, error) {
		var k SigningKey
		var err error
		if alg, _ := ctx.Value(idTokenAlgKey{}).(string); alg != "" {
			k, err = cfg.Keys.CurrentFor(ctx, alg)
		} else {
			k, err = cfg.Keys.Current(ctx)
		}
		if err != nil {
			// fosite passes a plain error on as the unregistered code "error"; failing to read
			// or open a key is the provider's own failure, a server_error (RFC 6749 section
			// 5.2). The cause stays in the wrap, for the log, never in the response.
			return nil, fosite.ErrServerError.WithWrap(err)
		}
		return k.JSONWebKey(), nil
	}
	hmacStrategy := compose.NewOAuth2HMACStrategy(conf)
	strategy := &compose.CommonStrategy{
		CoreStrategy:               accessTokenStrategy{compose.NewOAuth2JWTStrategy(keyGetter, hmacStrategy, conf)},
		OpenIDConnectTokenStrategy: idTokenStrategy{compose.NewOpenIDConnectStrategy(keyGetter, conf)},
		Signer:                     &jwt.DefaultSigner{GetPrivateKey: keyGetter},
	}
	provider := composeProvider(conf, fs, strategy)
	// Client assertions (private_key_jwt) may name as aud the token endpoint, the issuer or
	// the PAR endpoint (RFC 7523 section 3, RFC 9126 section 2): fosite reads the accepted
	// audiences from its configuration's GetTokenURLs, which is only TokenURL.
	if f, ok := provider.(*fosite.Fosite); ok {
		f.Config = assertionAudiences{Config: conf, urls: []string{conf.TokenURL, base, base + PARPath}}
	} else {
		return nil, errors.New("oauth: new provider: unexpected fosite provider type")
	}
	p := &Provider{OAuth2Provider: provider, config: conf, store: fs, baseURL: base, keys: cfg.Keys}
	claims := cfg.Claims
	if claims == nil {
		claims = noProductClaims{}
	}
	trusted := cfg.TrustedOrigin
	if trusted == nil {
		trusted = func(origin string) bool { return origin == base }
	}
	requestInfo := cfg.RequestInfo
	if requestInfo == nil {
		requestInfo = func(context.Context) (string, string, string) { return "", "", "" }
	}
	p.browser = &browserProvider{p: p, store: cfg.Store, sessions: cfg.Sessions, keys: cfg.Keys,
		trustedOrigin: trusted, social: cfg.Social, claims: claims, requestInfo: requestInfo,
		signUpURL: cfg.SignUpURL, forgotPasswordURL: cfg.ForgotPasswordURL, brand: pageBrand(cfg.Brand),
		key: seal.DeriveKey(cfg.SecretKey, "oauth-browser-challenge")}
	return p, nil
}

// assertionAudiences is fosite's configuration with more token URLs: the audiences a client
// assertion may name.
type assertionAudiences struct {
	*fosite.Config
	urls []string
}

// GetTokenURLs returns the accepted client assertion audiences.
func (a assertionAudiences) GetTokenURLs(context.Context) []string { return a.urls }

// accessTokenStrategy is fosite's RFC 9068 JWT access-token strategy (codes and refresh tokens
// stay HMAC) with storage-backed validation. fosite always looks an access token up by its
// signature before validating it (introspection, revocation), and the stored request, never
// the token's payload, is what it answers from; so ValidateAccessToken checks the stored
// expiry instead of verifying the RSA signature again with the current key. That saves an RSA
// verification per introspection and keeps tokens signed by a key that has since been rotated
// out of signing valid until they expire.
type accessTokenStrategy struct{ *oauth2.DefaultJWTStrategy }

// ValidateAccessToken accepts the token when its stored request r has not expired.
func (s accessTokenStrategy) ValidateAccessToken(_ context.Context, r fosite.Requester, _ string) error {
	if r == nil || r.GetSession() == nil {
		return fosite.ErrRequestUnauthorized.WithDebug("no stored request for the access token")
	}
	exp := r.GetSession().GetExpiresAt(fosite.AccessToken)
	if exp.IsZero() || !time.Now().Before(exp) {
		return fosite.ErrTokenExpired.WithHint("The access token expired.")
	}
	return nil
}

// idTokenAlgKey carries a client's id_token_signed_response_alg from idTokenStrategy to the
// signer's key getter, which has only the context to go by.
type idTokenAlgKey struct{}

// idTokenStrategy is fosite's ID token strategy, signing with the key of the client's
// id_token_signed_response_alg when it registered one (CurrentFor). When no key of that
// algorithm signs and none can be made (the algorithm is no longer offered, or its next key is
// not active yet) it fails, and the token endpoint answers server_error: the client would not
// verify a token signed otherwise.
type idTokenStrategy struct {
	openid.OpenIDConnectTokenStrategy
}

// GenerateIDToken signs r's ID token.
func (s idTokenStrategy) GenerateIDToken(ctx context.Context, lifespan time.Duration, r fosite.Requester) (string, error) {
	if c, ok := r.GetClient().(interface{ IDTokenSignedResponseAlg() string }); ok && c.IDTokenSignedResponseAlg() != "" {
		ctx = context.WithValue(ctx, idTokenAlgKey{}, c.IDTokenSignedResponseAlg())
	}
	token, err := s.OpenIDConnectTokenStrategy.GenerateIDToken(ctx, lifespan, r)
	if errors.Is(err, ErrNoSigningKeyForAlgorithm) {
		// The key getter made it a server_error (RFC 6749 section 5.2); say which key is missing.
		return "", fosite.ErrServerError.WithWrap(err).WithHint("No signing key of the client's id_token_signed_response_alg signs now.")
	}
	return token, err
}

// SigningAlgorithms are the algorithms a client may register as id_token_signed_response_alg:
// the offered ones (GATEHOUSE_SIGNING_ALGS), the default first.
func (p *Provider) SigningAlgorithms() []string { return slices.Clone(p.keys.Algorithms()) }

// publishedAlgorithms is discovery's id_token_signing_alg_values_supported: the offered
// algorithms, then those of other published keys (a line being retired still signs tokens
// relying parties must verify). When the keys cannot be read it is the offered ones.
func (p *Provider) publishedAlgorithms(ctx context.Context) []string {
	algs := p.SigningAlgorithms()
	set, err := p.keys.JWKS(ctx)
	if err != nil {
		return algs
	}
	for _, k := range set.Keys {
		if !slices.Contains(algs, k.Algorithm) {
			algs = append(algs, k.Algorithm)
		}
	}
	return algs
}

// Issuer returns the issuer: the base URL.
func (p *Provider) Issuer() string { return p.baseURL }

// SecretHasher is fosite's client-secret hasher: HMAC-SHA256 under Pepper (HashClientSecret)
// with a constant-time comparison. Client secrets are 256-bit random strings, so a fast keyed
// hash loses nothing; fosite's default bcrypt cost 12 would cost about 280 ms per request.
type SecretHasher struct{ Pepper []byte }

// Compare returns nil when data is the secret whose hash is hash; an empty hash (a public
// client) never matches.
func (h SecretHasher) Compare(_ context.Context, hash, data []byte) error {
	if len(hash) == 0 || !hmac.Equal(HashClientSecret(h.Pepper, string(data)), hash) {
		return fosite.ErrInvalidClient.WithDebug("the client secret does not match")
	}
	return nil
}

// Hash returns HashClientSecret(Pepper, data).
func (h SecretHasher) Hash(_ context.Context, data []byte) ([]byte, error) {
	return HashClientSecret(h.Pepper, string(data)), nil
}

// Session is the provider's fosite session: the OpenID Connect session (ID token claims and
// headers, expiries, subject) plus what the RFC 9068 access token needs. It is stored as JSON
// with every code and token.
type Session struct {
	openid.DefaultSession
	// ClientID is the client the grant was made to (claim client_id).
	ClientID string `json:"client_id"`
	// GrantedAt is when the grant was first made; refresh rotations keep it, and
	// MaxRefreshGrantAge counts from it.
	GrantedAt time.Time `json:"granted_at"`
	// OrganizationID is the browser session's active organization when the user authorized
	// (the userinfo "organization" claim); empty for none and for client credentials.
	OrganizationID string `json:"organization_id,omitempty"`
	// refreshGrantScopes is set only while a refresh narrowed by its scope parameter is
	// answered (refreshScopeHandler): the grant's whole scope, which the new refresh token is
	// stored with while the access token gets the narrower one. Never stored.
	refreshGrantScopes fosite.Arguments
}

// NewSession returns an empty session for subject (may be "" before the grant is known).
func NewSession(subject string) *Session {
	return &Session{DefaultSession: openid.DefaultSession{
		Claims: &jwt.IDTokenClaims{Subject: subject}, Headers: &jwt.Headers{}, Subject: subject,
	}}
}

// GetJWTClaims returns the access token's own claims, sub and client_id; fosite adds iss, aud
// (the granted audience), scope, jti, iat and exp.
func (s *Session) GetJWTClaims() jwt.JWTClaimsContainer {
	return &jwt.JWTClaims{Subject: s.Subject, Extra: map[string]interface{}{"client_id": s.ClientID}}
}

// GetJWTHeader returns the access token's header: typ at+jwt (RFC 9068). The kid comes from
// the signing key.
func (s *Session) GetJWTHeader() *jwt.Headers {
	return &jwt.Headers{Extra: map[string]interface{}{"typ": "at+jwt"}}
}

// Clone returns a deep copy.
func (s *Session) Clone() fosite.Session {
	if s == nil {
		return nil
	}
	return deepcopy.Copy(s).(*Session)
}

// String is for debugging.
func (s *Session) String() string {
	return fmt.Sprintf("session(sub=%s client=%s)", s.Subject, s.ClientID)
}
