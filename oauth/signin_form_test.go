package oauth_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestSignInFormPost: /api/auth/sign-in/email answers a browser's form post with a
// callbackURL by 303 (success, or back with login_error), keeps JSON answers for JSON clients,
// and never redirects to an untrusted callbackURL.
func TestSignInFormPost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-form@example.com")
		br := apptest.NewBrowser(t, env.url)
		const cb = "/api/auth/oauth2/authorize?client_id=x"

		// A JSON client (Accept: application/json) posting a form still gets better-auth's JSON.
		req, _ := http.NewRequest("POST", env.url+"/api/auth/sign-in/email", strings.NewReader(url.Values{
			"email": {ada.Email}, "password": {"password-" + ada.Email}, "callbackURL": {cb}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", env.url)
		if res := br.Do(req); res.Status != http.StatusOK || !strings.Contains(res.Body, `"redirect":true`) || !strings.Contains(res.Body, `"url":"`+cb+`"`) {
			t.Errorf("JSON client: %d %s", res.Status, res.Body)
		}
		// An untrusted callbackURL is refused, not followed.
		res := br.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"password-" + ada.Email},
			"callbackURL": {"https://evil.example/steal"}}, env.url)
		if res.Status != http.StatusForbidden || res.Header.Get("Location") != "" {
			t.Errorf("untrusted callbackURL: %d %v", res.Status, res.Header)
		}
		// Wrong passwords: back with invalid_credentials, then too_many_attempts once throttled.
		var codes []string
		for range 6 {
			res := br.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"}, "callbackURL": {cb}}, env.url)
			codes = append(codes, res.RedirectParams(t, "failed sign-in", "/api/auth/oauth2/authorize?").Get("login_error"))
		}
		want := []string{"invalid_credentials", "invalid_credentials", "invalid_credentials", "invalid_credentials", "invalid_credentials", "too_many_attempts"}
		if !slices.Equal(codes, want) {
			t.Errorf("login_error sequence %v; want %v", codes, want)
		}
		// The sign-in page shows the matching message and does not forward the flag.
		page := apptest.NewBrowser(t, env.url).Get(apptest.AuthorizeURL(env.url, env.web.ID, "https://shop.example.com/cb",
			oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), "login_error", "too_many_attempts"))
		page.WantPage(t, "throttled sign-in page", http.StatusOK, "Too many failed attempts")
		if strings.Contains(page.Hidden(t, "callbackURL"), "login_error") {
			t.Errorf("the callbackURL forwards login_error: %q", page.Hidden(t, "callbackURL"))
		}
	})
}
