package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOrganizationRequiresTwoFactorJSONSignIn: a member without a second factor of an
// organization that requires one signs in through better-auth's JSON sign-in as usual (200,
// a session: they need it to enrol, and better-auth's client knows no other answer). Until
// they enrol, the organization's /api/v1 routes answer 403 two-factor-required whose detail
// links the hosted account page, where they can enrol; enrolling lets them in.
func TestOrganizationRequiresTwoFactorJSONSignIn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		a := newTFApp(t, b)
		owner := a.newUser(t, "Owner", "owner@example.com")
		viewer := a.newUser(t, "Viewer", "viewer@example.com")
		org := store.Organization{Name: "Acme", Slug: "acme"}
		err := a.store.InTx(ctx, func(tx *store.Tx) error {
			if _, err := tx.CreateOrganization(ctx, &org, owner.ID); err != nil {
				return err
			}
			if _, err := tx.AddMember(ctx, org.ID, viewer.ID, RoleViewer); err != nil {
				return err
			}
			on := true
			_, err := tx.UpdateOrganization(ctx, org.ID, store.OrganizationUpdate{RequireTwoFactor: &on})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		res := a.do(jsonPost("/api/auth/sign-in/email", `{"email":"viewer@example.com","password":"password-viewer@example.com"}`))
		var signed struct {
			Token string       `json:"token"`
			User  authUserBody `json:"user"`
		}
		res.decode(t, http.StatusOK, &signed)
		if signed.User.ID != viewer.ID || signed.Token == "" {
			t.Fatalf("sign-in = %s", res.Body)
		}
		cookie := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
		orgPath := "/api/v1/organizations/" + org.ID
		refused := a.do(request{method: http.MethodGet, path: orgPath, headers: map[string]string{"Cookie": cookie}})
		refused.wantProblem(t, http.StatusForbidden, "two-factor-required", "Two-factor authentication required")
		if want := `"detail":"This organization requires two-factor authentication: turn it on at /api/auth/account (the account page: TOTP or a passkey; or with /api/auth/two-factor/enable), then try again."`; !strings.Contains(refused.Body.String(), want) {
			t.Errorf("problem = %s, want %s", refused.Body, want)
		}
		// Signed in, they can enrol (here with TOTP through the JSON routes), and are let in.
		viewer.Cookie = cookie
		a.enable(t, viewer)
		if res := a.do(request{method: http.MethodGet, path: orgPath, headers: map[string]string{"Cookie": cookie}}); res.Code != http.StatusOK {
			t.Fatalf("after enrolling: %d %s", res.Code, res.Body)
		}
	})
}

// TestOrganizationRequiresTwoFactorSocialSignIn: a social sign-in of a member without a second
// factor of an organization that requires one lands on the hosted account page, to enrol, with
// the callbackURL to continue to, as the hosted password sign-in does.
func TestOrganizationRequiresTwoFactorSocialSignIn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		st, _ := saOpen(t, b)
		fake := newFake(t)
		env := newSocialEnv(t, st, fake, identity.GitHub)
		fake.SetUser(identity.GitHub, socialtest.User{ID: "1001", Login: "grace", Name: "Grace Hopper",
			Email: "grace@example.com", EmailVerified: true})
		br := apptest.NewBrowser(t, env.url)
		res, _ := env.signInWith(t, br, `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "first sign-in", res, "/dashboard")
		user, _, err := st.UserByEmail(ctx, "grace@example.com")
		if err != nil {
			t.Fatal(err)
		}
		owner := env.app.newUser(t, "Owner", "owner@example.com")
		var org store.Organization
		err = st.InTx(ctx, func(tx *store.Tx) error {
			org = store.Organization{Name: "Acme", Slug: "acme"}
			if _, err := tx.CreateOrganization(ctx, &org, owner.ID); err != nil {
				return err
			}
			if _, err := tx.AddMember(ctx, org.ID, user.ID, RoleViewer); err != nil {
				return err
			}
			on := true
			_, err := tx.UpdateOrganization(ctx, org.ID, store.OrganizationUpdate{RequireTwoFactor: &on})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		res, _ = env.signInWith(t, apptest.NewBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "member without a factor", res, "/api/auth/account?callbackURL=%2Fdashboard&reason=organization")
	})
}
