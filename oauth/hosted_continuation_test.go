package oauth_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestSignUpContinuesPushedRequest: within a pushed request of a client that requires PAR, the
// sign-in page's "create an account" link carries the request's signed continuation, and the
// hosted sign-up's form post returns the new, signed-in user to it (the continuation a sign-in
// uses, bound to this browser), which ends at the client with a code that redeems.
func TestSignUpContinuesPushedRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		client, _ := env.create(t, parClientBody)
		cfg := &oauth2.Config{ClientID: client.ID, ClientSecret: *client.ClientSecret,
			RedirectURL: "https://par.example.com/cb", Scopes: []string{"openid", "email"},
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize",
				TokenURL: env.url + "/api/auth/oauth2/token", AuthStyle: oauth2.AuthStyleInHeader}}
		verifier := oauth2.GenerateVerifier()
		var par struct {
			RequestURI string `json:"request_uri"`
		}
		if err := json.Unmarshal([]byte(env.push(t, cfg, verifier, nil).Body), &par); err != nil || par.RequestURI == "" {
			t.Fatalf("push: %v", err)
		}
		br := apptest.NewBrowser(t, env.url)
		signIn := br.Get("/api/auth/oauth2/authorize?" + url.Values{"client_id": {client.ID}, "request_uri": {par.RequestURI}}.Encode())
		signIn.WantPage(t, "sign-in", http.StatusOK, `id="sign-up"`)
		callback := signIn.Hidden(t, "callbackURL")
		m := regexp.MustCompile(`href="([^"]*)" id="sign-up"`).FindStringSubmatch(signIn.Body)
		if m == nil {
			t.Fatalf("no sign-up link:\n%s", signIn.Body)
		}
		signUp := br.Get(html.UnescapeString(m[1]))
		signUp.WantPage(t, "sign-up", http.StatusOK, "Create your account")
		if got := signUp.Hidden(t, "callbackURL"); got != callback {
			t.Fatalf("the sign-up form's callbackURL %q, want the sign-in page's %q", got, callback)
		}
		res := br.Post("/api/auth/sign-up/email", url.Values{"name": {"Nia Newcomer"}, "email": {"nia-par@example.com"},
			"password": {"nia-password-1"}, "callbackURL": {callback}}, env.url)
		if res.Status != http.StatusSeeOther || res.Header.Get("Location") != callback {
			t.Fatalf("sign-up: %d to %q, want 303 to %q\n%s", res.Status, res.Header.Get("Location"), callback, res.Body)
		}
		q := br.Get(callback).RedirectParams(t, "the continuation after sign-up", "https://par.example.com/cb?")
		if q.Get("code") == "" || q.Get("state") != "state-par-0123456789" {
			t.Fatalf("the continuation after sign-up: %v", q)
		}
		if tok, err := cfg.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(verifier)); err != nil || tok.Extra("id_token") == nil {
			t.Fatalf("token: %v %v", tok, err)
		}
		// Another browser cannot use the continuation: for it, a plain request, refused.
		other := apptest.NewBrowser(t, env.url)
		res = other.Post("/api/auth/sign-up/email", url.Values{"name": {"Ola Other"}, "email": {"ola-par@example.com"},
			"password": {"ola-password-1"}, "callbackURL": {callback}}, env.url)
		if q := other.Get(res.Header.Get("Location")).RedirectParams(t, "a copied continuation", "https://par.example.com/cb?"); q.Get("error") != "invalid_request" {
			t.Errorf("a copied continuation: %v", q)
		}
	})
}
