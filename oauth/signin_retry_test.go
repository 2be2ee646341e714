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

// emailInput is the sign-in page's email field holding value (HTML-escaped), with the
// password field focused next to it.
func emailInput(escaped string) string {
	return `<input id="email" name="email" type="email" autocomplete="username webauthn" required value="` + escaped + `">`
}

// TestSignInPageKeepsEmail: after a wrong password, the hosted sign-in page comes back with the
// typed email in its field (HTML-escaped) and the human error message, for a plain and for a
// pushed authorization request, and the right password then completes the request.
func TestSignInPageKeepsEmail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		const typed = "o'neil&co@example.com"
		const escaped = "o&#39;neil&amp;co@example.com"
		user := env.app.NewUser(t, "Kay O'Neil", typed)
		password := "password-" + user.Email

		// signIn posts the page's form as a browser does and follows the 303.
		signIn := func(br *apptest.Browser, page apptest.Page, password string) apptest.Page {
			t.Helper()
			res := br.Post("/api/auth/sign-in/email", url.Values{"email": {typed}, "password": {password},
				"callbackURL": {page.Hidden(t, "callbackURL")}}, env.url)
			if res.Status != http.StatusSeeOther {
				t.Fatalf("sign-in form post: %d %v %s", res.Status, res.Header, res.Body)
			}
			return br.Get(res.Header.Get("Location"))
		}
		retry := func(name string, br *apptest.Browser, first apptest.Page) apptest.Page {
			t.Helper()
			first.WantPage(t, name+": first sign-in page", http.StatusOK, `value=""`)
			again := signIn(br, first, "wrong-password")
			again.WantPage(t, name+": sign-in page after a wrong password", http.StatusOK,
				emailInput(escaped), `<p class="error" role="alert">The email or password is not correct.</p>`,
				`autocomplete="current-password" required autofocus>`)
			if strings.Contains(again.Hidden(t, "callbackURL"), "login_error") {
				t.Errorf("%s: the callbackURL forwards login_error: %q", name, again.Hidden(t, "callbackURL"))
			}
			return again
		}

		t.Run("plain request", func(t *testing.T) {
			verifier := oauth2.GenerateVerifier()
			br := apptest.NewBrowser(t, env.url)
			first := br.Get(apptest.AuthorizeURL(env.url, env.web.ID, "https://shop.example.com/cb",
				oauth2.S256ChallengeFromVerifier(verifier), "scope", "openid email", "state", "state-retry-0123456789"))
			again := retry("plain request", br, first)
			q := signIn(br, again, password).RedirectParams(t, "after the right password", "https://shop.example.com/cb?")
			if q.Get("code") == "" || q.Get("state") != "state-retry-0123456789" {
				t.Fatalf("after the right password: %v", q)
			}
			cfg := env.clientConfig(env.web, env.webSecret, "openid", "email")
			if tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err != nil || tok.AccessToken == "" {
				t.Errorf("token: %v %v", tok, err)
			}
		})

		t.Run("pushed request", func(t *testing.T) {
			client, _ := env.create(t, parClientBody)
			cfg := &oauth2.Config{ClientID: client.ID, ClientSecret: *client.ClientSecret,
				RedirectURL: "https://par.example.com/cb", Scopes: []string{"openid", "email"},
				Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize",
					TokenURL: env.url + "/api/auth/oauth2/token", AuthStyle: oauth2.AuthStyleInHeader}}
			verifier := oauth2.GenerateVerifier()
			var par struct {
				RequestURI string `json:"request_uri"`
			}
			if res := env.push(t, cfg, verifier, nil); json.Unmarshal([]byte(res.Body), &par) != nil || par.RequestURI == "" {
				t.Fatalf("push: %d %s", res.Status, res.Body)
			}
			br := apptest.NewBrowser(t, env.url)
			first := br.Get(env.url + "/api/auth/oauth2/authorize?" + url.Values{"client_id": {client.ID}, "request_uri": {par.RequestURI}}.Encode())
			again := retry("pushed request", br, first)
			// The continuation still passes as the pushed request: the client requires PAR.
			q := signIn(br, again, password).RedirectParams(t, "after the right password", "https://par.example.com/cb?")
			if q.Get("code") == "" || q.Get("error") != "" {
				t.Fatalf("after the right password: %v", q)
			}
			if tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err != nil || tok.AccessToken == "" {
				t.Errorf("token: %v %v", tok, err)
			}
		})
	})
}

// TestSignInPageLoginErrors: the sign-in page says in words why the last attempt failed, for
// each login_error the sign-in form post can send back.
func TestSignInPageLoginErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		for code, sentence := range map[string]string{
			"invalid_credentials": "The email or password is not correct.",
			"too_many_attempts":   "Too many failed attempts. Wait a while and try again.",
			"email_not_verified":  "Confirm your email address first: we have sent you a new link.",
			"social":              "Signing in with that provider did not work. Try again or use another way.",
		} {
			page := apptest.NewBrowser(t, env.url).Get(apptest.AuthorizeURL(env.url, env.web.ID, "https://shop.example.com/cb",
				"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "scope", "openid email", "state", "state-errors-0123456789",
				"login_error", code))
			page.WantPage(t, code, http.StatusOK, `<p class="error" role="alert">`+sentence+`</p>`)
		}
	})
}
