package oauth

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/store"
)

// The registration rules of OIDC clients that the spec's schema cannot state, in one place:
// the /api/v1 handlers report their problems at the body fields they concern, and the provider
// serves only clients that passed them. The store keeps its own integrity checks on what it
// is given (a web client has a secret hash, a public one has none), never these rules.

// ClientRegistration is a client registration as the rules read it.
type ClientRegistration struct {
	// Type is store.OIDCClientWeb (confidential), store.OIDCClientNative or store.OIDCClientSPA
	// (both public).
	Type                   string
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	GrantTypes             []string
	// TokenEndpointAuthMethod is "" when the request left it out (the type's default), else
	// its value, for example store.OIDCAuthPrivateKeyJWT.
	TokenEndpointAuthMethod string
	// JWKS is the client's key set (nil when absent).
	JWKS        []byte
	SkipConsent bool
	// IDTokenSignedResponseAlg is the id_token_signed_response_alg asked for ("" when the
	// request left it out); it must be one of OfferedAlgorithms (Provider.SigningAlgorithms).
	IDTokenSignedResponseAlg string
	OfferedAlgorithms        []string
}

// ClientProblem is one broken rule: the field it concerns (a JSON path relative to the
// registration body, for example ["redirectUris", "0"]) and what is wrong, in words that never
// echo the submitted value.
type ClientProblem struct {
	Path    []string
	Message string
}

// CheckClient returns every rule r breaks, in field order; none means r may be registered.
//
//   - redirect and post-logout redirect URIs: see CheckRedirectURI;
//   - client_credentials is for web (confidential) clients only, and refresh_token needs
//     authorization_code;
//   - public clients (native, spa) authenticate with none, so they name no method; a
//     private_key_jwt client needs a valid JWKS, and only it has one;
//   - public clients may not skip consent.
func CheckClient(r ClientRegistration) []ClientProblem {
	public := r.Type != store.OIDCClientWeb
	native := r.Type == store.OIDCClientNative
	var problems []ClientProblem
	for i, u := range r.RedirectURIs {
		if msg := CheckRedirectURI(u, native); msg != "" {
			problems = append(problems, ClientProblem{[]string{"redirectUris", strconv.Itoa(i)}, msg})
		}
	}
	for i, u := range r.PostLogoutRedirectURIs {
		if msg := CheckRedirectURI(u, native); msg != "" {
			problems = append(problems, ClientProblem{[]string{"postLogoutRedirectUris", strconv.Itoa(i)}, msg})
		}
	}
	for i, g := range r.GrantTypes {
		path := []string{"grantTypes", strconv.Itoa(i)}
		switch {
		case g == GrantClientCredentials && public:
			problems = append(problems, ClientProblem{path, "client_credentials is only for web (confidential) clients"})
		case g == GrantRefreshToken && !slices.Contains(r.GrantTypes, GrantAuthorizationCode):
			problems = append(problems, ClientProblem{path, "refresh_token requires authorization_code"})
		}
	}
	keyAuth := r.TokenEndpointAuthMethod == store.OIDCAuthPrivateKeyJWT
	switch {
	case r.TokenEndpointAuthMethod != "" && public:
		problems = append(problems, ClientProblem{[]string{"tokenEndpointAuthMethod"}, "public clients (native, spa) authenticate with none; omit it"})
	case keyAuth && r.JWKS == nil:
		problems = append(problems, ClientProblem{[]string{"jwks"}, "is required with private_key_jwt"})
	case !keyAuth && r.JWKS != nil:
		problems = append(problems, ClientProblem{[]string{"jwks"}, "is only for private_key_jwt clients"})
	case keyAuth:
		if _, _, err := ParseClientJWKS(r.JWKS); err != nil {
			problems = append(problems, ClientProblem{[]string{"jwks"}, err.Error()})
		}
	}
	if public && r.SkipConsent {
		problems = append(problems, ClientProblem{[]string{"skipConsent"}, "public clients (native, spa) may not skip consent"})
	}
	if alg := r.IDTokenSignedResponseAlg; alg != "" && !slices.Contains(r.OfferedAlgorithms, alg) {
		problems = append(problems, ClientProblem{[]string{"idTokenSignedResponseAlg"},
			"is not an algorithm this server signs with (GATEHOUSE_SIGNING_ALGS): one of " + strings.Join(r.OfferedAlgorithms, ", ")})
	}
	return problems
}

// CheckRedirectURI returns what is wrong with a redirect or post-logout redirect URI, or "": it
// must be an absolute RFC 3986 URI with a host, no fragment and no user information, over
// https, or for a native client also http on the loopback interface (127.0.0.1, [::1] or
// localhost, any port; RFC 8252 section 7.3).
func CheckRedirectURI(raw string, native bool) string {
	const notURI = "must be an absolute URI"
	for i := 0; i < len(raw); i++ {
		if !isURIChar(raw[i]) {
			return notURI
		}
	}
	if strings.Contains(raw, "#") {
		return "must not have a fragment"
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Hostname() == "" {
		return notURI
	}
	if u.User != nil {
		return "must not contain user information"
	}
	switch {
	case u.Scheme == "https":
		return ""
	case native && u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return ""
	case native:
		return "must use https, or http on 127.0.0.1, [::1] or localhost"
	}
	// Says what is allowed instead: a web or spa client's first try is often http://localhost.
	return "must use https (http on 127.0.0.1, [::1] or localhost is only for native clients)"
}

// isLoopbackHost reports whether host (without brackets or port) names the loopback interface
// as RFC 8252 allows for native clients.
func isLoopbackHost(host string) bool {
	return host == "127.0.0.1" || host == "::1" || strings.EqualFold(host, "localhost")
}

// isURIChar reports whether b may appear in an RFC 3986 URI: unreserved, reserved or '%'.
func isURIChar(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", b) >= 0
}
