package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// consentClientBody is a confidential client that asks for consent.
const consentClientBody = `{"name":"Shop & Co","type":"web","redirectUris":["https://shop.example.com/cb"],` +
	`"grantTypes":["authorization_code","refresh_token"],"scopes":["openid","email","offline_access"],"skipConsent":false}`

// postJSON posts body as JSON from the base origin in br.
func postJSON(br *apptest.Browser, path, body string) apptest.Page {
	br.T.Helper()
	req, _ := http.NewRequest("POST", br.Base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", br.Base)
	return br.Do(req)
}

// wantTokenError posts form to the token endpoint as client id (HTTP Basic) and asserts an
// RFC 6749 error body with status and code.
func wantTokenError(t *testing.T, base, name string, form url.Values, id, secret string, status int, code string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/auth/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	res := apptest.NewBrowser(t, base).Do(req)
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(res.Body), &body); err != nil || res.Status != status || body.Error != code {
		t.Errorf("%s: %d %s; want %d with error %q", name, res.Status, res.Body, status, code)
	}
}

// newVerifiedFixtureUser is newFixtureUser with the email marked verified.
func (a *testApp) newVerifiedFixtureUser(t *testing.T, name, email string) testUser {
	t.Helper()
	u := a.newFixtureUser(t, name, email)
	ctx := context.Background()
	if err := a.store.InTx(ctx, func(tx *store.Tx) error { return tx.MarkEmailVerified(ctx, u.ID) }); err != nil {
		t.Fatal(err)
	}
	u.EmailVerified = true
	return u
}

// userinfoStatus is the status of GET userinfo with access token tok.
func userinfoStatus(br *apptest.Browser, tok string) int {
	br.T.Helper()
	req, _ := http.NewRequest("GET", br.Base+"/api/auth/oauth2/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	return br.Do(req).Status
}

// authorizeWithConsent runs the authorization request of cfg in br, which is signed in,
// accepting the consent page when it comes, and returns the code.
func authorizeWithConsent(t *testing.T, br *apptest.Browser, cfg oauth2.Config, verifier string) string {
	t.Helper()
	res := br.Get(cfg.AuthCodeURL("state-takeover-0123", oauth2.S256ChallengeOption(verifier)))
	if loc := res.Header.Get("Location"); strings.HasPrefix(loc, "/api/auth/oauth2/consent?") {
		consent := br.Get(loc)
		res = br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {consent.Hidden(t, "consent_challenge")},
			"decision": {"accept"}}, br.Base)
	}
	code := res.RedirectParams(t, "authorization", "https://shop.example.com/cb?").Get("code")
	if code == "" {
		t.Fatalf("no code: %d %v", res.Status, res.Header)
	}
	return code
}

