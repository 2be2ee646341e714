package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOAuthAuthorizeErrors is the authorization endpoint's negative table: an error the client
// may hear is a 303 to its registered redirect URI with error, state and iss; a request
// without a usable client or an exactly matching redirect URI gets the error page.
func TestOAuthAuthorizeErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		shop, _ := env.create(t, consentClientBody)
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-errors@example.com")
		verifier := oauth2.GenerateVerifier()
		challenge := oauth2.S256ChallengeFromVerifier(verifier)
		const cb = "https://shop.example.com/cb"

		anonymous := apptest.NewBrowser(t, env.url)
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)

		redirected := func(name string, b *apptest.Browser, raw, code string) {
			t.Helper()
			q := b.Get(raw).RedirectParams(t, name, cb+"?")
			if q.Get("error") != code || q.Get("state") != "state-0123456789" || q.Get("iss") != env.url || q.Get("code") != "" {
				t.Errorf("%s: %v; want error %q with state and iss", name, q, code)
			}
		}
		for _, c := range []struct {
			name  string
			extra []string
			code  string
		}{
			{"missing PKCE", []string{"code_challenge", "", "code_challenge_method", ""}, "invalid_request"},
			{"missing challenge method", []string{"code_challenge_method", ""}, "invalid_request"},
			{"plain PKCE", []string{"code_challenge", verifier, "code_challenge_method", "plain"}, "invalid_request"},
			{"response_type=token", []string{"response_type", "token"}, "unsupported_response_type"},
			{"response_type=id_token", []string{"response_type", "id_token"}, "unsupported_response_type"},
			{"unknown scope", []string{"scope", "openid admin"}, "invalid_scope"},
			{"unknown prompt", []string{"prompt", "select_account"}, "invalid_request"},
			{"prompt none with login", []string{"prompt", "none login"}, "invalid_request"},
			{"response_mode fragment", []string{"response_mode", "fragment"}, "unsupported_response_mode"},
		} {
			redirected(c.name, br, apptest.AuthorizeURL(env.url, shop.ID, cb, challenge, c.extra...), c.code)
		}
		redirected("prompt=none without a session", anonymous, apptest.AuthorizeURL(env.url, shop.ID, cb, challenge, "prompt", "none"), "login_required")
		redirected("prompt=none without consent", br, apptest.AuthorizeURL(env.url, shop.ID, cb, challenge, "prompt", "none"), "consent_required")
		redirected("repeated scope", br, apptest.AuthorizeURL(env.url, shop.ID, cb, challenge)+"&scope=email", "invalid_request")
		// A client without the authorization_code grant is refused.
		machine, raw := env.create(t, `{"name":"Machine","type":"web","redirectUris":["https://shop.example.com/cb"],"grantTypes":["client_credentials"],"scopes":["openid"]}`)
		if machine.ID == "" {
			t.Fatalf("create a client_credentials client: %s", raw)
		}
		redirected("client without authorization_code", br, apptest.AuthorizeURL(env.url, machine.ID, cb, challenge, "scope", "openid"), "unauthorized_client")
		// The authorization request as a form post behaves as the GET.
		form, _ := url.Parse(apptest.AuthorizeURL(env.url, shop.ID, cb, challenge))
		br.Post("/api/auth/oauth2/authorize", form.Query(), "").RedirectParams(t, "form post", "/api/auth/oauth2/consent?")
		// Unknown parameters are ignored.
		res := br.Get(apptest.AuthorizeURL(env.url, shop.ID, cb, challenge, "x-unknown", "1"))
		res.RedirectParams(t, "unknown parameter", "/api/auth/oauth2/consent?")

		// The error page, never a redirect.
		env.disable(t, env.peer.ID)
		for _, c := range []struct{ name, url string }{
			{"trailing slash", apptest.AuthorizeURL(env.url, shop.ID, cb+"/", challenge)},
			{"case", apptest.AuthorizeURL(env.url, shop.ID, "https://shop.example.com/CB", challenge)},
			{"host case", apptest.AuthorizeURL(env.url, shop.ID, "https://SHOP.example.com/cb", challenge)},
			{"extra query", apptest.AuthorizeURL(env.url, shop.ID, cb+"?x=1", challenge)},
			{"fragment", apptest.AuthorizeURL(env.url, shop.ID, cb+"#f", challenge)},
			{"another site", apptest.AuthorizeURL(env.url, shop.ID, "https://evil.example/cb", challenge)},
			{"unknown client", apptest.AuthorizeURL(env.url, "cli_00000000000000000000000000", cb, challenge)},
			{"disabled client", apptest.AuthorizeURL(env.url, env.peer.ID, cb, challenge)},
			{"no client", apptest.AuthorizeURL(env.url, "", cb, challenge, "client_id", "")},
			{"repeated client_id", apptest.AuthorizeURL(env.url, shop.ID, cb, challenge) + "&client_id=" + shop.ID},
			{"repeated redirect_uri", apptest.AuthorizeURL(env.url, shop.ID, cb, challenge) + "&redirect_uri=" + url.QueryEscape(cb)},
		} {
			br.Get(c.url).WantPage(t, c.name, http.StatusBadRequest, "Something went wrong")
		}

		// Consent denied: access_denied back to the client.
		res = br.Get(apptest.AuthorizeURL(env.url, shop.ID, cb, challenge))
		res.RedirectParams(t, "consent", "/api/auth/oauth2/consent?")
		consent := br.Get("/api/auth/oauth2/consent?" + res.Location().RawQuery)
		res = br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {consent.Hidden(t, "consent_challenge")}, "decision": {"deny"}}, env.url)
		if q := res.RedirectParams(t, "consent denied", cb+"?"); q.Get("error") != "access_denied" || q.Get("iss") != env.url || q.Get("state") != "state-0123456789" {
			t.Errorf("consent denied: %v", q)
		}
		if got, _ := env.app.Store.OAuthConsents(ctx, ada.ID, shop.ID); len(got) != 0 {
			t.Errorf("a denied consent was recorded: %v", got)
		}

		// A wrong PKCE verifier at the token endpoint (a skipConsent client: straight to the code).
		webCfg := oauth2.Config{ClientID: env.web.ID, ClientSecret: env.webSecret, RedirectURL: cb,
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize", TokenURL: env.url + "/api/auth/oauth2/token"},
			Scopes:   []string{"openid"}}
		res = br.Get(webCfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
		q := res.RedirectParams(t, "skipConsent client", cb+"?")
		if _, err := webCfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil ||
			!strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("exchange with a wrong verifier: %v; want invalid_grant", err)
		}
		// ...and without one (RFC 7636 4.4.1: a missing parameter is invalid_request).
		res = br.Get(webCfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
		q = res.RedirectParams(t, "skipConsent client", cb+"?")
		if _, err := webCfg.Exchange(ctx, q.Get("code")); err == nil || !strings.Contains(err.Error(), `"invalid_request"`) {
			t.Errorf("exchange without a verifier: %v; want invalid_request", err)
		}
		// prompt=consent asks even for a skipConsent client; accepting writes no consent row.
		res = br.Get(apptest.AuthorizeURL(env.url, env.web.ID, cb, challenge, "prompt", "consent"))
		res.RedirectParams(t, "prompt=consent, skipConsent client", "/api/auth/oauth2/consent?")
		consent = br.Get("/api/auth/oauth2/consent?" + res.Location().RawQuery)
		res = br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {consent.Hidden(t, "consent_challenge")}, "decision": {"accept"}}, env.url)
		if q := res.RedirectParams(t, "prompt=consent accepted", cb+"?"); q.Get("code") == "" {
			t.Errorf("prompt=consent accepted: %v", q)
		}
		if n, _ := env.app.Store.OAuthConsents(ctx, ada.ID, env.web.ID); len(n) != 0 {
			t.Errorf("a skipConsent client wrote consent rows: %v", n)
		}

		// max_age: a session older than max_age signs in again; a younger one does not.
		old := br.Get(apptest.AuthorizeURL(env.url, env.web.ID, cb, challenge, "max_age", "0"))
		old.WantPage(t, "max_age exceeded", http.StatusOK, `action="/api/auth/sign-in/email"`)
		if cbURL := old.Hidden(t, "callbackURL"); strings.Contains(cbURL, "max_age") {
			t.Errorf("the callback keeps max_age: %q", cbURL)
		}
		br.Get(apptest.AuthorizeURL(env.url, env.web.ID, cb, challenge, "max_age", "3600")).RedirectParams(t, "max_age satisfied", cb+"?code=")
	})
}
