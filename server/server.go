// Package server is Gatehouse's HTTP layer: the echo app, its middleware, the single problem
// error handler, spec-driven validation and authorization, and the strict handlers of the
// generated interface, one file per area.
package server

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/openapi"
	"github.com/gatehouse-dev/gatehouse/server/consoleui"
	"github.com/gatehouse-dev/gatehouse/server/docsui"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Server holds the HTTP app and its dependencies. Build it with New.
type Server struct {
	cfg       Config
	log       *slog.Logger
	store     *store.Store
	doc       *openapi3.T
	validator *validator
	// operations maps each echo route to the spec operation it serves; policies holds each
	// operation's policy by operation id.
	operations operations
	policies   map[string]policy
	spec       specDocument
	// cookieKey signs session cookies; sessionCookieName depends on the base URL's scheme.
	cookieKey         []byte
	sessionCookieName string
	// sessions are the browser sessions: the store's, under the cookie and lifetimes configured.
	sessions identity.Sessions
	// apiKeys remembers keys read from the database, by public id, for the routes that
	// confirm their key when they write (apikey_cache.go).
	apiKeys *expirable.LRU[string, store.APIKeyAuth]
	// kept holds keys and /authorize decisions while the store's decision epoch stands
	// (decision_cache.go).
	kept *keptCaches
	// keyTouches remembers, per API key id, when its use was last recorded (time.Time).
	keyTouches sync.Map
	// envProjects caches environment id → project id (environments never move): the usage
	// routes check that an environment belongs to the addressed project without a query.
	envProjects sync.Map
	// apiKeyPepper keys HashAPIKeySecret: seal.DeriveKey(secret key, "api-key").
	apiKeyPepper []byte
	// clientSecretPepper keys HashClientSecret: seal.DeriveKey(secret key, "oidc-client-secret").
	clientSecretPepper []byte
	// keyring seals and opens secrets at rest: cfg.SecretKey, then cfg.OldSecretKeys.
	keyring *seal.Keyring
	// provider is the OAuth provider (deps.Provider).
	provider Provider
	// accountThrottle and ipThrottle count failed password checks per account (email or user
	// id) and per client IP, signUpThrottle sign-ups per client IP, all in the database so that
	// replicas share them (identity.NewAccountThrottle and its siblings).
	accountThrottle *identity.Throttle
	ipThrottle      *identity.Throttle
	signUpThrottle  *identity.Throttle
	// twoFactors are users' TOTP secrets, backup codes and second sign-in steps.
	twoFactors *identity.TwoFactors
	// passkeys are users' WebAuthn credentials and the ceremonies under way.
	passkeys *identity.Passkeys
	// hashLimiter bounds the memory of concurrent password hashing (cfg.HashConcurrency).
	hashLimiter *identity.HashLimiter
	// mailer writes the messages of invitations and the account flows to the outbox, within
	// the mail send limits (mailer.go).
	mailer *identity.Mailer
	// webhooks writes ping and redelivery events; webhookPoke wakes the webhook worker;
	// webhookGuard checks endpoint URLs (SSRF).
	webhooks     *webhook.Emitter
	webhookPoke  func()
	webhookGuard webhook.Guard
	// social are the configured social sign-in providers (Deps.Accounts.Social).
	social socialProviders
	// metrics are the Prometheus series, on a registry of their own (see MetricsHandler).
	metrics *Metrics
	echo    *echo.Echo
}

var _ gen.StrictServerInterface = (*Server)(nil)

// Provider is the OAuth 2.1 / OpenID Connect provider as the server mounts it: its routes,
// each registered behind the middleware chain (protocol surface) with errors going to the one
// error handler. *oauth.Provider implements it.
type Provider interface {
	Routes() []oauth.Route
	// SigningAlgorithms are the algorithms a client may register as its
	// idTokenSignedResponseAlg.
	SigningAlgorithms() []string
}

// Deps are the Server's dependencies. main builds each once and passes them in; New builds
// none of them.
type Deps struct {
	Store *store.Store
	Log   *slog.Logger
	// Keyring seals and opens secrets at rest (cfg.SecretKey, then cfg.OldSecretKeys).
	Keyring *seal.Keyring
	// Accounts are the sessions, password hashing, throttles and social providers.
	Accounts *identity.Accounts
	// Provider is the OAuth provider, mounted by its routes.
	Provider Provider
	// Mailer writes messages to the outbox (Config.Mailer); main's outbox worker delivers them.
	Mailer *identity.Mailer
	// Metrics are the Prometheus series (NewMetrics).
	Metrics *Metrics
	// Webhooks writes the events of pings and redeliveries (Config.Webhooks, which also makes
	// every audit entry an event).
	Webhooks *webhook.Emitter
	// PokeWebhooks, when set, wakes the replica's webhook worker after a ping or redelivery.
	PokeWebhooks func()
}

