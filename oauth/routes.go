package oauth

import (
	"net/http"
)

// Route is one of the provider's routes, documented in the spec with x-surface: protocol and
// excluded from the generated interface. Handler writes its own RFC 6749 (or page) answers; an
// error it returns goes to the mounting server's error handler, which answers protocol routes
// with an RFC 6749 error body (a database outage, for example, is 503 with Retry-After there).
type Route struct {
	Method  string
	Path    string
	Handler func(w http.ResponseWriter, r *http.Request) error
}

// Routes lists every route of the provider: the token side over fosite (token, introspection,
// revocation, pushed requests), discovery and the JWKS, and the browser side (authorization
// with its sign-in continuation, consent, userinfo and end-session).
func (p *Provider) Routes() []Route {
	b := p.browser
	return []Route{
		{http.MethodPost, TokenPath, noError(p.Token)},
		{http.MethodPost, IntrospectPath, noError(p.Introspect)},
		{http.MethodPost, RevokePath, noError(p.Revoke)},
		{http.MethodPost, PARPath, noError(p.PushedAuthorize)},
		{http.MethodGet, "/.well-known/openid-configuration", noError(p.Discovery)},
		{http.MethodGet, "/.well-known/oauth-authorization-server", noError(p.Discovery)},
		{http.MethodGet, JWKSPath, p.JWKS},
		{http.MethodGet, AuthorizePath, noError(b.authorize)},
		{http.MethodPost, AuthorizePath, noError(b.authorize)},
		{http.MethodGet, ConsentPath, noError(b.consentPage)},
		{http.MethodGet, SignInPath, noError(b.hostedSignIn)},
		{http.MethodPost, ConsentPath, noError(b.consentDecision)},
		{http.MethodGet, UserinfoPath, noError(b.userinfo)},
		{http.MethodPost, UserinfoPath, noError(b.userinfo)},
		{http.MethodGet, EndSessionPath, noError(b.endSession)},
		{http.MethodPost, EndSessionPath, noError(b.endSessionConfirm)},
	}
}

// noError adapts a handler that answers every request itself.
func noError(h http.HandlerFunc) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		h(w, r)
		return nil
	}
}
