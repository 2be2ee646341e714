package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOAuthRefreshScope: the refresh grant's scope parameter (RFC 6749 section 6). "The
// requested scope MUST NOT include any scope not originally granted by the resource owner":
// a broader scope is invalid_scope (section 5.2) and leaves the refresh token usable. A
// narrower scope gives tokens with that scope only (token response, access token claim,
// introspection); the new refresh token keeps the original scope ("the refresh token scope
// MUST be identical to that of the refresh token included by the client in the request"), so
// a later refresh without scope gets the whole grant back.
//
// golang.org/x/oauth2 cannot send a scope with a refresh request, so those requests are plain
// form posts; the refresh without scope goes through x/oauth2.
func TestOAuthRefreshScope(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-scope@example.com")
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)
		cfg := env.clientConfig(env.web, env.webSecret, "openid", "email", "offline_access", "roles")
		tok := env.userGrant(t, br, cfg)
		const granted = "openid email offline_access roles"
		if !sameScopes(tok.Extra("scope"), granted) {
			t.Fatalf("granted scope %v, want %q", tok.Extra("scope"), granted)
		}

		refresh := func(refreshToken, scope string) protocolResponse {
			form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "scope": {scope}}
			return env.post(t, "/api/auth/oauth2/token", form, env.web.ID, env.webSecret)
		}
		// Broader than the grant: profile is among the client's scopes, but Ada never granted
		// it; admin is no scope at all.
		refresh(tok.RefreshToken, granted+" profile").wantOAuthError(t, "refresh with a broader scope", http.StatusBadRequest, "invalid_scope")
		refresh(tok.RefreshToken, "openid admin").wantOAuthError(t, "refresh with an unknown scope", http.StatusBadRequest, "invalid_scope")

		// Narrower: the refused requests did not use the refresh token up.
		res := refresh(tok.RefreshToken, "openid roles")
		var narrowed struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
			IDToken      string `json:"id_token"`
			Scope        string `json:"scope"`
		}
		if err := json.Unmarshal([]byte(res.Body), &narrowed); err != nil || res.Status != http.StatusOK || narrowed.RefreshToken == "" {
			t.Fatalf("refresh with a narrower scope: %d %s", res.Status, res.Body)
		}
		if !sameScopes(narrowed.Scope, "openid roles") {
			t.Errorf("token response scope %q, want \"openid roles\"", narrowed.Scope)
		}
		if c := jwtClaims(t, narrowed.AccessToken); !sameScopes(c["scope"], "openid roles") {
			t.Errorf("access token scope claim %v, want \"openid roles\"", c["scope"])
		}
		var in map[string]any
		r := env.introspect(t, narrowed.AccessToken)
		if err := json.Unmarshal([]byte(r.Body), &in); err != nil || in["active"] != true || !sameScopes(in["scope"], "openid roles") {
			t.Errorf("introspection of the narrowed access token: %d %s; want active with scope \"openid roles\"", r.Status, r.Body)
		}
		if narrowed.IDToken == "" {
			t.Error("no ID token although openid was kept")
		}
		if r := env.introspect(t, tok.AccessToken); r.Body != "{\"active\":false}\n" {
			t.Errorf("the first access token after rotation: %s", r.Body)
		}

		// The rotated refresh token still carries the whole grant: a refresh without scope
		// (x/oauth2) gets it back.
		full, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: narrowed.RefreshToken}).Token()
		if err != nil {
			t.Fatalf("refresh without scope after a narrowed one: %v", err)
		}
		if !sameScopes(full.Extra("scope"), granted) {
			t.Errorf("scope after a refresh without scope %v, want %q", full.Extra("scope"), granted)
		}
		if c := jwtClaims(t, full.AccessToken); !sameScopes(c["scope"], granted) {
			t.Errorf("access token scope claim %v, want %q", c["scope"], granted)
		}

		// Narrowed to a scope without openid: an OAuth refresh, no ID token.
		res = refresh(full.RefreshToken, "email")
		var plain map[string]any
		if err := json.Unmarshal([]byte(res.Body), &plain); err != nil || res.Status != http.StatusOK ||
			!sameScopes(plain["scope"], "email") || plain["id_token"] != nil {
			t.Errorf("refresh with scope email: %d %s; want scope \"email\" and no id_token", res.Status, res.Body)
		}
	})
}
