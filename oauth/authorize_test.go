package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// consentClientBody is a confidential client that asks for consent.
const consentClientBody = `{"name":"Shop & Co","type":"web","redirectUris":["https://shop.example.com/cb"],` +
	`"postLogoutRedirectUris":["https://shop.example.com/"],"grantTypes":["authorization_code","refresh_token"],` +
	`"scopes":["openid","profile","email","offline_access","organization","roles","entitlements","billing"],"skipConsent":false}`

// TestOAuthAuthorizationCodeFlow: golang.org/x/oauth2 and go-oidc, as a real relying party,
// run the code flow with PKCE against the real server, driving the sign-in and consent pages
// over HTTP with a cookie jar; then verify the ID token, call userinfo, refresh, introspect,
// revoke and end the session.
func TestOAuthAuthorizationCodeFlow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		shop, _ := env.create(t, consentClientBody)
		secret := *shop.ClientSecret

		// The user: a password, a member of the organization, a role in the client's project.
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-flow@example.com")
		password := "password-" + ada.Email
		roles, err := env.app.Store.ListProjectRoles(ctx, env.project.ID)
		if err != nil || len(roles) == 0 {
			t.Fatalf("project roles: %v %v", roles, err)
		}
		var orgID string
		err = env.app.Store.InTx(ctx, func(tx *store.Tx) error {
			p, err := env.app.Store.Project(ctx, env.project.ID)
			if err != nil {
				return err
			}
			orgID = p.OrganizationID
			if _, err := tx.AddMember(ctx, orgID, ada.ID, server.RoleDeveloper); err != nil {
				return err
			}
			if err := tx.CreateRoleBinding(ctx, &store.RoleBinding{ProjectID: env.project.ID, RoleID: roles[0].ID,
				PrincipalType: store.PrincipalUser, PrincipalID: ada.ID}); err != nil {
				return err
			}
			// An expired binding in the client's project and a binding in another project do
			// not count.
			expired := store.ProjectRole{ProjectID: env.project.ID, Name: "Former", Slug: "former"}
			if err := tx.CreateProjectRole(ctx, &expired); err != nil {
				return err
			}
			past := time.Now().Add(-time.Hour)
			if err := tx.CreateRoleBinding(ctx, &store.RoleBinding{ProjectID: env.project.ID, RoleID: expired.ID,
				PrincipalType: store.PrincipalUser, PrincipalID: ada.ID, ExpiresAt: &past}); err != nil {
				return err
			}
			elsewhere := store.Project{OrganizationID: orgID, Name: "Elsewhere", Slug: "elsewhere"}
			if err := tx.CreateProject(ctx, &elsewhere); err != nil {
				return err
			}
			foreign := store.ProjectRole{ProjectID: elsewhere.ID, Name: "Foreign", Slug: "foreign-role"}
			if err := tx.CreateProjectRole(ctx, &foreign); err != nil {
				return err
			}
			if err := tx.CreateRoleBinding(ctx, &store.RoleBinding{ProjectID: elsewhere.ID, RoleID: foreign.ID,
				PrincipalType: store.PrincipalUser, PrincipalID: ada.ID}); err != nil {
				return err
			}
			// Billing in the client's project: an active subscription to "pro" and a grant; a
			// grant in another project does not count.
			if err := tx.CreatePlan(ctx, &store.Plan{ProjectID: env.project.ID, Key: "pro", Name: "Pro", Currency: "usd",
				Interval: store.IntervalMonth, Entitlements: map[string]any{"sso": true}}); err != nil {
				return err
			}
			periodEnd := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			if _, _, err := tx.ApplySubscription(ctx, store.Subscription{ProjectID: env.project.ID,
				EnvironmentID: env.project.Environments[0].ID, ProcessorID: "sub_flow", SubjectID: ada.ID, PlanKey: "pro",
				Status: store.StatusActive, CurrentPeriodEnd: &periodEnd, EventCreated: time.Now()}); err != nil {
				return err
			}
			for _, prj := range []string{env.project.ID, elsewhere.ID} {
				if err := tx.CreateEntitlementGrant(ctx, &store.EntitlementGrant{ProjectID: prj, SubjectID: ada.ID,
					FeatureKey: "seats", Value: 5, ActorType: store.ActorSystem}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		org, err := env.app.Store.Organization(ctx, orgID)
		if err != nil {
			t.Fatal(err)
		}

		provider, err := oidc.NewProvider(ctx, env.url)
		if err != nil {
			t.Fatalf("discovery: %v", err)
		}
		var meta struct {
			Userinfo   string   `json:"userinfo_endpoint"`
			EndSession string   `json:"end_session_endpoint"`
			Prompts    []string `json:"prompt_values_supported"`
			Iss        bool     `json:"authorization_response_iss_parameter_supported"`
		}
		if err := provider.Claims(&meta); err != nil {
			t.Fatal(err)
		}
		if provider.Endpoint().AuthURL != env.url+"/api/auth/oauth2/authorize" || meta.Userinfo != env.url+"/api/auth/oauth2/userinfo" ||
			meta.EndSession != env.url+"/api/auth/oauth2/end-session" || !slices.Equal(meta.Prompts, []string{"none", "login", "consent"}) || !meta.Iss {
			t.Errorf("discovery: authorization endpoint %q, %+v", provider.Endpoint().AuthURL, meta)
		}
		cfg := oauth2.Config{ClientID: shop.ID, ClientSecret: secret, Endpoint: provider.Endpoint(),
			RedirectURL: "https://shop.example.com/cb",
			Scopes:      []string{"openid", "profile", "email", "offline_access", "organization", "roles", "entitlements", "billing"}}
		verifier := oauth2.GenerateVerifier()
		const state, nonce = "state-af0ifjsldkj", "nonce-n-0S6_WzA2Mj"
		authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce), oauth2.SetAuthURLParam("login_hint", ada.Email))

		br := apptest.NewBrowser(t, env.url)
		// No session: the sign-in page, its email filled in from login_hint.
		signin := br.Get(authURL)
		signin.WantPage(t, "sign-in page", http.StatusOK, `action="/api/auth/sign-in/email"`, `value="`+ada.Email+`"`,
			`<label for="password">`, "Shop &amp; Co")
		callback := signin.Hidden(t, "callbackURL")
		if !strings.HasPrefix(callback, "/api/auth/oauth2/authorize?") {
			t.Fatalf("callbackURL %q", callback)
		}
		// A wrong password comes back to the sign-in page with a message.
		bad := br.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"}, "callbackURL": {callback}}, env.url)
		again := br.Get(bad.Location().String())
		again.WantPage(t, "sign-in page after a failure", http.StatusOK, "The email or password is not correct.")
		if got := again.Hidden(t, "callbackURL"); got != callback {
			t.Errorf("callbackURL after a failure %q, want %q", got, callback)
		}
		// The sign-in form post answers 303 to the authorization request.
		res := br.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {password}, "callbackURL": {callback}}, env.url)
		if res.Status != http.StatusSeeOther || res.Header.Get("Location") != callback {
			t.Fatalf("sign-in post: %d %q; want 303 to %q", res.Status, res.Header.Get("Location"), callback)
		}
		// The session's active organization is what the organization claim names.
		req, _ := http.NewRequest("POST", env.url+"/api/auth/organization/set-active", strings.NewReader(`{"organizationId":"`+orgID+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", env.url)
		if r := br.Do(req); r.Status != http.StatusOK {
			t.Fatalf("set-active: %d %s", r.Status, r.Body)
		}
		// Signed in, no consent yet: to the consent page.
		res = br.Get(callback)
		consentURL := res.RedirectParams(t, "authorize after sign-in", "/api/auth/oauth2/consent?")
		consent := br.Get("/api/auth/oauth2/consent?" + consentURL.Encode())
		consent.WantPage(t, "consent page", http.StatusOK, "Shop &amp; Co", "See your email address",
			"See your roles in this application", `value="accept"`, `value="deny"`)
		challenge := consent.Hidden(t, "consent_challenge")
		// The consent post needs a trusted Origin and the page's challenge.
		br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, "").
			WantPage(t, "consent without Origin", http.StatusForbidden)
		br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, "https://evil.example").
			WantPage(t, "consent from another origin", http.StatusForbidden)
		br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge + "x"}, "decision": {"accept"}}, env.url).
			WantPage(t, "consent with a forged challenge", http.StatusBadRequest)
		other := apptest.NewBrowser(t, env.url)
		other.SignIn(t, ada.Email, password)
		other.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, env.url).
			WantPage(t, "consent challenge of another session", http.StatusBadRequest)

		res = br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, env.url)
		q := res.RedirectParams(t, "consent accepted", "https://shop.example.com/cb?")
		if q.Get("state") != state || q.Get("iss") != env.url || q.Get("code") == "" {
			t.Fatalf("authorization response %v; want code, state %q and iss %q", q, state, env.url)
		}

		// The consent is recorded and audited as the user's act.
		if got, err := env.app.Store.OAuthConsents(ctx, ada.ID, shop.ID); err != nil || len(got) != 1 || len(got[0].Scopes) != 8 {
			t.Errorf("recorded consents %v %v; want one with the eight scopes", got, err)
		}
		entries, err := env.app.Store.ListAudit(ctx, store.AuditFilter{ProjectID: env.project.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(entries, func(e store.AuditEntry) bool {
			return e.Action == "oauth_consent.grant" && e.ActorType == store.ActorUser && e.ActorID == ada.ID && e.TargetID == shop.ID
		}) {
			t.Errorf("no oauth_consent.grant audit row by %s for %s", ada.ID, shop.ID)
		}

		// The code exchange (x/oauth2 with the PKCE verifier).
		tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		if tok.RefreshToken == "" {
			t.Error("no refresh token for offline_access")
		}
		rawID, _ := tok.Extra("id_token").(string)
		current, err := env.app.keys.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h := jwtHeader(t, rawID); h["kid"] != current.ID || h["alg"] != "RS256" {
			t.Errorf("id token header %v", h)
		}
		idt, err := provider.Verifier(&oidc.Config{ClientID: shop.ID}).Verify(ctx, rawID)
		if err != nil {
			t.Fatalf("go-oidc rejects the ID token: %v", err)
		}
		if idt.Nonce != nonce || idt.Subject != ada.ID || idt.Issuer != env.url || !slices.Equal(idt.Audience, []string{shop.ID}) {
			t.Errorf("id token nonce %q sub %q iss %q aud %v", idt.Nonce, idt.Subject, idt.Issuer, idt.Audience)
		}
		if idt.AccessTokenHash == "" {
			t.Error("no at_hash")
		}
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			t.Errorf("at_hash: %v", err)
		}
		var idClaims map[string]any
		_ = idt.Claims(&idClaims)
		authTime, _ := idClaims["auth_time"].(float64)
		if idClaims["azp"] != shop.ID || authTime == 0 || time.Since(time.Unix(int64(authTime), 0)) > time.Minute {
			t.Errorf("azp %v auth_time %v", idClaims["azp"], idClaims["auth_time"])
		}

		// Userinfo through go-oidc (GET with the header), then POST with the header and with the body.
		ui, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			t.Fatalf("userinfo: %v", err)
		}
		if ui.Subject != ada.ID || ui.Email != ada.Email {
			t.Errorf("userinfo sub %q email %q", ui.Subject, ui.Email)
		}
		var claims map[string]any
		if err := ui.Claims(&claims); err != nil {
			t.Fatal(err)
		}
		wantRoles := []any{roles[0].Slug}
		if claims["name"] != "Ada Lovelace" || claims["email_verified"] != false || !slices.Equal(claims["roles"].([]any), wantRoles) {
			t.Errorf("userinfo claims %v; want roles %v", claims, wantRoles)
		}
		ents, _ := json.Marshal(claims["entitlements"])
		if want := `[{"expiresAt":null,"featureKey":"sso","source":{"id":"pro","type":"plan"},"value":true},` +
			`{"expiresAt":null,"featureKey":"seats","source":{"id":"` + env.app.GrantID(t, env.project.ID, ada.ID) + `","type":"grant"},"value":5}]`; string(ents) != want {
			t.Errorf("entitlements claim %s\nwant %s", ents, want)
		}
		billing, _ := json.Marshal(claims["billing"])
		if want := `{"currentPeriodEnd":"2030-01-01T00:00:00Z","plan":"pro","status":"active"}`; string(billing) != want {
			t.Errorf("billing claim %s, want %s", billing, want)
		}
		if o, _ := claims["organization"].(map[string]any); o["id"] != org.ID || o["slug"] != org.Slug || o["role"] != server.RoleDeveloper {
			t.Errorf("organization claim %v; want id %s slug %s role %s", claims["organization"], org.ID, org.Slug, server.RoleDeveloper)
		}
		for _, form := range []struct {
			header bool
			body   url.Values
			status int
		}{
			{true, url.Values{}, 200},
			{false, url.Values{"access_token": {tok.AccessToken}}, 200},
			{true, url.Values{"access_token": {tok.AccessToken}}, 400},
			{false, url.Values{"access_token": {"garbage"}}, 401},
			{false, url.Values{}, 401},
		} {
			req, _ := http.NewRequest("POST", env.url+"/api/auth/oauth2/userinfo", strings.NewReader(form.body.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if form.header {
				req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			}
			r := br.Do(req)
			if r.Status != form.status || (r.Status == 200 && !strings.Contains(r.Body, `"sub":"`+ada.ID+`"`)) ||
				(r.Status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer")) {
				t.Errorf("userinfo POST header=%v body=%v: %d %s", form.header, form.body, r.Status, r.Body)
			}
		}
		// A client-credentials token is no user's.
		cc := env.clientCredentials(t, env.web.ID, env.webSecret, oauth2.AuthStyleInHeader, "openid")
		if _, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(cc)); err == nil {
			t.Error("userinfo answered a client-credentials token")
		}

		// Refresh rotates; the new access token introspects active for the resource server.
		refreshed, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		if err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if refreshed.AccessToken == tok.AccessToken || refreshed.RefreshToken == tok.RefreshToken || refreshed.RefreshToken == "" {
			t.Error("refresh did not rotate the tokens")
		}
		var in map[string]any
		r := env.introspect(t, refreshed.AccessToken)
		if err := json.Unmarshal([]byte(r.Body), &in); err != nil || in["active"] != true || in["sub"] != ada.ID || in["client_id"] != shop.ID {
			t.Errorf("introspection of the refreshed token: %d %s", r.Status, r.Body)
		}
		// Revoking the refresh token kills its access token.
		if r := env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {refreshed.RefreshToken}}, shop.ID, secret); r.Status != 200 {
			t.Errorf("revoke: %d %s", r.Status, r.Body)
		}
		if r := env.introspect(t, refreshed.AccessToken); strings.TrimSpace(r.Body) != `{"active":false}` {
			t.Errorf("access token after revoking its refresh token: %s", r.Body)
		}

		// The consent is remembered for this scope set: straight back with a code.
		verifier2 := oauth2.GenerateVerifier()
		res = br.Get(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier2)))
		q = res.RedirectParams(t, "remembered consent", "https://shop.example.com/cb?")
		if q.Get("code") == "" || q.Get("iss") != env.url {
			t.Errorf("remembered consent: %v", q)
		}
		// prompt=consent asks again; a smaller scope set is covered; prompt=none gives a code.
		res = br.Get(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier2), oauth2.SetAuthURLParam("prompt", "consent")))
		res.RedirectParams(t, "prompt=consent", "/api/auth/oauth2/consent?")
		res = br.Get(apptest.AuthorizeURL(env.url, shop.ID, "https://shop.example.com/cb", oauth2.S256ChallengeFromVerifier(verifier2), "prompt", "none"))
		if q := res.RedirectParams(t, "prompt=none signed in", "https://shop.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("prompt=none with a session and consent: %v", q)
		}
		// A scope outside the consented set asks again... (all eight were consented; a new
		// session asking with prompt=login goes through the sign-in page first).
		res = br.Get(apptest.AuthorizeURL(env.url, shop.ID, "https://shop.example.com/cb", oauth2.S256ChallengeFromVerifier(verifier2), "prompt", "login"))
		res.WantPage(t, "prompt=login", http.StatusOK, `action="/api/auth/sign-in/email"`)
		if cb := res.Hidden(t, "callbackURL"); strings.Contains(cb, "prompt=login") {
			t.Errorf("the callback keeps prompt=login: %q", cb)
		}

		// RP-initiated logout with the ID token as hint, a registered post-logout URI and state.
		res = br.Get(env.url + "/api/auth/oauth2/end-session?" + url.Values{"id_token_hint": {rawID},
			"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"bye-123"}}.Encode())
		if q := res.RedirectParams(t, "end-session", "https://shop.example.com/?"); q.Get("state") != "bye-123" {
			t.Errorf("end-session state %v", q)
		}
		// The session is gone: prompt=none now says login_required.
		res = br.Get(apptest.AuthorizeURL(env.url, shop.ID, "https://shop.example.com/cb", oauth2.S256ChallengeFromVerifier(verifier2), "prompt", "none"))
		if q := res.RedirectParams(t, "prompt=none after logout", "https://shop.example.com/cb?"); q.Get("error") != "login_required" || q.Get("iss") != env.url {
			t.Errorf("prompt=none after logout: %v", q)
		}
		// The ID token's session is ended server-side too: the old cookie no longer works.
		if _, _, _, err := env.app.accounts.Sessions.FromRequest(httpRequestWithJar(t, br, env.url)); err == nil {
			t.Error("the browser still has a session after end-session")
		}
	})
}

// httpRequestWithJar returns a request to base carrying the browser's cookies.
func httpRequestWithJar(t *testing.T, b *apptest.Browser, base string) *http.Request {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/", nil)
	u, _ := url.Parse(base)
	for _, c := range b.Client.Jar.Cookies(u) {
		req.AddCookie(c)
	}
	return req
}
