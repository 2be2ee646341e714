package oauth_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOAuthEndSession: end-session without a valid hint asks first (POST confirms with 303);
// an unregistered post-logout URI gets the error page.
func TestOAuthEndSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-logout@example.com")
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)

		br.Get("/api/auth/oauth2/end-session?"+url.Values{"client_id": {env.web.ID},
			"post_logout_redirect_uri": {"https://evil.example/"}}.Encode()).
			WantPage(t, "unregistered post-logout URI", http.StatusBadRequest, "not registered")
		br.Get("/api/auth/oauth2/end-session?"+url.Values{"id_token_hint": {"not.a.token"},
			"post_logout_redirect_uri": {"https://shop.example.com/"}}.Encode()).
			WantPage(t, "invalid hint with a redirect", http.StatusBadRequest, "not registered")

		confirm := br.Get("/api/auth/oauth2/end-session?" + url.Values{"client_id": {env.web.ID},
			"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"s-1"}}.Encode())
		confirm.WantPage(t, "logout confirmation", http.StatusOK, "Sign out?", ada.Email)
		ch := confirm.Hidden(t, "logout_challenge")
		br.Post("/api/auth/oauth2/end-session", url.Values{"logout_challenge": {ch}}, "https://evil.example").
			WantPage(t, "logout from another origin", http.StatusForbidden)
		res := br.Post("/api/auth/oauth2/end-session", url.Values{"logout_challenge": {ch}}, env.url)
		if q := res.RedirectParams(t, "logout confirmed", "https://shop.example.com/?"); q.Get("state") != "s-1" {
			t.Errorf("logout state %v", q)
		}
		if _, _, _, err := env.app.accounts.Sessions.FromRequest(httpRequestWithJar(t, br, env.url)); err == nil {
			t.Error("still signed in after confirming the logout")
		}
		br.Get("/api/auth/oauth2/end-session").WantPage(t, "signed out", http.StatusOK, "Signed out")
	})
}

// TestOAuthEndSessionHintIsIDToken: only an ID token is an id_token_hint (OpenID Connect
// RP-Initiated Logout 1.0, section 2). The user's access token, signed by the same key for the
// same subject and audience, logs nobody out unasked: a resource server that received it gets
// the confirmation page, with or without a post-logout redirect, and the session stays. The
// ID token of the same grant still logs out without asking.
func TestOAuthEndSessionHintIsIDToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-hint@example.com")
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)
		tok := env.userGrant(t, br, env.clientConfig(env.web, env.webSecret, "openid", "email"))
		idToken, _ := tok.Extra("id_token").(string)
		if idToken == "" {
			t.Fatal("no ID token")
		}

		for _, c := range []struct {
			name  string
			query url.Values
		}{
			{"access token as hint", url.Values{"id_token_hint": {tok.AccessToken}}},
			{"access token as hint with a redirect", url.Values{"id_token_hint": {tok.AccessToken}, "client_id": {env.web.ID},
				"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"s-at"}}},
		} {
			br.Get("/api/auth/oauth2/end-session?"+c.query.Encode()).WantPage(t, c.name, http.StatusOK, "Sign out?", ada.Email)
			if _, _, _, err := env.app.accounts.Sessions.FromRequest(httpRequestWithJar(t, br, env.url)); err != nil {
				t.Fatalf("%s: signed out without confirmation: %v", c.name, err)
			}
		}

		res := br.Get("/api/auth/oauth2/end-session?" + url.Values{"id_token_hint": {idToken},
			"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"s-id"}}.Encode())
		if q := res.RedirectParams(t, "ID token as hint", "https://shop.example.com/?"); q.Get("state") != "s-id" {
			t.Errorf("logout state %v", q)
		}
		if _, _, _, err := env.app.accounts.Sessions.FromRequest(httpRequestWithJar(t, br, env.url)); err == nil {
			t.Error("still signed in after end-session with the ID token")
		}
	})
}
