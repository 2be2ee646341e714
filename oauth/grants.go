package oauth

import (
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
