package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestAccountPageEnrolment: a member of an organization that requires a second factor signs in
// through the provider's pages and is sent to the hosted account page first; there they turn
// TOTP on (password, secret shown as text and otpauth link, ten backup codes, a first code),
// continue to the application, make new backup codes and turn the factor off. Wrong passwords
// and codes are said on the page; a signed-out browser is told to sign in; a post without a
// trusted Origin is refused.
func TestAccountPageEnrolment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		bob := env.app.NewUser(t, "Bob", "bob-account@example.com")
		password := "password-" + bob.Email
		on := true
		err := env.app.Store.InTx(ctx, func(tx *store.Tx) error {
			if _, err := tx.AddMember(ctx, env.project.OrganizationID, bob.ID, server.RoleViewer); err != nil {
				return err
			}
			_, err := tx.UpdateOrganization(ctx, env.project.OrganizationID, store.OrganizationUpdate{RequireTwoFactor: &on})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg := oauth2.Config{ClientID: env.web.ID, ClientSecret: env.webSecret, RedirectURL: "https://shop.example.com/cb",
			Scopes: []string{"openid", "email"}, Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize"}}
		br := apptest.NewBrowser(t, env.url)
		signin := br.Get(cfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		callback := signin.Hidden(t, "callbackURL")
		res := br.Post("/api/auth/sign-in/email", url.Values{"email": {bob.Email}, "password": {password}, "callbackURL": {callback}}, env.url)
		q := res.RedirectParams(t, "sign-in of a member without a required factor", "/api/auth/account?")
		if q.Get("callbackURL") != callback || q.Get("reason") != "organization" {
			t.Fatalf("to the account page with %v", q)
		}
		accountURL := res.Header.Get("Location")
		action := "/api/auth/account?" + url.Values{"callbackURL": {callback}}.Encode()
		br.Get(accountURL).WantPage(t, "account page", http.StatusOK, "An organization you belong to requires two-factor authentication",
			"Two-factor authentication is <strong>off</strong>", `<label for="password">Password</label>`, `name="action" value="enable"`)

		post := func(values url.Values) apptest.Page { return br.Post(action, values, env.url) }
		post(url.Values{"action": {"enable"}, "password": {"wrong-password"}}).
			WantPage(t, "enable with a wrong password", http.StatusBadRequest, `role="alert">The password is not correct.`)
		page := post(url.Values{"action": {"enable"}, "password": {password}})
		page.WantPage(t, "enable", http.StatusOK, `<p class="secret" aria-label="Setup key">`, `href="otpauth://totp/Gatehouse:bob-account@example.com?`,
			"They are shown only now.", `name="action" value="confirm"`, `<label for="code">Code from your authenticator app</label>`,
			`<svg class="qr" role="img" aria-label="QR code of the setup link" viewBox="0 0 57 57"`, `<path d="M4 4h1v1h-1zM5 4h1v1h-1z`)
		uri := regexp.MustCompile(`href="(otpauth://[^"]+)"`).FindStringSubmatch(page.Body)
		codes := regexp.MustCompile(`<li>([A-Za-z0-9]{5}-[A-Za-z0-9]{5})</li>`).FindAllStringSubmatch(page.Body, -1)
		if uri == nil || len(codes) != 10 {
			t.Fatalf("enable page: uri %v, %d codes", uri, len(codes))
		}
		otpURI := strings.ReplaceAll(uri[1], "&amp;", "&")
		post(url.Values{"action": {"confirm"}, "code": {"000000"}}).
			WantPage(t, "confirm with a wrong code", http.StatusBadRequest, "That code is not correct.", `<p class="secret"`)
		post(url.Values{"action": {"confirm"}, "code": {totpCode(t, otpURI, time.Now())}}).
			WantPage(t, "confirm", http.StatusOK, `role="status">Two-factor authentication is on.`,
				"Two-factor authentication is <strong>on</strong>", `name="action" value="backup-codes"`)
		// Continue: the authorization request goes through now.
		br.Get(callback).RedirectParams(t, "authorize after enrolling", "https://shop.example.com/cb?")

		page = post(url.Values{"action": {"backup-codes"}, "password": {password}})
		page.WantPage(t, "new backup codes", http.StatusOK, "New backup codes are made")
		if fresh := regexp.MustCompile(`<li>([A-Za-z0-9]{5}-[A-Za-z0-9]{5})</li>`).FindAllStringSubmatch(page.Body, -1); len(fresh) != 10 || fresh[0][1] == codes[0][1] {
			t.Fatalf("new backup codes: %v", fresh)
		}
		post(url.Values{"action": {"disable"}, "password": {"wrong-password"}}).
			WantPage(t, "disable with a wrong password", http.StatusBadRequest, "The password is not correct.")
		post(url.Values{"action": {"disable"}, "password": {password}}).
			WantPage(t, "disable", http.StatusOK, "Two-factor authentication is off.", "Two-factor authentication is <strong>off</strong>")

		// Without a trusted Origin, and signed out.
		if res := br.Post(action, url.Values{"action": {"disable"}, "password": {password}}, ""); res.Status != http.StatusForbidden {
			t.Fatalf("post without Origin: %d %s", res.Status, res.Body)
		}
		apptest.NewBrowser(t, env.url).Get("/api/auth/account").WantPage(t, "signed out", http.StatusUnauthorized, "Sign in first")
	})
}
