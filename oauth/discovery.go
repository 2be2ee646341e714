package oauth

import (
	"context"
	"encoding/json"
	"net/http"
)

// Metadata is the provider's OpenID Provider Metadata (OpenID Connect Discovery 1.0), also
// served as OAuth 2.0 authorization server metadata (RFC 8414): one document, one issuer.
//
// Only endpoints this instance serves are listed. id_token_signing_alg_values_supported lists
// every algorithm a signing key may have (SigningAlgorithms), the one of the keys this instance
// generates first: relying parties that take their accepted algorithms from it (go-oidc does)
// then verify tokens of either key across a rotation from one algorithm to another, and a
// client may register any of them as id_token_signed_response_alg. require_pushed_authorization_requests
// (RFC 9126 section 5) is false: PAR is required per client (requirePushedAuthorizationRequests),
// not for every client.
type Metadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	UserinfoEndpoint                           string   `json:"userinfo_endpoint"`
	EndSessionEndpoint                         string   `json:"end_session_endpoint"`
	PromptValuesSupported                      []string `json:"prompt_values_supported"`
	ClaimsSupported                            []string `json:"claims_supported"`
	ACRValuesSupported                         []string `json:"acr_values_supported"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	IntrospectionEndpoint                      string   `json:"introspection_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	JWKSURI                                    string   `json:"jwks_uri"`
	ScopesSupported                            []string `json:"scopes_supported"`
	ResponseTypesSupported                     []string `json:"response_types_supported"`
	ResponseModesSupported                     []string `json:"response_modes_supported"`
	GrantTypesSupported                        []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthSigningAlgValuesSupported []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	PushedAuthorizationRequestEndpoint         string   `json:"pushed_authorization_request_endpoint"`
	RequirePushedAuthorizationRequests         bool     `json:"require_pushed_authorization_requests"`
	IntrospectionEndpointAuthMethodsSupported  []string `json:"introspection_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	SubjectTypesSupported                      []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported           []string `json:"id_token_signing_alg_values_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
}

// Metadata returns the discovery document.
func (p *Provider) Metadata(ctx context.Context) Metadata {
	b := p.baseURL
	return Metadata{
		Issuer:                                     b,
		AuthorizationEndpoint:                      b + AuthorizePath,
		UserinfoEndpoint:                           b + UserinfoPath,
		EndSessionEndpoint:                         b + EndSessionPath,
		PromptValuesSupported:                      []string{"none", "login", "consent"},
		ClaimsSupported:                            ClaimsSupported,
		ACRValuesSupported:                         []string{ACRMultiFactor},
		TokenEndpoint:                              b + TokenPath,
		IntrospectionEndpoint:                      b + IntrospectPath,
		RevocationEndpoint:                         b + RevokePath,
		JWKSURI:                                    b + JWKSPath,
		ScopesSupported:                            Scopes,
		ResponseTypesSupported:                     []string{"code"},
		ResponseModesSupported:                     []string{"query"},
		GrantTypesSupported:                        Grants,
		CodeChallengeMethodsSupported:              []string{"S256"},
		TokenEndpointAuthMethodsSupported:          []string{"client_secret_basic", "client_secret_post", "private_key_jwt", "none"},
		TokenEndpointAuthSigningAlgValuesSupported: ClientAssertionAlgs,
		PushedAuthorizationRequestEndpoint:         b + PARPath,
		RequirePushedAuthorizationRequests:         false,
		IntrospectionEndpointAuthMethodsSupported:  []string{"client_secret_basic"},
		RevocationEndpointAuthMethodsSupported:     []string{"client_secret_basic", "client_secret_post", "private_key_jwt", "none"},
		SubjectTypesSupported:                      []string{"public"},
		IDTokenSigningAlgValuesSupported:           p.publishedAlgorithms(ctx),
		AuthorizationResponseIssParameterSupported: true,
	}
}

// Discovery serves GET /.well-known/openid-configuration and
// /.well-known/oauth-authorization-server: the Metadata document, cacheable for five minutes.
func (p *Provider) Discovery(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(p.Metadata(r.Context()))
}
