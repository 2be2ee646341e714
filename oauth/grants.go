package oauth

import (
	"context"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
)

// The grants of the provider, in one place: the grant-type strings, the list the token
// endpoint accepts and discovery advertises, and the fosite handlers that serve them. The
// spec's OidcGrantType enum (what a client may be registered for) lists the same three
// strings; TestGrantTypesMatchSpec in package server holds the two equal.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
	GrantClientCredentials = "client_credentials"
)

// Grants are the grant types the token endpoint serves (any other is unsupported_grant_type)
// and discovery lists as grant_types_supported. No implicit, hybrid or password grant.
var Grants = []string{GrantAuthorizationCode, GrantRefreshToken, GrantClientCredentials}

// handlerFactories are the fosite handlers NewProvider composes, in one list:
//
//   - authorization code (OAuth2AuthorizeExplicitFactory) with PKCE (OAuth2PKCEFactory),
//     mandatory for every client, S256 only;
//   - refresh token (OAuth2RefreshTokenGrantFactory, wrapped by refreshTokenGrantFactory to
//     honour the scope parameter), rotated on every use;
//   - client credentials (OAuth2ClientCredentialsGrantFactory), confidential clients only;
//   - OpenID Connect for the code flow and refresh (OpenIDConnectExplicitFactory,
//     OpenIDConnectRefreshFactory);
//   - introspection (OAuth2TokenIntrospectionFactory, RFC 7662) and revocation
//     (OAuth2TokenRevocationFactory, RFC 7009);
//   - pushed authorization requests (PushedAuthorizeHandlerFactory, RFC 9126).
//
// Never compose.ComposeAllEnabled.
var handlerFactories = []compose.Factory{
	compose.OAuth2AuthorizeExplicitFactory,
	compose.OAuth2PKCEFactory,
	refreshTokenGrantFactory,
	compose.OAuth2ClientCredentialsGrantFactory,
	compose.OpenIDConnectExplicitFactory,
	compose.OpenIDConnectRefreshFactory,
	compose.OAuth2TokenIntrospectionFactory,
	compose.OAuth2TokenRevocationFactory,
	compose.PushedAuthorizeHandlerFactory,
}

// composeProvider composes fosite's provider from conf, the store, the strategies and
// handlerFactories, with every token endpoint handler wrapped in quietTokenHandler.
func composeProvider(conf *fosite.Config, storage, strategy interface{}) fosite.OAuth2Provider {
	provider := compose.Compose(conf, storage, strategy, handlerFactories...)
	for i, h := range conf.TokenEndpointHandlers {
		conf.TokenEndpointHandlers[i] = quietTokenHandler{h}
	}
	return provider
}

// quietTokenHandler is a token endpoint handler that declines to populate a response for a
// request it cannot handle with fosite.ErrUnknownRequest itself, without calling the handler.
//
// fosite v0.49.0 asks every token endpoint handler to populate every token response
// (Fosite.NewAccessResponse), and each handler of another grant answers
// errorsx.WithStack(fosite.ErrUnknownRequest), which fosite then ignores, as it ignores nil:
// a stack trace captured (runtime.Callers) per handler per token, four for a
// client_credentials token, about 20 µs of its ~300 µs of CPU in a pinned profile
// (docs/benchmarks.md, "Token handlers of other grants, declined without a stack trace").
// Each of those handlers begins its PopulateTokenEndpointResponse with the same
// CanHandleTokenEndpointRequest check (PKCE's does nothing at all and answers nil), so a
// request a handler can handle reaches it unchanged.
type quietTokenHandler struct {
	fosite.TokenEndpointHandler
}

// PopulateTokenEndpointResponse calls the handler when it can handle the request, and returns
// fosite.ErrUnknownRequest otherwise.
func (h quietTokenHandler) PopulateTokenEndpointResponse(ctx context.Context, requester fosite.AccessRequester, responder fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, requester) {
		return fosite.ErrUnknownRequest
	}
	return h.TokenEndpointHandler.PopulateTokenEndpointResponse(ctx, requester, responder)
}
