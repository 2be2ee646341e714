package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
)

// clientConfig is a golang.org/x/oauth2 configuration for client (secret: its client secret)
// at the first of its redirect URIs, asking for scopes.
func (e *providerEnv) clientConfig(client apptest.OIDCClient, secret string, scopes ...string) *oauth2.Config {
	return &oauth2.Config{ClientID: client.ID, ClientSecret: secret, RedirectURL: client.RedirectURIs[0], Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/api/auth/oauth2/authorize", TokenURL: e.url + "/api/auth/oauth2/token",
			AuthStyle: oauth2.AuthStyleInHeader}}
}

// userGrant runs the code flow of cfg in browser br, which must be signed in: the
// authorization request (x/oauth2 with S256 PKCE), the consent page when the client asks for
// it (accepted), then the code exchange with x/oauth2. It returns the tokens.
func (e *providerEnv) userGrant(t *testing.T, br *apptest.Browser, cfg *oauth2.Config) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	res := br.Get(cfg.AuthCodeURL("state-grant-0123456789", oauth2.S256ChallengeOption(verifier)))
	if loc := res.Header.Get("Location"); strings.HasPrefix(loc, "/api/auth/oauth2/consent?") {
		consent := br.Get(loc)
		consent.WantPage(t, "consent page", http.StatusOK, `value="accept"`)
		res = br.Post("/api/auth/oauth2/consent", map[string][]string{
			"consent_challenge": {consent.Hidden(t, "consent_challenge")}, "decision": {"accept"}}, e.url)
	}
	q := res.RedirectParams(t, "authorization", cfg.RedirectURL+"?")
	if q.Get("code") == "" {
		t.Fatalf("authorization response without a code: %v", q)
	}
	tok, err := cfg.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	return tok
}

// jwtClaims decodes the payload of a compact JWS (no verification: the tests that verify
// signatures use go-oidc).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// sameScopes reports whether got (a JSON value: a space-delimited scope string) is the scope
// set want, in any order (RFC 6749 section 3.3: the order does not matter).
func sameScopes(got any, want string) bool {
	s, ok := got.(string)
	if !ok {
		return false
	}
	a, b := strings.Fields(s), strings.Fields(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
