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