// TestSocialLinkTakesOverUnverifiedAccount: pre-account hijacking. Someone signs up with a
// password under the victim's address (never verified) and holds a session, an OAuth consent,
// a refresh token and an unredeemed authorization code. When the victim later signs in with a
// provider that verified the address, the provider proves ownership: the account becomes the
// victim's, with its email verified, and everything the other person could use is gone — the
// password, the session, the refresh and access tokens, the code and the consent — in the
// transaction that links the provider account, with a user.email_claim audit row. The
// organization the account created stays with it.
func TestSocialLinkTakesOverUnverifiedAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st, _ := saOpen(t, b)
		fake := newFake(t)
		env := newSocialEnv(t, st, fake, identity.GitHub, identity.Google)
		ctx := context.Background()
		ten := env.app.newTenancy(t)
		project := saProject(t, env.app, ten, "takeover")
		shop, _ := env.app.CreateOIDCClient(t, apptest.User(ten.members[RoleOwner]), project.ID, consentClientBody, env.url)
		cfg := oauth2.Config{ClientID: shop.ID, ClientSecret: *shop.ClientSecret, RedirectURL: "https://shop.example.com/cb",
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize", TokenURL: env.url + "/api/auth/oauth2/token"},
			Scopes:   []string{"openid", "email", "offline_access"}}

		// The attacker signs up with the victim's address and a password of their own.
		const attackerPassword = "attacker-chosen-password"
		mallory := apptest.NewBrowser(t, env.url)
		res := postJSON(mallory, "/api/auth/sign-up/email",
			`{"name":"Mallory","email":"victim@example.com","password":"`+attackerPassword+`"}`)
		var signedUp struct {
			User struct {
				ID            string `json:"id"`
				EmailVerified bool   `json:"emailVerified"`
			} `json:"user"`
		}
		if err := json.Unmarshal([]byte(res.Body), &signedUp); err != nil || res.Status != http.StatusOK || signedUp.User.EmailVerified {
			t.Fatalf("attacker's sign-up: %d %s", res.Status, res.Body)
		}
		userID := signedUp.User.ID
		if res := postJSON(mallory, "/api/auth/organization/create", `{"name":"Victim Corp","slug":"victim-corp"}`); res.Status != http.StatusOK {
			t.Fatalf("attacker's organization: %d %s", res.Status, res.Body)
		}
		// An OAuth grant: consent, a refresh token (and its access token), and a second code
		// kept for later.
		verifier := oauth2.GenerateVerifier()
		tok, err := cfg.Exchange(ctx, authorizeWithConsent(t, mallory, cfg, verifier), oauth2.VerifierOption(verifier))
		if err != nil || tok.RefreshToken == "" {
			t.Fatalf("attacker's token: %v %+v", err, tok)
		}
		laterVerifier := oauth2.GenerateVerifier()
		laterCode := authorizeWithConsent(t, mallory, cfg, laterVerifier)
		if got := userinfoStatus(mallory, tok.AccessToken); got != http.StatusOK {
			t.Fatalf("attacker's access token before the takeover: %d", got)
		}
		if got := env.session(t, mallory); got == nil || got["id"] != userID {
			t.Fatalf("attacker's session before the takeover: %v", got)
		}

		// The victim continues with GitHub, which verified the address.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "4242", Login: "victim", Name: "Victor", Email: "victim@example.com", EmailVerified: true})
		victim := apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, victim, `{"provider":"github","callbackURL":"/dashboard","newUserCallbackURL":"/welcome"}`)
		wantRedirect(t, "the victim's GitHub sign-in", res, "/dashboard")
		if got := env.session(t, victim); got == nil || got["id"] != userID || got["emailVerified"] != true || got["email"] != "victim@example.com" {
			t.Fatalf("the victim's session: %v; want user %s with emailVerified true", got, userID)
		}
		if accounts, raw := env.accounts(t, victim); len(accounts) != 1 || accounts["github"] != "4242" {
			t.Errorf("the victim's accounts: %s; want GitHub 4242 only", raw)
		}
		// The account keeps the organization it created: it is the victim's account now.
		orgs := victim.Get("/api/auth/organization/list")
		if orgs.Status != http.StatusOK || !strings.Contains(orgs.Body, `"slug":"victim-corp"`) {
			t.Errorf("the victim's organizations: %d %s", orgs.Status, orgs.Body)
		}

		// The attacker's password, session, tokens, code and consent are gone.
		refused := postJSON(apptest.NewBrowser(t, env.url), "/api/auth/sign-in/email",
			`{"email":"victim@example.com","password":"`+attackerPassword+`"}`)
		var p struct{ Type, Title, Code string }
		if err := json.Unmarshal([]byte(refused.Body), &p); err != nil || refused.Status != http.StatusUnauthorized ||
			p.Type != env.url+"/problems/http-401" || p.Title != "Invalid email or password" || p.Code != "INVALID_EMAIL_OR_PASSWORD" {
			t.Errorf("attacker's password after the takeover: %d %s; want 401 INVALID_EMAIL_OR_PASSWORD", refused.Status, refused.Body)
		}
		if got := mallory.Get("/api/auth/get-session"); got.Status != http.StatusOK || strings.TrimSpace(got.Body) != "null" {
			t.Errorf("attacker's session cookie at get-session: %d %s; want 200 null", got.Status, got.Body)
		}
		if got := mallory.Get("/api/auth/list-sessions"); got.Status != http.StatusUnauthorized {
			t.Errorf("attacker's session cookie at list-sessions: %d %s; want 401", got.Status, got.Body)
		}
		// (The access token first: a successful refresh would delete it too.)
		if got := userinfoStatus(mallory, tok.AccessToken); got != http.StatusUnauthorized {
			t.Errorf("attacker's access token at userinfo: %d; want 401", got)
		}
		wantTokenError(t, env.url, "attacker's refresh token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}},
			shop.ID, *shop.ClientSecret, http.StatusBadRequest, "invalid_grant")
		wantTokenError(t, env.url, "attacker's unredeemed code", url.Values{"grant_type": {"authorization_code"}, "code": {laterCode},
			"redirect_uri": {cfg.RedirectURL}, "code_verifier": {laterVerifier}}, shop.ID, *shop.ClientSecret,
			http.StatusBadRequest, "invalid_grant")
		if consents, err := st.OAuthConsents(ctx, userID, shop.ID); err != nil || len(consents) != 0 {
			t.Errorf("consents after the takeover: %v %v; want none", consents, err)
		}

		// One audit row says what was taken away.
		claims := auditEntries(t, st, "user.email_claim")
		if len(claims) != 1 {
			t.Fatalf("%d user.email_claim rows, want 1", len(claims))
		}
		want := map[string]any{"proof": "github", "passwordRemoved": true, "providerLinksRemoved": float64(0),
			"sessionsEnded": float64(1), "refreshTokensRevoked": float64(1), "consentsRevoked": float64(1)}
		if c := claims[0]; c.ActorType != store.ActorUser || c.ActorID != userID || c.TargetType != "user" || c.TargetID != userID ||
			c.OrganizationID != "" || !reflect.DeepEqual(c.Metadata, want) {
			t.Errorf("user.email_claim row %+v; want metadata %v", c, want)
		}

		// The same through an account someone opened with a provider that did not verify the
		// address: the victim's Google sign-in removes that GitHub link.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "6666", Login: "mallory", Email: "second-victim@example.com", EmailVerified: false})
		res, _ = env.signInWith(t, apptest.NewBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "attacker's unverified GitHub sign-up", res, "/dashboard")
		fake.SetUser(identity.Google, socialtest.User{ID: "google-second-victim", Name: "Second Victim", Email: "second-victim@example.com", EmailVerified: true})
		second := apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, second, `{"provider":"google","callbackURL":"/dashboard"}`)
		wantRedirect(t, "the second victim's Google sign-in", res, "/dashboard")
		if accounts, raw := env.accounts(t, second); len(accounts) != 1 || accounts["google"] != "google-second-victim" {
			t.Errorf("the second victim's accounts: %s; want Google only", raw)
		}
		res, _ = env.signInWith(t, apptest.NewBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard","errorCallbackURL":"/sign-in"}`)
		wantRedirect(t, "attacker's GitHub after the takeover", res, "/sign-in?error=email_not_verified")
		claims = auditEntries(t, st, "user.email_claim")
		want = map[string]any{"proof": "google", "passwordRemoved": false, "providerLinksRemoved": float64(1),
			"sessionsEnded": float64(1), "refreshTokensRevoked": float64(0), "consentsRevoked": float64(0)}
		if len(claims) != 2 || !reflect.DeepEqual(claims[0].Metadata, want) {
			t.Errorf("user.email_claim rows %+v; want a second one with metadata %v", claims, want)
		}
	})
}

