package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// paramsEnv is the set-up of the /authorize parameter tests: a provider, a signed-in and a
// signed-out browser, and golang.org/x/oauth2 configured for env.web (a skipConsent client: a
// signed-in request goes straight to the code).
type paramsEnv struct {
	*providerEnv
	br, anonymous *apptest.Browser
	webCfg        oauth2.Config
}

const paramsCallback = "https://shop.example.com/cb"

func newParamsEnv(t *testing.T, b storetest.Backend, email string) *paramsEnv {
	t.Helper()
	env := newProviderEnv(t, b)
	ada := env.app.NewUser(t, "Ada Lovelace", email)
	br := apptest.NewBrowser(t, env.url)
	br.SignIn(t, ada.Email, "password-"+ada.Email)
	return &paramsEnv{providerEnv: env, br: br, anonymous: apptest.NewBrowser(t, env.url),
		webCfg: oauth2.Config{ClientID: env.web.ID, ClientSecret: env.webSecret, RedirectURL: paramsCallback, Scopes: []string{"openid"},
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize", TokenURL: env.url + "/api/auth/oauth2/token"}}}
}

// refused asserts that b's GET of raw is a 303 to the redirect URI with error code and iss.
func (e *paramsEnv) refused(t *testing.T, name string, b *apptest.Browser, raw, code string) {
	t.Helper()
	q := b.Get(raw).RedirectParams(t, name, paramsCallback+"?")
	if q.Get("error") != code || q.Get("iss") != e.url || q.Get("code") != "" {
		t.Errorf("%s: %v; want error %q with iss", name, q, code)
	}
}

// pushedClient registers a client that must push its requests and returns its x/oauth2 config.
func (e *paramsEnv) pushedClient(t *testing.T) *oauth2.Config {
	t.Helper()
	par, _ := e.create(t, parClientBody)
	return &oauth2.Config{ClientID: par.ID, ClientSecret: *par.ClientSecret, RedirectURL: "https://par.example.com/cb",
		Scopes: []string{"openid"}, Endpoint: e.webCfg.Endpoint}
}

// pushURI pushes cfg's request with extra and returns the request_uri's authorization URL.
func (e *paramsEnv) pushURI(t *testing.T, cfg *oauth2.Config, verifier string, extra url.Values) string {
	t.Helper()
	pushed := e.push(t, cfg, verifier, extra)
	var pr struct {
		RequestURI string `json:"request_uri"`
	}
	if err := json.Unmarshal([]byte(pushed.Body), &pr); err != nil || pushed.Status != http.StatusCreated {
		t.Fatalf("push %v: %d %s", extra, pushed.Status, pushed.Body)
	}
	return e.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {cfg.ClientID}, "request_uri": {pr.RequestURI}}.Encode()
}

// TestOAuthAuthorizeResponseModeQuery: discovery advertises response_mode query, and a client
// that sends it explicitly (directly or pushed) gets its code; fragment and form_post, which
// are not advertised, are unsupported_response_mode.
func TestOAuthAuthorizeResponseModeQuery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newParamsEnv(t, b, "ada-mode@example.com")
		ctx := context.Background()
		provider, err := oidc.NewProvider(ctx, env.url)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			ResponseModes []string `json:"response_modes_supported"`
		}
		if err := provider.Claims(&meta); err != nil || len(meta.ResponseModes) != 1 || meta.ResponseModes[0] != "query" {
			t.Fatalf("response_modes_supported %v %v; want [query]", meta.ResponseModes, err)
		}
		verifier := oauth2.GenerateVerifier()
		res := env.br.Get(env.webCfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier),
			oauth2.SetAuthURLParam("response_mode", "query")))
		q := res.RedirectParams(t, "response_mode=query", paramsCallback+"?")
		if q.Get("code") == "" || q.Get("state") != "state-0123456789" || q.Get("iss") != env.url {
			t.Fatalf("response_mode=query: %v", q)
		}
		if tok, err := env.webCfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err != nil || tok.AccessToken == "" {
			t.Errorf("exchange after response_mode=query: %v", err)
		}
		parCfg := env.pushedClient(t)
		res = env.br.Get(env.pushURI(t, parCfg, verifier, url.Values{"response_mode": {"query"}}))
		if q := res.RedirectParams(t, "pushed response_mode=query", "https://par.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("pushed response_mode=query: %v", q)
		}
		challenge := oauth2.S256ChallengeFromVerifier(verifier)
		for _, mode := range []string{"fragment", "form_post"} {
			env.refused(t, "response_mode="+mode, env.br, apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, challenge, "response_mode", mode), "unsupported_response_mode")
		}
	})
}

