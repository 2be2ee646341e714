package e2e

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestSocialSignInInBrowser: in headless Chromium, the provider's sign-in page shows the
// GitHub button; clicking it goes through the local GitHub fake (authorize, token with PKCE,
// /user, /user/emails) and back, signed in, to the authorization request, which sends the
// browser to the relying party with a code.
func TestSocialSignInInBrowser(t *testing.T) {
	browser := findBrowser(t)
	ctx := context.Background()
	rp := startRelyingParty(t)
	fake, err := socialtest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.SetUser(identity.GitHub, socialtest.User{ID: "4242", Login: "katherine", Name: "Katherine Johnson",
		Email: "katherine@example.com", EmailVerified: true})

	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	st := storetest.Backends(t)[0].Open(t)
	app, err := newServer(server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32),
		Social: []server.SocialConfig{{ID: identity.GitHub, ClientID: socialtest.ClientID, ClientSecret: socialtest.ClientSecret,
			Endpoints: fake.Endpoints(identity.GitHub)}}},
		st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	// A skipConsent web client of a project; nobody has signed up yet.
	owner := store.User{Name: "Owner", Email: "owner@example.com"}
	hash := make([]byte, store.OIDCClientSecretHashLen)
	_, _ = rand.Read(hash)
	client := store.OIDCClient{Name: "Trajectories", Type: store.OIDCClientWeb, SkipConsent: true, SecretHash: hash,
		RedirectURIs: []string{rp.url + "/cb"}, GrantTypes: []string{"authorization_code"}, Scopes: []string{"openid", "email"}}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		org := store.Organization{Name: "NACA", Slug: "naca"}
		p := store.Project{Name: "Orbits", Slug: "orbits"}
		if err := storetest.CreateOwnedProject(ctx, tx, &owner, "", &org, &p); err != nil {
			return err
		}
		client.ProjectID = p.ID
		return tx.CreateOIDCClient(ctx, &client)
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := oauth2.Config{ClientID: client.ID, RedirectURL: rp.url + "/cb", Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: base + oauth.AuthorizePath, TokenURL: base + oauth.TokenPath}}
	authURL := cfg.AuthCodeURL("state-social-0001", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))

	bctx := newOfflineBrowser(t, browser, 90*time.Second)
	steps, cancel := context.WithTimeout(bctx, 75*time.Second)
	defer cancel()
	err = chromedp.Do(steps,
		chromedp.Navigate(authURL),
		chromedp.WaitVisible(chromedp.ID("social-github")),
	)
	screenshot(bctx, t, "social-signin.png")
	if err != nil {
		t.Fatalf("sign-in page with the GitHub button: %v", err)
	}
	if err := chromedp.Do(steps,
		chromedp.Click(chromedp.ID("social-github")),
		chromedp.WaitVisible(chromedp.ID("rp")),
	); err != nil {
		t.Fatalf("GitHub button → fake → callback → relying party: %v", err)
	}
	q, ok := rp.hit("/cb")
	if !ok || q.Get("code") == "" || q.Get("state") != "state-social-0001" || q.Get("iss") != base {
		t.Fatalf("the relying party got %v (%v)", q, ok)
	}
	// The browser is signed in at Gatehouse as the GitHub user.
	if err := chromedp.Do(steps, chromedp.Navigate(base+"/api/auth/get-session")); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(steps, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"email":"katherine@example.com"`) || !strings.Contains(body, `"emailVerified":true`) {
		t.Errorf("get-session after the social sign-in: %s", body)
	}
	if fake.Exchanges != 1 {
		t.Errorf("the fake exchanged %d codes, want 1", fake.Exchanges)
	}
}