// TestSocialLinkKeepsVerifiedAccount: linking a provider account into an account whose email
// is already verified changes nothing else — its password still signs in, its sessions stay,
// and no user.email_claim row is written.
func TestSocialLinkKeepsVerifiedAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st, _ := saOpen(t, b)
		fake := newFake(t)
		env := newSocialEnv(t, st, fake, identity.GitHub)
		ctx := context.Background()
		const password = "owners-own-password"
		owner := apptest.NewBrowser(t, env.url)
		res := postJSON(owner, "/api/auth/sign-up/email", `{"name":"Olive","email":"olive@example.com","password":"`+password+`"}`)
		var signedUp struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if err := json.Unmarshal([]byte(res.Body), &signedUp); err != nil || res.Status != http.StatusOK {
			t.Fatalf("sign-up: %d %s", res.Status, res.Body)
		}
		if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.MarkEmailVerified(ctx, signedUp.User.ID) }); err != nil {
			t.Fatal(err)
		}

		fake.SetUser(identity.GitHub, socialtest.User{ID: "5151", Login: "olive", Email: "olive@example.com", EmailVerified: true})
		res, _ = env.signInWith(t, apptest.NewBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "GitHub into a verified account", res, "/dashboard")

		if got := env.session(t, owner); got == nil || got["id"] != signedUp.User.ID {
			t.Errorf("the earlier session after linking: %v", got)
		}
		var body signInBody
		env.app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"olive@example.com","password":"` + password + `"}`}).decode(t, http.StatusOK, &body)
		if body.User.ID != signedUp.User.ID || !body.User.EmailVerified {
			t.Errorf("password sign-in after linking: %+v", body.User)
		}
		if accounts, raw := env.accounts(t, owner); len(accounts) != 2 || accounts["credential"] != signedUp.User.ID || accounts["github"] != "5151" {
			t.Errorf("accounts after linking: %s; want credential and GitHub", raw)
		}
		if rows := auditEntries(t, st, "user.email_claim"); len(rows) != 0 {
			t.Errorf("user.email_claim rows for a verified account: %+v", rows)
		}
	})
}