// TestOAuthAuthorizeCodeChallengeForm: a code_challenge that cannot be the S256 of a verifier
// (RFC 7636 section 4.2: 43 to 128 characters of [A-Z] / [a-z] / [0-9] / "-" / "." / "_" /
// "~") is invalid_request at /authorize, signed in or not; 43 and 128 characters pass.
func TestOAuthAuthorizeCodeChallengeForm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newParamsEnv(t, b, "ada-pkce@example.com")
		challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
		for _, c := range []struct{ name, challenge string }{
			{"3 characters", "abc"},
			{"42 characters", challenge[:42]},
			{"129 characters", strings.Repeat("a", 129)},
			{"a character outside the alphabet", challenge[:42] + "+"},
			{"padding", challenge + "="},
			{"a space", challenge[:20] + " " + challenge[21:]},
		} {
			env.refused(t, "code_challenge of "+c.name, env.br, apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, c.challenge), "invalid_request")
			env.refused(t, "code_challenge of "+c.name+", signed out", env.anonymous, apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, c.challenge), "invalid_request")
		}
		for _, c := range []string{challenge, strings.Repeat("AZaz09-._~", 12) + "abcdefgh"} {
			if q := env.br.Get(apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, c)).RedirectParams(t, "valid code_challenge", paramsCallback+"?"); q.Get("code") == "" {
				t.Errorf("code_challenge of %d characters: %v", len(c), q)
			}
		}
	})
}

// TestOAuthAuthorizeStateAndNonce: state is required with at least 8 characters (fosite's
// invalid_state) and nonce, optional, needs 8 characters when sent (insufficient_entropy, as
// the token endpoint would say): both are refused at the redirect URI before any sign-in or
// consent page.
func TestOAuthAuthorizeStateAndNonce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newParamsEnv(t, b, "ada-nonce@example.com")
		ctx := context.Background()
		verifier := oauth2.GenerateVerifier()
		challenge := oauth2.S256ChallengeFromVerifier(verifier)
		env.refused(t, "state of 7 characters", env.br, apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, challenge, "state", "1234567"), "invalid_state")
		env.refused(t, "no state", env.anonymous, apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, challenge, "state", ""), "invalid_state")

		shop, _ := env.create(t, consentClientBody)
		for _, c := range []struct {
			name   string
			b      *apptest.Browser
			client string
		}{{"signed out", env.anonymous, env.web.ID}, {"before consent", env.br, shop.ID}, {"skipConsent", env.br, env.web.ID}} {
			q := c.b.Get(apptest.AuthorizeURL(env.url, c.client, paramsCallback, challenge, "nonce", "1234567")).RedirectParams(t, "short nonce, "+c.name, paramsCallback+"?")
			if q.Get("error") != "insufficient_entropy" || q.Get("state") != "state-0123456789" || q.Get("iss") != env.url || q.Get("code") != "" {
				t.Errorf("short nonce, %s: %v; want insufficient_entropy with state and iss", c.name, q)
			}
		}
		// A pushed short nonce is refused when the request_uri is used.
		parCfg := env.pushedClient(t)
		res := env.anonymous.Get(env.pushURI(t, parCfg, verifier, url.Values{"nonce": {"n-1234"}}))
		if q := res.RedirectParams(t, "pushed short nonce", "https://par.example.com/cb?"); q.Get("error") != "insufficient_entropy" {
			t.Errorf("pushed short nonce: %v", q)
		}
		// Eight characters are enough: the sign-in page, then a code whose ID token carries it.
		env.anonymous.Get(apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, challenge, "nonce", "12345678")).
			WantPage(t, "nonce of 8 characters, signed out", http.StatusOK, `action="/api/auth/sign-in/email"`)
		q := env.br.Get(apptest.AuthorizeURL(env.url, env.web.ID, paramsCallback, challenge, "nonce", "12345678")).RedirectParams(t, "nonce of 8 characters", paramsCallback+"?")
		tok, err := env.webCfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange with a nonce of 8 characters: %v", err)
		}
		provider, err := oidc.NewProvider(ctx, env.url)
		if err != nil {
			t.Fatal(err)
		}
		rawID, _ := tok.Extra("id_token").(string)
		if idt, err := provider.Verifier(&oidc.Config{ClientID: env.web.ID}).Verify(ctx, rawID); err != nil || idt.Nonce != "12345678" {
			t.Errorf("ID token after a nonce of 8 characters: %v %v", idt, err)
		}
	})
}
