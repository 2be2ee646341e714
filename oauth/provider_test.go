package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// providerEnv is the real server on a loopback listener whose URL is the base URL (so the
// issuer in discovery and tokens is what relying parties connect to), with clients registered
// through /api/v1.
type providerEnv struct {
	app     *testApp
	url     string
	owner   apptest.User
	project store.Project
	// web is a confidential client with client_credentials; peer another one (the resource
	// server that introspects); spa a public client.
	web, peer, spa apptest.OIDCClient
	webSecret      string
	peerSecret     string
}

const spaClientBody = `{"name":"Storefront SPA","type":"spa","redirectUris":["https://app.example.com/cb"],` +
	`"grantTypes":["authorization_code","refresh_token"],"scopes":["openid","offline_access"]}`

func newProviderEnv(t *testing.T, b storetest.Backend) *providerEnv {
	t.Helper()
	return newProviderEnvKeys(t, b.Open(t), nil)
}

// newProviderEnvKeys is newProviderEnv over st with the signing keys keys (nil: the default
// key set, as main makes it).
func newProviderEnvKeys(t *testing.T, st *store.Store, keys *oauth.KeySet) *providerEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg := testConfig()
	cfg.BaseURL = base
	cfg.TrustedOrigins = append(cfg.TrustedOrigins, apptest.BaseURL) // the fixtures sign in from apptest.BaseURL
	app := newTestApp(t, st, cfg, keys)
	srv := httptest.NewUnstartedServer(app.Handler)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	env := &providerEnv{app: app, url: base}
	owner, org := app.NewOrganization(t)
	env.owner = owner
	env.project = app.NewProject(t, org.ID, "oauth-provider")
	env.web, _ = env.create(t, apptest.WebClientBody)
	env.peer, _ = env.create(t, apptest.WebClientBody)
	env.spa, _ = env.create(t, spaClientBody)
	env.webSecret, env.peerSecret = *env.web.ClientSecret, *env.peer.ClientSecret
	return env
}

func (e *providerEnv) create(t *testing.T, body string) (apptest.OIDCClient, string) {
	t.Helper()
	return e.app.CreateOIDCClient(t, e.owner, e.project.ID, body, e.url)
}

func (e *providerEnv) disable(t *testing.T, clientID string) {
	t.Helper()
	res := e.app.Do(e.owner.As(apptest.Request{Method: "POST", Path: "/api/v1/projects/" + e.project.ID + "/oidc-clients/" + clientID + "/disable",
		Headers: map[string]string{"Origin": e.url}}))
	if res.Code != http.StatusOK {
		t.Fatalf("disable: %d %s", res.Code, res.Body)
	}
}

// protocolResponse is a raw answer of a protocol route.
type protocolResponse apptest.Page

// post sends form to path over the loopback, with HTTP Basic when basicID is not "".
func (e *providerEnv) post(t *testing.T, path string, form url.Values, basicID, basicSecret string) protocolResponse {
	t.Helper()
	req, err := http.NewRequest("POST", e.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basicID != "" {
		req.SetBasicAuth(url.QueryEscape(basicID), url.QueryEscape(basicSecret))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return protocolResponse{Status: res.StatusCode, Header: res.Header, Body: string(body)}
}

// wantOAuthError asserts an RFC 6749 error body with code and status.
func (r protocolResponse) wantOAuthError(t *testing.T, name string, status int, code string) {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil || r.Status != status || body.Error != code {
		t.Errorf("%s: %d %s; want %d with error %q", name, r.Status, r.Body, status, code)
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("%s: WWW-Authenticate %q, want Basic", name, r.Header.Get("WWW-Authenticate"))
	}
}

// clientCredentials obtains a token for client id/secret with golang.org/x/oauth2.
func (e *providerEnv) clientCredentials(t *testing.T, id, secret string, style oauth2.AuthStyle, scopes ...string) *oauth2.Token {
	t.Helper()
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: e.url + "/api/auth/oauth2/token",
		Scopes: scopes, AuthStyle: style}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatalf("client credentials for %s: %v", id, err)
	}
	return tok
}