// New builds the app: it loads and checks the OpenAPI document and its x-permission policies,
// registers every route and the middleware chain recover → request id → access log → CORS →
// security headers → body limit → (route) → match the spec operation → authenticate → validate
// → authorize → read pool → handler. Every dependency comes in deps, built by the caller.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Log == nil || deps.Keyring == nil || deps.Accounts == nil || deps.Provider == nil ||
		deps.Mailer == nil || deps.Metrics == nil || deps.Webhooks == nil {
		return nil, fmt.Errorf("server: every dependency but the store is required")
	}
	if len(cfg.SecretKey) < 32 {
		return nil, fmt.Errorf("server: the secret key must be 32 bytes")
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.YAML)
	if err != nil {
		return nil, fmt.Errorf("server: load openapi: %w", err)
	}
	// Examples are checked by the Redocly linter in `make check` (with 3.1 semantics, as
	// errors); kin-openapi would check them as OpenAPI 3.0 and refuse a null in an untyped schema.
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("server: openapi document: %w", err)
	}
	v, err := newValidator(doc)
	if err != nil {
		return nil, err
	}
	spec, err := newSpecDocument(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	ops, err := loadOperations(doc, v)
	if err != nil {
		return nil, err
	}
	rpName := cfg.Brand.Name
	if rpName == "" {
		rpName = defaultTOTPIssuer
	}
	passkeys, err := identity.NewPasskeys(deps.Store, cfg.SecretKey, cfg.BaseURL, rpName)
	if err != nil {
		return nil, err
	}
	acc := deps.Accounts
	s := &Server{
		social: newSocialProviders(cfg, acc.Social),
		cfg:    cfg, log: deps.Log, store: deps.Store, doc: doc, validator: v, operations: ops, policies: ops.policies(), spec: spec,
		cookieKey:          identity.SessionCookieKey(cfg.SecretKey),
		sessionCookieName:  acc.Sessions.CookieName(),
		sessions:           acc.Sessions,
		apiKeyPepper:       seal.DeriveKey(cfg.SecretKey, "api-key"),
		apiKeys:            newAPIKeyCache(),
		clientSecretPepper: seal.DeriveKey(cfg.SecretKey, "oidc-client-secret"),
		keyring:            deps.Keyring,
		provider:           deps.Provider,
		mailer:             deps.Mailer,
		webhooks:           deps.Webhooks,
		webhookPoke:        deps.PokeWebhooks,
		webhookGuard:       webhook.Guard{AllowPrivate: cfg.WebhookAllowPrivate},
		accountThrottle:    acc.AccountThrottle,
		ipThrottle:         acc.IPThrottle,
		signUpThrottle:     acc.SignUpThrottle,
		hashLimiter:        acc.Passwords,
		twoFactors:         identity.NewTwoFactors(deps.Store, deps.Keyring, cfg.SecretKey, strings.HasPrefix(cfg.BaseURL, "https:")),
		passkeys:           passkeys,
		metrics:            deps.Metrics,
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.IPExtractor = ipExtractor(cfg)
	e.Binder = &bodyBinder{} // the validated body, decoded once (bind.go)
	e.Pre(routeOnEscapedPath)
	e.Use(s.recoverer(), s.requestID, s.accessLog(), s.cors(), s.securityHeaders(), s.bodyLimit(),
		s.match, s.authenticate, s.validate, s.authorize, s.readPool)

	gen.RegisterHandlers(e, gen.NewStrictHandler(s, nil))
	e.GET("/api/v1/openapi.json", s.getOpenAPIDocument)
	e.GET("/docs/openapi.json", s.getOpenAPIDocument)
	// Protocol routes: documented in the spec, excluded from the generated interface.
	for _, r := range deps.Provider.Routes() {
		h := r.Handler
		e.Add(r.Method, r.Path, func(c echo.Context) error { return h(c.Response(), c.Request()) })
	}
	// The processor webhook verifies a signature over the raw body: routed by hand.
	e.POST("/api/v1/webhooks/processor/:environmentId", s.processorWebhook)
	// Hand-routed (a browser redirect endpoint), but an ordinary auth-json operation otherwise.
	e.GET(identity.SocialCallbackPath+":provider", s.socialCallback)
	ui := docsui.New("/api/v1/openapi.json")
	e.GET("/api/v1/docs", ui.Index)
	e.GET("/docs/api-reference", ui.Index)
	// The explorer's script and styles: static files, deliberately not API operations.
	assets := e.GET("/docs/assets/:file", ui.Asset)
	unspecified := map[string]bool{routeKey(assets.Method, assets.Path): true}
	// The admin console (a static single-page app on the API) and the browser entry points
	// that lead to it and to the explorer: pages and files, deliberately not API operations.
	console := consoleui.New(consoleui.Dist(), "/docs/api-reference")
	for _, r := range []*echo.Route{
		e.GET("/", console.Root), e.GET("/docs", console.Docs),
		e.GET("/console", console.Slash), e.GET(consoleui.Prefix+"*", console.Serve),
	} {
		unspecified[routeKey(r.Method, r.Path)] = true
	}
	if err := ops.bind(e.Routes(), unspecified); err != nil {
		return nil, err
	}
	if deps.Store != nil && len(deps.Store.ReplicaStatuses()) > 0 {
		// Registered once per Metrics; a second server on the same Metrics shares it.
		_ = deps.Metrics.registry.Register(newReplicaCollector(deps.Store))
	}
	s.kept = newKeptCaches()
	s.echo = e
	return s, nil
}

// NewOrigins returns the trusted-origin check of cfg: whether an Origin is the base URL or one
// of cfg.TrustedOrigins, compared as normalised origins. main hands it to the OAuth provider,
// whose consent and logout form posts must come from one.
func NewOrigins(cfg Config) func(origin string) bool {
	return (&Server{cfg: cfg}).trustedOrigin
}

// storePools is st.Pools(), or none without a store (some tests build a Server without one).
func storePools(st *store.Store) map[string]*sql.DB {
	if st == nil {
		return nil
	}
	return st.Pools()
}

// Handler returns the app as an http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Routes lists the registered routes as "METHOD /path" in echo's syntax (":param").
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		out = append(out, routeKey(r.Method, r.Path))
	}
	return out
}
