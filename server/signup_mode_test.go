package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The messages of a refused email sign-up.
const (
	msgSignUpClosed          = "Sign-up is closed: new accounts cannot be created here."
	msgSignUpNeedsInvitation = "Sign-up needs an invitation: this email address has no pending invitation. " +
		"Ask an organization to invite it, then sign up with the same address."
)

// signUpModeEnv is a server with sign-up mode mode and GitHub pointed at a fake, over a fresh
// store holding: Olga, an owner with a password, whose organization invited
// invited@example.com and invited-social@example.com (pending), expired@example.com (expired)
// and canceled@example.com (canceled); and Gus, a user already linked to GitHub account 7001.
type signUpModeEnv struct {
	*socialEnv
	olga testUser
	gus  testUser
}

func newSignUpModeEnv(t *testing.T, b storetest.Backend, mode SignUpMode) *signUpModeEnv {
	t.Helper()
	ctx := context.Background()
	st := b.Open(t)
	fake := newFake(t)
	cfg := testConfig()
	cfg.SignUp = mode
	cfg.Social = socialConfig(fake, identity.GitHub)
	cfg.TrustedOrigins = append(cfg.TrustedOrigins, testBaseURL)
	app, base := serveApp(t, st, cfg)
	env := &signUpModeEnv{socialEnv: &socialEnv{app: app, url: base, fake: fake}}
	env.olga = app.newUser(t, "Olga", "olga@example.com")
	env.gus = app.newFixtureUser(t, "Gus", "gus@example.com")
	org := newOrgOwnedBy(t, app, "Olga's shop", "olga-shop", env.olga.ID, nil)
	now := time.Now()
	err := st.InTx(ctx, func(tx *store.Tx) error {
		for _, inv := range []store.Invitation{
			{Email: "invited@example.com", ExpiresAt: now.Add(48 * time.Hour)},
			{Email: "invited-social@example.com", ExpiresAt: now.Add(48 * time.Hour)},
			{Email: "expired@example.com", ExpiresAt: now.Add(-time.Minute)},
			{Email: "canceled@example.com", ExpiresAt: now.Add(48 * time.Hour), Status: store.InvitationCanceled},
		} {
			inv.OrganizationID, inv.Role, inv.InviterID = org.ID, RoleDeveloper, env.olga.ID
			if err := tx.CreateInvitation(ctx, &inv); err != nil {
				return err
			}
		}
		_, err := tx.LinkAccount(ctx, env.gus.ID, identity.GitHub, "7001", []string{"read:user"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// signUp posts an email sign-up for email and returns the answer.
func (e *signUpModeEnv) signUp(email string) response {
	return e.app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
		body: `{"name":"New person","email":` + jsonString(email) + `,"password":"correct-horse-battery"}`})
}

// wantSignedUp asserts a 200 sign-up and that the user exists.
func (e *signUpModeEnv) wantSignedUp(t *testing.T, res response, email string) {
	t.Helper()
	var body struct {
		User authUserBody `json:"user"`
	}
	res.decode(t, http.StatusOK, &body)
	if body.User.Email != email {
		t.Errorf("signed up as %q, want %q", body.User.Email, email)
	}
}

// wantRefused asserts a refused sign-up with message, no cookie, and no user for email.
func (e *signUpModeEnv) wantRefused(t *testing.T, res response, email, title, message string) {
	t.Helper()
	var p acctProblem
	res.decode(t, http.StatusBadRequest, &p)
	if p.Type != e.url+"/problems/http-4xx" || p.Status != http.StatusBadRequest || p.Code != "EMAIL_PASSWORD_SIGN_UP_DISABLED" ||
		p.Title != title || p.Message != message || res.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: problem %+v (%s); want http-4xx 400 EMAIL_PASSWORD_SIGN_UP_DISABLED %q: %q",
			email, p, res.Header().Get("Content-Type"), title, message)
	}
	if len(res.Header().Values("Set-Cookie")) != 0 {
		t.Errorf("%s: a refused sign-up set a cookie", email)
	}
	if _, _, err := e.app.store.UserByEmail(context.Background(), email); err == nil {
		t.Errorf("%s: the refused sign-up created the user", email)
	}
}

// socialSignIn signs in with GitHub as u and returns where the callback sent the browser, and
// the email of the session it holds then ("" when signed out).
func (e *signUpModeEnv) socialSignIn(t *testing.T, u socialtest.User) (string, string) {
	t.Helper()
	e.fake.SetUser(identity.GitHub, u)
	br := apptest.NewBrowser(t, e.url)
	res, _ := e.signInWith(t, br, `{"provider":"github","callbackURL":"/dashboard","newUserCallbackURL":"/welcome","errorCallbackURL":"/sign-in"}`)
	if res.Status != http.StatusFound {
		t.Fatalf("callback: %d %s", res.Status, res.Body)
	}
	email, _ := e.session(t, br)["email"].(string)
	return res.Header.Get("Location"), email
}

// wantExistingUsersSignIn: Olga signs in with her password, Gus with his linked GitHub
// account, and Olga links GitHub through her address once verified, whatever the mode.
func (e *signUpModeEnv) wantExistingUsersSignIn(t *testing.T) {
	t.Helper()
	e.app.signIn(t, e.olga.Email, "password-"+e.olga.Email)
	if to, email := e.socialSignIn(t, socialtest.User{ID: "7001", Login: "gus", Email: "gus-elsewhere@example.com"}); to != "/dashboard" || email != "gus@example.com" {
		t.Errorf("Gus's linked GitHub account: to %q as %q", to, email)
	}
	ctx := context.Background()
	if err := e.app.store.InTx(ctx, func(tx *store.Tx) error { return tx.MarkEmailVerified(ctx, e.olga.ID) }); err != nil {
		t.Fatal(err)
	}
	if to, email := e.socialSignIn(t, socialtest.User{ID: "7002", Login: "olga", Email: "olga@example.com", EmailVerified: true}); to != "/dashboard" || email != "olga@example.com" {
		t.Errorf("Olga linking GitHub: to %q as %q", to, email)
	}
}

// TestSignUpModes: GATEHOUSE_SIGN_UP decides who may create an account, by email sign-up and
// by a first social sign-in; people with an account sign in whatever the mode.
func TestSignUpModes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		t.Run("open", func(t *testing.T) {
			for _, mode := range []SignUpMode{"", SignUpOpen} { // unset is open
				env := newSignUpModeEnv(t, b, mode)
				env.wantSignedUp(t, env.signUp("stranger@example.com"), "stranger@example.com")
				env.wantSignedUp(t, env.signUp("invited@example.com"), "invited@example.com")
				if to, email := env.socialSignIn(t, socialtest.User{ID: "8001", Login: "newbie", Email: "newbie@example.com"}); to != "/welcome" || email != "newbie@example.com" {
					t.Errorf("mode %q: a new GitHub user: to %q as %q", mode, to, email)
				}
				env.wantExistingUsersSignIn(t)
			}
		})

		t.Run("invite-only", func(t *testing.T) {
			env := newSignUpModeEnv(t, b, SignUpInviteOnly)
			for _, email := range []string{"stranger@example.com", "expired@example.com", "canceled@example.com"} {
				env.wantRefused(t, env.signUp(email), email, "Sign-up needs an invitation", msgSignUpNeedsInvitation)
			}
			env.wantSignedUp(t, env.signUp(" Invited@Example.COM "), "invited@example.com")

			// Social: only a provider-verified address with a pending invitation.
			for _, u := range []socialtest.User{
				{ID: "8001", Login: "stranger", Email: "stranger-social@example.com", EmailVerified: true},
				{ID: "8002", Login: "unproven", Email: "invited-social@example.com", EmailVerified: false},
			} {
				if to, email := env.socialSignIn(t, u); to != "/sign-in?error=signup_disabled" || email != "" {
					t.Errorf("GitHub %s (verified %v): to %q as %q; want refused", u.Email, u.EmailVerified, to, email)
				}
				if _, _, err := env.app.store.UserByEmail(context.Background(), u.Email); err == nil {
					t.Errorf("GitHub %s (verified %v): the refused sign-in created the user", u.Email, u.EmailVerified)
				}
			}
			if to, email := env.socialSignIn(t, socialtest.User{ID: "8003", Login: "invited", Email: "invited-social@example.com", EmailVerified: true}); to != "/welcome" || email != "invited-social@example.com" {
				t.Errorf("an invited, verified GitHub address: to %q as %q", to, email)
			}
			env.wantExistingUsersSignIn(t)
		})

		t.Run("closed", func(t *testing.T) {
			env := newSignUpModeEnv(t, b, SignUpClosed)
			for _, email := range []string{"stranger@example.com", "invited@example.com"} {
				env.wantRefused(t, env.signUp(email), email, "Sign-up is closed", msgSignUpClosed)
			}
			if to, email := env.socialSignIn(t, socialtest.User{ID: "8003", Login: "invited", Email: "invited-social@example.com", EmailVerified: true}); to != "/sign-in?error=signup_disabled" || email != "" {
				t.Errorf("a new GitHub user: to %q as %q; want refused", to, email)
			}
			if _, _, err := env.app.store.UserByEmail(context.Background(), "invited-social@example.com"); err == nil {
				t.Error("the refused GitHub sign-in created the user")
			}
			env.wantExistingUsersSignIn(t)
		})

		t.Run("invite-only refusals count against the sign-up limit", func(t *testing.T) {
			cfg := testConfig()
			cfg.SignUp, cfg.SignUpLimit = SignUpInviteOnly, 2
			app := newTestApp(t, b.Open(t), cfg)
			try := func(email string) response {
				return app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
					body: `{"name":"Probe","email":` + jsonString(email) + `,"password":"correct-horse-battery"}`})
			}
			try("probe-1@example.com").wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "EMAIL_PASSWORD_SIGN_UP_DISABLED")
			try("probe-2@example.com").wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "EMAIL_PASSWORD_SIGN_UP_DISABLED")
			res := try("probe-3@example.com")
			res.wantAuthProblem(t, http.StatusTooManyRequests, "http-4xx", "TOO_MANY_REQUESTS")
			if res.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
		})
	})
}
