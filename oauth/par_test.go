package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// parClientBody is a confidential skipConsent client that must push its requests.
const parClientBody = `{"name":"Pushed","type":"web","redirectUris":["https://par.example.com/cb"],` +
	`"grantTypes":["authorization_code"],"scopes":["openid","email"],"skipConsent":true,` +
	`"requirePushedAuthorizationRequests":true}`

// push sends the authorization parameters of cfg (with the PKCE challenge of verifier) to the
// PAR endpoint, authenticating with HTTP Basic, and returns the raw answer.
func (e *providerEnv) push(t *testing.T, cfg *oauth2.Config, verifier string, extra url.Values) protocolResponse {
	t.Helper()
	// golang.org/x/oauth2 builds the authorization request; PAR sends its query as the body.
	u, err := url.Parse(cfg.AuthCodeURL("state-par-0123456789", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	form := u.Query()
	for k, v := range extra {
		form[k] = v
	}
	return e.post(t, "/api/auth/oauth2/par", form, cfg.ClientID, cfg.ClientSecret)
}

// TestOAuthPushedAuthorizationRequests: a golang.org/x/oauth2 client pushes its request,
// authorizes with the request_uri and redeems the code; the request_uri works once and only
// for its client; a client that requires PAR is refused plain requests, also after a sign-in.
func TestOAuthPushedAuthorizationRequests(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		client, raw := env.create(t, parClientBody)
		if !strings.Contains(raw, `"requirePushedAuthorizationRequests":true`) {
			t.Errorf("the created client does not say it requires PAR: %s", raw)
		}
		cfg := &oauth2.Config{ClientID: client.ID, ClientSecret: *client.ClientSecret,
			RedirectURL: "https://par.example.com/cb", Scopes: []string{"openid", "email"},
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize",
				TokenURL: env.url + "/api/auth/oauth2/token", AuthStyle: oauth2.AuthStyleInHeader}}
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-par@example.com")
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)

		// A plain request of this client is refused, back at its redirect URI.
		verifier := oauth2.GenerateVerifier()
		res := br.Get(cfg.AuthCodeURL("state-plain-0123456789", oauth2.S256ChallengeOption(verifier)))
		if q := res.RedirectParams(t, "plain request", "https://par.example.com/cb?"); q.Get("error") != "invalid_request" ||
			q.Get("code") != "" || q.Get("state") != "state-plain-0123456789" {
			t.Errorf("plain request of a PAR client: %v", q)
		}

		// Push → authorize → token.
		pushed := env.push(t, cfg, verifier, nil)
		var par struct {
			RequestURI string `json:"request_uri"`
			ExpiresIn  int    `json:"expires_in"`
		}
		if err := json.Unmarshal([]byte(pushed.Body), &par); err != nil || pushed.Status != http.StatusCreated ||
			!strings.HasPrefix(par.RequestURI, "urn:ietf:params:oauth:request_uri:") || par.ExpiresIn != 60 ||
			pushed.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("push: %d %v %s", pushed.Status, pushed.Header, pushed.Body)
		}
		authz := env.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {client.ID}, "request_uri": {par.RequestURI}}.Encode()
		res = br.Get(authz)
		q := res.RedirectParams(t, "pushed request", "https://par.example.com/cb?")
		if q.Get("code") == "" || q.Get("state") != "state-par-0123456789" || q.Get("iss") != env.url {
			t.Fatalf("pushed request: %v", q)
		}
		tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil || tok.AccessToken == "" || tok.Extra("id_token") == nil {
			t.Fatalf("token after PAR: %v %v", tok, err)
		}

		// The request_uri is used up.
		res = br.Get(authz)
		res.WantPage(t, "request_uri reuse", http.StatusBadRequest, "invalid_request_uri")

		// Another client may not use it: the error page (the pushed request's redirect URI is
		// another client's), and the request stays usable, once, by its own client.
		pushed = env.push(t, cfg, verifier, nil)
		_ = json.Unmarshal([]byte(pushed.Body), &par)
		for _, other := range []string{env.web.ID, ""} {
			res = br.Get(env.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {other}, "request_uri": {par.RequestURI}}.Encode())
			res.WantPage(t, "request_uri of another client "+other, http.StatusBadRequest, "invalid_request")
		}
		res = br.Get(env.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {client.ID}, "request_uri": {par.RequestURI}}.Encode())
		if q := res.RedirectParams(t, "request_uri after another client's attempt", "https://par.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("request_uri after another client's attempt: %v", q)
		}
		br.Get(env.url+"/api/auth/oauth2/authorize?"+url.Values{"client_id": {client.ID}, "request_uri": {par.RequestURI}}.Encode()).
			WantPage(t, "request_uri reuse after another client's attempt", http.StatusBadRequest, "invalid_request_uri")

		// Refusals at the PAR endpoint.
		bad := *cfg
		bad.ClientSecret = "wrong"
		env.push(t, &bad, verifier, nil).wantOAuthError(t, "push with a wrong secret", http.StatusUnauthorized, "invalid_client")
		env.push(t, cfg, verifier, url.Values{"request_uri": {"urn:ietf:params:oauth:request_uri:x"}}).
			wantOAuthError(t, "push with a request_uri", http.StatusBadRequest, "invalid_request")
		env.push(t, cfg, verifier, url.Values{"redirect_uri": {"https://evil.example.com/cb"}}).
			wantOAuthError(t, "push with an unregistered redirect URI", http.StatusBadRequest, "invalid_request")
		env.push(t, cfg, verifier, url.Values{"scope": {"openid billing"}}).
			wantOAuthError(t, "push with a scope outside the client's", http.StatusBadRequest, "invalid_scope")

		// Signed out: the pushed request goes through the sign-in page, whose callback carries
		// the pushed parameters (the request_uri is used up) under a signed marker.
		fresh := apptest.NewBrowser(t, env.url)
		verifier = oauth2.GenerateVerifier()
		pushed = env.push(t, cfg, verifier, nil)
		_ = json.Unmarshal([]byte(pushed.Body), &par)
		res = fresh.Get(env.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {client.ID}, "request_uri": {par.RequestURI}}.Encode())
		res.WantPage(t, "sign-in for a pushed request", http.StatusOK, `action="/api/auth/sign-in/email"`)
		callback := res.Hidden(t, "callbackURL")
		cu, _ := url.Parse(callback)
		if cq := cu.Query(); cq.Get("request_uri") != "" || cq.Get("pushed") == "" || cq.Get("code_challenge") != oauth2.S256ChallengeFromVerifier(verifier) {
			t.Fatalf("sign-in callback of a pushed request: %q", callback)
		}
		// Altered, the continuation is a plain request again, and refused.
		cq := cu.Query()
		cq.Set("scope", "openid")
		res = fresh.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"password-" + ada.Email},
			"callbackURL": {cu.Path + "?" + cq.Encode()}}, env.url)
		res = fresh.Get(res.Header.Get("Location"))
		if q := res.RedirectParams(t, "altered continuation", "https://par.example.com/cb?"); q.Get("error") != "invalid_request" {
			t.Errorf("altered continuation: %v", q)
		}
		// Unaltered, it completes.
		res = fresh.Get(callback)
		q = res.RedirectParams(t, "continuation after sign-in", "https://par.example.com/cb?")
		if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err != nil {
			t.Errorf("token after a signed-in continuation: %v (%v)", err, q)
		}

		// A client that does not require PAR may push too, or not.
		webCfg := *cfg
		webCfg.ClientID, webCfg.ClientSecret, webCfg.RedirectURL = env.web.ID, env.webSecret, "https://shop.example.com/cb"
		pushed = env.push(t, &webCfg, verifier, nil)
		_ = json.Unmarshal([]byte(pushed.Body), &par)
		res = br.Get(env.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {env.web.ID}, "request_uri": {par.RequestURI}}.Encode())
		if q := res.RedirectParams(t, "pushed request of an ordinary client", "https://shop.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("pushed request of an ordinary client: %v", q)
		}
	})
}