// introspect asks as the peer client and returns the raw body.
func (e *providerEnv) introspect(t *testing.T, token string) protocolResponse {
	t.Helper()
	return e.post(t, "/api/auth/oauth2/introspect", url.Values{"token": {token}}, e.peer.ID, e.peerSecret)
}

// jwtHeader decodes the header of a compact JWS.
func jwtHeader(t *testing.T, token string) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOAuthClientCredentials: golang.org/x/oauth2 obtains a client-credentials token from the
// real server (client_secret_basic and client_secret_post), and go-oidc verifies it as an RFC
// 9068 JWT through discovery and the JWKS.
func TestOAuthClientCredentials(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()

		provider, err := oidc.NewProvider(ctx, env.url)
		if err != nil {
			t.Fatalf("discovery: %v", err)
		}
		if got := provider.Endpoint().TokenURL; got != env.url+"/api/auth/oauth2/token" {
			t.Errorf("token endpoint %q", got)
		}
		verifier := provider.Verifier(&oidc.Config{ClientID: env.web.ID, SupportedSigningAlgs: []string{oidc.RS256}})
		current, err := env.app.keys.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}

		for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
			before := time.Now().Add(-time.Second).Truncate(time.Second)
			tok := env.clientCredentials(t, env.web.ID, env.webSecret, style, "roles", "billing")
			if tok.TokenType != "bearer" && tok.TokenType != "Bearer" {
				t.Errorf("token_type %q", tok.TokenType)
			}
			if tok.RefreshToken != "" {
				t.Errorf("client credentials issued a refresh token")
			}
			if h := jwtHeader(t, tok.AccessToken); h["typ"] != "at+jwt" || h["kid"] != current.ID || h["alg"] != "RS256" {
				t.Errorf("access token header %v; want typ at+jwt, kid %s, alg RS256", h, current.ID)
			}
			idt, err := verifier.Verify(ctx, tok.AccessToken)
			if err != nil {
				t.Fatalf("go-oidc rejects the access token: %v", err)
			}
			var claims map[string]any
			if err := idt.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			if idt.Issuer != env.url || idt.Subject != env.web.ID || !slices.Equal(idt.Audience, []string{env.web.ID}) {
				t.Errorf("iss %q sub %q aud %v; want %q, %q, [%q]", idt.Issuer, idt.Subject, idt.Audience, env.url, env.web.ID, env.web.ID)
			}
			if !strings.HasPrefix(idt.Subject, "cli_") {
				t.Errorf("sub %q could collide with a user id", idt.Subject)
			}
			if claims["client_id"] != env.web.ID || claims["scope"] != "roles billing" {
				t.Errorf("client_id %v scope %v", claims["client_id"], claims["scope"])
			}
			if jti, _ := claims["jti"].(string); jti == "" {
				t.Error("no jti")
			}
			if idt.IssuedAt.Before(before) || idt.Expiry.Sub(idt.IssuedAt) != time.Hour {
				t.Errorf("iat %v exp %v; want a one-hour token issued now", idt.IssuedAt, idt.Expiry)
			}
			// The token introspects active for a resource server.
			var in map[string]any
			res := env.introspect(t, tok.AccessToken)
			if err := json.Unmarshal([]byte(res.Body), &in); err != nil || res.Status != http.StatusOK ||
				in["active"] != true || in["sub"] != env.web.ID || in["client_id"] != env.web.ID || in["scope"] != "roles billing" {
				t.Errorf("introspection %d %s", res.Status, res.Body)
			}
		}

		// Cache-Control: no-store on the token response.
		res := env.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, env.web.ID, env.webSecret)
		if res.Status != http.StatusOK || res.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("token response %d, Cache-Control %q", res.Status, res.Header.Get("Cache-Control"))
		}
		// A requested scope outside the client's scopes is refused.
		res = env.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"admin"}}, env.web.ID, env.webSecret)
		res.wantOAuthError(t, "unknown scope", http.StatusBadRequest, "invalid_scope")

		// Both discovery documents name the same issuer, the base URL.
		for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
			r, err := http.Get(env.url + path)
			if err != nil {
				t.Fatal(err)
			}
			var meta map[string]any
			err = json.NewDecoder(r.Body).Decode(&meta)
			r.Body.Close()
			if err != nil || r.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %v", path, r.StatusCode, err)
			}
			if meta["issuer"] != env.url || meta["jwks_uri"] != env.url+"/.well-known/jwks.json" ||
				meta["authorization_response_iss_parameter_supported"] != true ||
				!jsonStrings(meta["code_challenge_methods_supported"], "S256") ||
				!jsonStrings(meta["token_endpoint_auth_methods_supported"], "client_secret_basic", "client_secret_post", "private_key_jwt", "none") ||
				!jsonStrings(meta["token_endpoint_auth_signing_alg_values_supported"], "RS256", "ES256") ||
				meta["pushed_authorization_request_endpoint"] != env.url+"/api/auth/oauth2/par" ||
				!jsonStrings(meta["grant_types_supported"], "authorization_code", "refresh_token", "client_credentials") ||
				!jsonStrings(meta["scopes_supported"], "openid", "profile", "email", "offline_access", "organization", "roles", "entitlements", "billing") {
				t.Errorf("%s: %v", path, meta)
			}
		}
	})
}

