package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// With GATEHOUSE_REQUIRE_EMAIL_VERIFICATION, a social sign-in is gated like a password sign-in:
// an address the provider did not verify creates no account and starts no session
// (error=email_not_verified); a linked account whose address is not verified starts no session
// and is mailed a fresh verification link; an address the provider verified signs in.
func TestSocialSignInRequiresVerifiedEmail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st := b.Open(t)
		fake := newFake(t)
		smtp := mailtest.Start(t, mailtest.Options{STARTTLS: true, Username: "gatehouse", Password: "mail-pass"})
		srv := httptest.NewUnstartedServer(nil)
		cfg := testConfig()
		cfg.BaseURL = "http://" + srv.Listener.Addr().String()
		cfg.Social = socialConfig(fake, identity.GitHub)
		cfg.RequireEmailVerification = true
		app := newTestAppWith(t, st, cfg, testDeps{smtp: smtp})
		srv.Config.Handler = app.srv.Handler()
		srv.Start()
		t.Cleanup(srv.Close)
		env := &socialEnv{app: app, url: cfg.BaseURL, fake: fake}

		// A new, unverified address: refused, nothing created, no mail.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "4001", Login: "newbie", Email: "newbie@example.com", EmailVerified: false})
		br := apptest.NewBrowser(t, env.url)
		res, _ := env.signInWith(t, br, `{"provider":"github","callbackURL":"/dashboard","errorCallbackURL":"/sign-in"}`)
		wantRedirect(t, "unverified new address", res, "/sign-in?error=email_not_verified")
		if got := env.session(t, br); got != nil {
			t.Errorf("signed in with an unverified address: %v", got)
		}
		if _, _, err := st.UserByEmail(ctx, "newbie@example.com"); err == nil {
			t.Error("a user was created for an unverified address")
		}

		// A verified address signs in (and creates the user).
		fake.SetUser(identity.GitHub, socialtest.User{ID: "4002", Login: "vera", Email: "vera@example.com", EmailVerified: true})
		br = apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br, `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "verified address", res, "/dashboard")
		if got := env.session(t, br); got == nil || got["email"] != "vera@example.com" || got["emailVerified"] != true {
			t.Errorf("verified sign-in: %v", got)
		}

		// An account linked before verification was required, its address unverified: refused,
		// and a fresh verification link is mailed; after it is opened, the provider signs in.
		walt := store.User{Name: "Walt", Email: "walt@example.com"}
		if err := st.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.CreateUser(ctx, &walt, ""); err != nil {
				return err
			}
			_, err := tx.LinkAccount(ctx, walt.ID, identity.GitHub, "4003", nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		fake.SetUser(identity.GitHub, socialtest.User{ID: "4003", Login: "walt", Email: "walt@example.com", EmailVerified: true})
		br = apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br, `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "linked account, unverified address", res, "/dashboard?error=email_not_verified")
		if got := env.session(t, br); got != nil {
			t.Errorf("signed in to an unverified account: %v", got)
		}
		msg := smtp.WaitFor(t, "walt@example.com", 20*time.Second)
		link := msg.Link(t, cfg.BaseURL+"/api/auth/verify-email?")
		if page := br.Get(strings.TrimPrefix(link, cfg.BaseURL)); page.Status != http.StatusOK {
			t.Fatalf("verification link: %d %s", page.Status, page.Body)
		}
		br = apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br, `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "after verifying", res, "/dashboard")
		if got := env.session(t, br); got == nil || got["email"] != "walt@example.com" || got["emailVerified"] != true {
			t.Errorf("sign-in after verifying: %v", got)
		}
	})
}
