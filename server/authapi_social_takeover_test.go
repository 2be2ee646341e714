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
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// postJSON posts body as JSON from the base origin in br.
func postJSON(br *browser, path, body string) page {
	br.t.Helper()
	req, _ := http.NewRequest("POST", br.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", br.base)
	return br.do(req)
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
func userinfoStatus(br *browser, tok string) int {
	br.t.Helper()
	req, _ := http.NewRequest("GET", br.base+"/api/auth/oauth2/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	return br.do(req).status
}

// authorizeWithConsent runs the authorization request of cfg in br, which is signed in,
// accepting the consent page when it comes, and returns the code.
func authorizeWithConsent(t *testing.T, br *browser, cfg oauth2.Config, verifier string) string {
	t.Helper()
	res := br.get(cfg.AuthCodeURL("state-takeover-0123", oauth2.S256ChallengeOption(verifier)))
	if loc := res.header.Get("Location"); strings.HasPrefix(loc, "/api/auth/oauth2/consent?") {
		consent := br.get(loc)
		res = br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {consent.hidden(t, "consent_challenge")},
			"decision": {"accept"}}, br.base)
	}
	code := res.redirectParams(t, "authorization", "https://shop.example.com/cb?").Get("code")
	if code == "" {
		t.Fatalf("no code: %d %v", res.status, res.header)
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
		pe := &providerEnv{app: env.app, url: env.url}
		ten := env.app.newTenancy(t)
		pe.owner = ten.members[RoleOwner]
		pe.project = saProject(t, env.app, ten, "takeover")
		shop, _ := pe.create(t, consentClientBody)
		cfg := oauth2.Config{ClientID: shop.ID, ClientSecret: *shop.ClientSecret, RedirectURL: "https://shop.example.com/cb",
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize", TokenURL: env.url + "/api/auth/oauth2/token"},
			Scopes:   []string{"openid", "email", "offline_access"}}

		// The attacker signs up with the victim's address and a password of their own.
		const attackerPassword = "attacker-chosen-password"
		mallory := newBrowser(t, env.url)
		res := postJSON(mallory, "/api/auth/sign-up/email",
			`{"name":"Mallory","email":"victim@example.com","password":"`+attackerPassword+`"}`)
		var signedUp struct {
			User struct {
				ID            string `json:"id"`
				EmailVerified bool   `json:"emailVerified"`
			} `json:"user"`
		}
		if err := json.Unmarshal([]byte(res.body), &signedUp); err != nil || res.status != http.StatusOK || signedUp.User.EmailVerified {
			t.Fatalf("attacker's sign-up: %d %s", res.status, res.body)
		}
		userID := signedUp.User.ID
		if res := postJSON(mallory, "/api/auth/organization/create", `{"name":"Victim Corp","slug":"victim-corp"}`); res.status != http.StatusOK {
			t.Fatalf("attacker's organization: %d %s", res.status, res.body)
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
		victim := newBrowser(t, env.url)
		res, _ = env.signInWith(t, victim, `{"provider":"github","callbackURL":"/dashboard","newUserCallbackURL":"/welcome"}`)
		wantRedirect(t, "the victim's GitHub sign-in", res, "/dashboard")
		if got := env.session(t, victim); got == nil || got["id"] != userID || got["emailVerified"] != true || got["email"] != "victim@example.com" {
			t.Fatalf("the victim's session: %v; want user %s with emailVerified true", got, userID)
		}
		if accounts, raw := env.accounts(t, victim); len(accounts) != 1 || accounts["github"] != "4242" {
			t.Errorf("the victim's accounts: %s; want GitHub 4242 only", raw)
		}
		// The account keeps the organization it created: it is the victim's account now.
		orgs := victim.get("/api/auth/organization/list")
		if orgs.status != http.StatusOK || !strings.Contains(orgs.body, `"slug":"victim-corp"`) {
			t.Errorf("the victim's organizations: %d %s", orgs.status, orgs.body)
		}

		// The attacker's password, session, tokens, code and consent are gone.
		refused := postJSON(newBrowser(t, env.url), "/api/auth/sign-in/email",
			`{"email":"victim@example.com","password":"`+attackerPassword+`"}`)
		var p struct{ Type, Title, Code string }
		if err := json.Unmarshal([]byte(refused.body), &p); err != nil || refused.status != http.StatusUnauthorized ||
			p.Type != env.url+"/problems/http-401" || p.Title != "Invalid email or password" || p.Code != "INVALID_EMAIL_OR_PASSWORD" {
			t.Errorf("attacker's password after the takeover: %d %s; want 401 INVALID_EMAIL_OR_PASSWORD", refused.status, refused.body)
		}
		if got := mallory.get("/api/auth/get-session"); got.status != http.StatusOK || strings.TrimSpace(got.body) != "null" {
			t.Errorf("attacker's session cookie at get-session: %d %s; want 200 null", got.status, got.body)
		}
		if got := mallory.get("/api/auth/list-sessions"); got.status != http.StatusUnauthorized {
			t.Errorf("attacker's session cookie at list-sessions: %d %s; want 401", got.status, got.body)
		}
		// (The access token first: a successful refresh would delete it too.)
		if got := userinfoStatus(mallory, tok.AccessToken); got != http.StatusUnauthorized {
			t.Errorf("attacker's access token at userinfo: %d; want 401", got)
		}
		pe.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}},
			shop.ID, *shop.ClientSecret).wantOAuthError(t, "attacker's refresh token", http.StatusBadRequest, "invalid_grant")
		pe.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "code": {laterCode},
			"redirect_uri": {cfg.RedirectURL}, "code_verifier": {laterVerifier}}, shop.ID, *shop.ClientSecret).
			wantOAuthError(t, "attacker's unredeemed code", http.StatusBadRequest, "invalid_grant")
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
		res, _ = env.signInWith(t, newBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "attacker's unverified GitHub sign-up", res, "/dashboard")
		fake.SetUser(identity.Google, socialtest.User{ID: "google-second-victim", Name: "Second Victim", Email: "second-victim@example.com", EmailVerified: true})
		second := newBrowser(t, env.url)
		res, _ = env.signInWith(t, second, `{"provider":"google","callbackURL":"/dashboard"}`)
		wantRedirect(t, "the second victim's Google sign-in", res, "/dashboard")
		if accounts, raw := env.accounts(t, second); len(accounts) != 1 || accounts["google"] != "google-second-victim" {
			t.Errorf("the second victim's accounts: %s; want Google only", raw)
		}
		res, _ = env.signInWith(t, newBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard","errorCallbackURL":"/sign-in"}`)
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
		owner := newBrowser(t, env.url)
		res := postJSON(owner, "/api/auth/sign-up/email", `{"name":"Olive","email":"olive@example.com","password":"`+password+`"}`)
		var signedUp struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if err := json.Unmarshal([]byte(res.body), &signedUp); err != nil || res.status != http.StatusOK {
			t.Fatalf("sign-up: %d %s", res.status, res.body)
		}
		if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.MarkEmailVerified(ctx, signedUp.User.ID) }); err != nil {
			t.Fatal(err)
		}

		fake.SetUser(identity.GitHub, socialtest.User{ID: "5151", Login: "olive", Email: "olive@example.com", EmailVerified: true})
		res, _ = env.signInWith(t, newBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard"}`)
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
