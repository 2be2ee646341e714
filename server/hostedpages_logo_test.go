package server

import (
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestHostedPagesLogo: with GATEHOUSE_BRAND_LOGO_URL every hosted page, the provider's and the
// account pages alike, shows the logo with the product's name as its alt text instead of the
// name, and its CSP allows images from exactly the logo's origin besides its own; without a logo
// the pages show the name and the CSP names no other origin (TestHostedPagesHeaders,
// TestHostedPagesBrand).
func TestHostedPagesLogo(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.Brand = mail.Brand{Name: "Acme & Co", LogoURL: "https://cdn.acme.example:8443/brand/logo.png?v=3&size=2x", Color: "#0a7d3b"}
		a := newMailApp(t, b, cfg)
		a.verifiedUser(t, "Ada", "ada@example.com")
		a.requestReset(t, "ada@example.com", "")
		reset := a.link(t, "ada@example.com", 1, "/api/auth/reset-password/")
		owner, org := a.NewOrganization(t)
		client, _ := a.CreateOIDCClient(t, owner, a.NewProject(t, org.ID, "logo").ID, apptest.WebClientBody, testBaseURL)
		authorize := strings.TrimPrefix(apptest.AuthorizeURL(testBaseURL, client.ID, "https://shop.example.com/cb",
			oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())), testBaseURL)
		const img = `<p class="brand"><img class="logo" src="https://cdn.acme.example:8443/brand/logo.png?v=3&amp;size=2x" alt="Acme &amp; Co"></p>`
		for _, c := range []struct {
			name   string
			path   string
			status int
			text   string
		}{
			{"sign-in", authorize, 200, "Sign in"},
			{"sign-up", "/api/auth/sign-up", 200, "Create your account"},
			{"forgot password", "/api/auth/forgot-password", 200, "Reset your password"},
			{"check inbox", "/api/auth/check-inbox", 200, "Check your inbox"},
			{"reset form", reset, 200, "Choose a new password"},
			{"verify result", "/api/auth/verify-email?token=no-such-token", 401, "This link does not work"},
			{"unknown invitation", "/accept-invitation/inv_nosuchinvitation", 404, "Invitation not found"},
			{"error", "/api/auth/oauth2/authorize?client_id=cli_unknown", 400, "Something went wrong"},
			{"signed out", "/api/auth/oauth2/end-session", 200, "Signed out"},
		} {
			body := wantHostedPageImages(t, c.name, a.do(getPage(c.path)), c.status, "'self' data: https://cdn.acme.example:8443",
				c.text, img, "<title>", " · Acme &amp; Co</title>", ".brand{min-height:2.5rem}\n.logo{display:block;max-width:100%;max-height:2.5rem;width:auto;height:auto}")
			if strings.Count(body, "<img") != 1 || strings.Contains(body, `<p class="brand">Acme &amp; Co</p>`) {
				t.Errorf("%s: want the logo once, instead of the name:\n%s", c.name, body)
			}
		}
	})
}