// jsonStrings reports whether v is a JSON array of exactly want.
func jsonStrings(v any, want ...string) bool {
	list, ok := v.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for i, w := range want {
		if list[i] != w {
			return false
		}
	}
	return true
}

// TestOAuthProviderErrors is the token side's negative table: exact RFC 6749 error codes and
// statuses, disabled clients, revocation and introspection of dead tokens.
func TestOAuthProviderErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		const token = "/api/auth/oauth2/token"
		cc := url.Values{"grant_type": {"client_credentials"}}
		post := func(form url.Values, kv ...string) url.Values {
			out := url.Values{}
			for k, v := range form {
				out[k] = v
			}
			for i := 0; i < len(kv); i += 2 {
				out.Set(kv[i], kv[i+1])
			}
			return out
		}

		for _, c := range []struct {
			name        string
			form        url.Values
			basicID     string
			basicSecret string
			status      int
			code        string
		}{
			{"password grant", url.Values{"grant_type": {"password"}, "username": {"a@example.com"}, "password": {"pw"}},
				env.web.ID, env.webSecret, 400, "unsupported_grant_type"},
			{"implicit-style grant", url.Values{"grant_type": {"implicit"}}, env.web.ID, env.webSecret, 400, "unsupported_grant_type"},
			{"no grant type", url.Values{"scope": {"roles"}}, env.web.ID, env.webSecret, 400, "invalid_request"},
			{"unknown client (basic)", cc, "cli_00000000000000000000000000", "x", 401, "invalid_client"},
			{"unknown client (post)", post(cc, "client_id", "cli_00000000000000000000000000", "client_secret", "x"), "", "", 401, "invalid_client"},
			{"wrong secret (basic)", cc, env.web.ID, env.peerSecret, 401, "invalid_client"},
			{"wrong secret (post)", post(cc, "client_id", env.web.ID, "client_secret", env.peerSecret), "", "", 401, "invalid_client"},
			{"no secret", post(cc, "client_id", env.web.ID), "", "", 401, "invalid_client"},
			{"no client", cc, "", "", 400, "invalid_request"},
			{"both auth methods", post(cc, "client_id", env.web.ID, "client_secret", env.webSecret), env.web.ID, env.webSecret, 400, "invalid_request"},
			{"public client asks for client_credentials", post(cc, "client_id", env.spa.ID), "", "", 400, "unauthorized_client"},
			{"unknown scope", post(cc, "scope", "admin"), env.web.ID, env.webSecret, 400, "invalid_scope"},
			{"foreign audience", post(cc, "audience", env.peer.ID), env.web.ID, env.webSecret, 400, "invalid_request"},
			{"bad refresh token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"ory_rt_x.y"}}, env.web.ID, env.webSecret, 400, "invalid_grant"},
			{"bad code", url.Values{"grant_type": {"authorization_code"}, "code": {"ory_ac_x.y"}, "redirect_uri": {"https://shop.example.com/cb"},
				"code_verifier": {strings.Repeat("v", 43)}}, env.web.ID, env.webSecret, 400, "invalid_grant"},
		} {
			env.post(t, token, c.form, c.basicID, c.basicSecret).wantOAuthError(t, c.name, c.status, c.code)
		}

		inactive := func(name string, res protocolResponse) {
			t.Helper()
			if res.Status != http.StatusOK || strings.TrimSpace(res.Body) != `{"active":false}` {
				t.Errorf("%s: %d %q; want 200 {\"active\":false}", name, res.Status, res.Body)
			}
		}
		active := func(name string, res protocolResponse) {
			t.Helper()
			if res.Status != http.StatusOK || !strings.HasPrefix(res.Body, `{"active":true`) {
				t.Errorf("%s: %d %q; want an active token", name, res.Status, res.Body)
			}
		}

		// Introspection is client-authenticated.
		tok := env.clientCredentials(t, env.web.ID, env.webSecret, oauth2.AuthStyleInHeader, "roles")
		env.post(t, "/api/auth/oauth2/introspect", url.Values{"token": {tok.AccessToken}}, "", "").
			wantOAuthError(t, "introspect without client", 401, "invalid_client")
		env.post(t, "/api/auth/oauth2/introspect", url.Values{"token": {tok.AccessToken}}, env.peer.ID, env.webSecret).
			wantOAuthError(t, "introspect with a wrong secret", 401, "invalid_client")
		inactive("garbage token", env.introspect(t, "not-a-token"))
		inactive("forged token", env.introspect(t, tok.AccessToken[:len(tok.AccessToken)-4]+"AAAA"))
		active("fresh token", env.introspect(t, tok.AccessToken))

		// A client of another project (same organization) cannot see the token.
		foreignProject := env.app.NewProject(t, env.project.OrganizationID, "oauth-foreign")
		var foreign apptest.Envelope[apptest.OIDCClient]
		env.app.Do(env.owner.As(apptest.Request{Method: "POST", Path: "/api/v1/projects/" + foreignProject.ID + "/oidc-clients",
			Body: apptest.WebClientBody})).Decode(t, http.StatusCreated, &foreign)
		inactive("another project's client introspects", env.post(t, "/api/auth/oauth2/introspect",
			url.Values{"token": {tok.AccessToken}}, foreign.Data.ID, *foreign.Data.ClientSecret))

		// Revocation, then introspection: inactive. Revoking again is still 200.
		for i := range 2 {
			res := env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {tok.AccessToken}}, env.web.ID, env.webSecret)
			if res.Status != http.StatusOK {
				t.Errorf("revoke #%d: %d %s", i+1, res.Status, res.Body)
			}
		}
		inactive("revoked token", env.introspect(t, tok.AccessToken))
		// Another client cannot revoke a token it does not own.
		other := env.clientCredentials(t, env.web.ID, env.webSecret, oauth2.AuthStyleInHeader)
		res := env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {other.AccessToken}}, env.peer.ID, env.peerSecret)
		res.wantOAuthError(t, "revoke another client's token", 400, "unauthorized_client")
		active("token another client failed to revoke", env.introspect(t, other.AccessToken))
		env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {other.AccessToken}}, env.web.ID, env.peerSecret).
			wantOAuthError(t, "revoke with a wrong secret", 401, "invalid_client")
		env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {other.AccessToken}, "client_id": {env.web.ID}, "client_secret": {env.webSecret}},
			env.web.ID, env.webSecret).wantOAuthError(t, "revoke with both auth methods", 400, "invalid_request")

		// A disabled client: invalid_client everywhere, and its earlier token is inactive.
		env.disable(t, env.web.ID)
		env.post(t, token, cc, env.web.ID, env.webSecret).wantOAuthError(t, "disabled client", 401, "invalid_client")
		env.post(t, token, post(cc, "client_id", env.web.ID, "client_secret", env.webSecret), "", "").
			wantOAuthError(t, "disabled client (post)", 401, "invalid_client")
		inactive("token of a disabled client", env.introspect(t, other.AccessToken))
		env.post(t, "/api/auth/oauth2/introspect", url.Values{"token": {other.AccessToken}}, env.web.ID, env.webSecret).
			wantOAuthError(t, "disabled client introspects", 401, "invalid_client")
		env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {other.AccessToken}}, env.web.ID, env.webSecret).
			wantOAuthError(t, "disabled client revokes", 401, "invalid_client")
	})
}
