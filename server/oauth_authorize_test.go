package server

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// consentClientBody is a confidential client that asks for consent.
const consentClientBody = `{"name":"Shop & Co","type":"web","redirectUris":["https://shop.example.com/cb"],` +
	`"postLogoutRedirectUris":["https://shop.example.com/"],"grantTypes":["authorization_code","refresh_token"],` +
	`"scopes":["openid","profile","email","offline_access","organization","roles","entitlements","billing"],"skipConsent":false}`

// browser is a user agent with a cookie jar that never follows redirects by itself.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

type page struct {
	status int
	header http.Header
	body   string
}

func (p page) location() *url.URL {
	u, _ := url.Parse(p.header.Get("Location"))
	return u
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

// get fetches raw (absolute, or a path on the server).
func (b *browser) get(raw string) page {
	b.t.Helper()
	if strings.HasPrefix(raw, "/") {
		raw = b.base + raw
	}
	req, err := http.NewRequest("GET", raw, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	return b.do(req)
}

// post sends a browser form post with the given Origin ("" for none).
func (b *browser) post(path string, form url.Values, origin string) page {
	b.t.Helper()
	req, err := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

// hidden returns the value of the hidden input name on a page.
func (p page) hidden(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no hidden input %s on the page (%d): %s", name, p.status, p.body)
	}
	return html.UnescapeString(m[1])
}

// wantPage asserts an HTML page of the provider with status, its security headers, and text.
func (p page) wantPage(t *testing.T, name string, status int, texts ...string) {
	t.Helper()
	csp := p.header.Get("Content-Security-Policy")
	if p.status != status || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") ||
		p.header.Get("Location") != "" {
		t.Fatalf("%s: %d %v; want a %d page without redirect\n%s", name, p.status, p.header, status, p.body)
	}
	nonce := regexp.MustCompile(`style-src 'nonce-([^']+)'`).FindStringSubmatch(csp)
	if nonce == nil || !strings.Contains(p.body, `<style nonce="`+nonce[1]+`">`) {
		t.Errorf("%s: the inline stylesheet does not carry the CSP nonce (%q)", name, csp)
	}
	for _, want := range append([]string{`<html lang="en">`, `name="viewport"`}, texts...) {
		if !strings.Contains(p.body, want) {
			t.Errorf("%s: the page lacks %q:\n%s", name, want, p.body)
		}
	}
	if strings.Contains(p.body, "http://") || strings.Contains(p.body, "https://") {
		t.Errorf("%s: the page references an external URL:\n%s", name, p.body)
	}
}

// redirectParams asserts a 303 to prefix and returns its query.
func (p page) redirectParams(t *testing.T, name, prefix string) url.Values {
	t.Helper()
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, prefix) {
		t.Fatalf("%s: %d Location %q; want 303 to %s\n%s", name, p.status, loc, prefix, p.body)
	}
	return p.location().Query()
}

// signIn signs the browser in through the sign-in form post.
func (b *browser) signIn(t *testing.T, email, password string) {
	t.Helper()
	res := b.post("/api/auth/sign-in/email", url.Values{"email": {email}, "password": {password}, "callbackURL": {"/"}}, b.base)
	if res.status != http.StatusSeeOther || res.header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d %v %s", res.status, res.header, res.body)
	}
}

// authorizeURL is an authorization request for client to redirect with PKCE S256; extra
// key/value pairs are added (or, with an empty value, removed).
func authorizeURL(base, clientID, redirect, challenge string, extra ...string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"scope": {"openid email"}, "state": {"state-0123456789"}, "code_challenge": {challenge},
		"code_challenge_method": {"S256"}}
	for i := 0; i < len(extra); i += 2 {
		if extra[i+1] == "" {
			q.Del(extra[i])
		} else {
			q.Set(extra[i], extra[i+1])
		}
	}
	return base + "/api/auth/oauth2/authorize?" + q.Encode()
}

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
		ada := env.app.newUser(t, "Ada Lovelace", "ada-flow@example.com")
		password := "password-" + ada.Email
		roles, err := env.app.store.ListProjectRoles(ctx, env.project.ID)
		if err != nil || len(roles) == 0 {
			t.Fatalf("project roles: %v %v", roles, err)
		}
		var orgID string
		err = env.app.store.InTx(ctx, func(tx *store.Tx) error {
			p, err := env.app.store.Project(ctx, env.project.ID)
			if err != nil {
				return err
			}
			orgID = p.OrganizationID
			if _, err := tx.AddMember(ctx, orgID, ada.ID, RoleDeveloper); err != nil {
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
		org, err := env.app.store.Organization(ctx, orgID)
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

		br := newBrowser(t, env.url)
		// No session: the sign-in page, its email filled in from login_hint.
		signin := br.get(authURL)
		signin.wantPage(t, "sign-in page", http.StatusOK, `action="/api/auth/sign-in/email"`, `value="`+ada.Email+`"`,
			`<label for="password">`, "Shop &amp; Co")
		callback := signin.hidden(t, "callbackURL")
		if !strings.HasPrefix(callback, "/api/auth/oauth2/authorize?") {
			t.Fatalf("callbackURL %q", callback)
		}
		// A wrong password comes back to the sign-in page with a message.
		bad := br.post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"}, "callbackURL": {callback}}, env.url)
		again := br.get(bad.location().String())
		again.wantPage(t, "sign-in page after a failure", http.StatusOK, "The email or password is not correct.")
		if got := again.hidden(t, "callbackURL"); got != callback {
			t.Errorf("callbackURL after a failure %q, want %q", got, callback)
		}
		// The sign-in form post answers 303 to the authorization request.
		res := br.post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {password}, "callbackURL": {callback}}, env.url)
		if res.status != http.StatusSeeOther || res.header.Get("Location") != callback {
			t.Fatalf("sign-in post: %d %q; want 303 to %q", res.status, res.header.Get("Location"), callback)
		}
		// The session's active organization is what the organization claim names.
		req, _ := http.NewRequest("POST", env.url+"/api/auth/organization/set-active", strings.NewReader(`{"organizationId":"`+orgID+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", env.url)
		if r := br.do(req); r.status != http.StatusOK {
			t.Fatalf("set-active: %d %s", r.status, r.body)
		}
		// Signed in, no consent yet: to the consent page.
		res = br.get(callback)
		consentURL := res.redirectParams(t, "authorize after sign-in", "/api/auth/oauth2/consent?")
		consent := br.get("/api/auth/oauth2/consent?" + consentURL.Encode())
		consent.wantPage(t, "consent page", http.StatusOK, "Shop &amp; Co", "See your email address",
			"See your roles in this application", `value="accept"`, `value="deny"`)
		challenge := consent.hidden(t, "consent_challenge")
		// The consent post needs a trusted Origin and the page's challenge.
		br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, "").
			wantPage(t, "consent without Origin", http.StatusForbidden)
		br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, "https://evil.example").
			wantPage(t, "consent from another origin", http.StatusForbidden)
		br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge + "x"}, "decision": {"accept"}}, env.url).
			wantPage(t, "consent with a forged challenge", http.StatusBadRequest)
		other := newBrowser(t, env.url)
		other.signIn(t, ada.Email, password)
		other.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, env.url).
			wantPage(t, "consent challenge of another session", http.StatusBadRequest)

		res = br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, env.url)
		q := res.redirectParams(t, "consent accepted", "https://shop.example.com/cb?")
		if q.Get("state") != state || q.Get("iss") != env.url || q.Get("code") == "" {
			t.Fatalf("authorization response %v; want code, state %q and iss %q", q, state, env.url)
		}

		// The consent is recorded and audited as the user's act.
		if got, err := env.app.store.OAuthConsents(ctx, ada.ID, shop.ID); err != nil || len(got) != 1 || len(got[0].Scopes) != 8 {
			t.Errorf("recorded consents %v %v; want one with the eight scopes", got, err)
		}
		entries, err := env.app.store.ListAudit(ctx, store.AuditFilter{ProjectID: env.project.ID})
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
			`{"expiresAt":null,"featureKey":"seats","source":{"id":"` + grantID(t, env.app, env.project.ID, ada.ID) + `","type":"grant"},"value":5}]`; string(ents) != want {
			t.Errorf("entitlements claim %s\nwant %s", ents, want)
		}
		billing, _ := json.Marshal(claims["billing"])
		if want := `{"currentPeriodEnd":"2030-01-01T00:00:00Z","plan":"pro","status":"active"}`; string(billing) != want {
			t.Errorf("billing claim %s, want %s", billing, want)
		}
		if o, _ := claims["organization"].(map[string]any); o["id"] != org.ID || o["slug"] != org.Slug || o["role"] != RoleDeveloper {
			t.Errorf("organization claim %v; want id %s slug %s role %s", claims["organization"], org.ID, org.Slug, RoleDeveloper)
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
			r := br.do(req)
			if r.status != form.status || (r.status == 200 && !strings.Contains(r.body, `"sub":"`+ada.ID+`"`)) ||
				(r.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer")) {
				t.Errorf("userinfo POST header=%v body=%v: %d %s", form.header, form.body, r.status, r.body)
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
		if err := json.Unmarshal([]byte(r.body), &in); err != nil || in["active"] != true || in["sub"] != ada.ID || in["client_id"] != shop.ID {
			t.Errorf("introspection of the refreshed token: %d %s", r.status, r.body)
		}
		// Revoking the refresh token kills its access token.
		if r := env.post(t, "/api/auth/oauth2/revoke", url.Values{"token": {refreshed.RefreshToken}}, shop.ID, secret); r.status != 200 {
			t.Errorf("revoke: %d %s", r.status, r.body)
		}
		if r := env.introspect(t, refreshed.AccessToken); strings.TrimSpace(r.body) != `{"active":false}` {
			t.Errorf("access token after revoking its refresh token: %s", r.body)
		}

		// The consent is remembered for this scope set: straight back with a code.
		verifier2 := oauth2.GenerateVerifier()
		res = br.get(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier2)))
		q = res.redirectParams(t, "remembered consent", "https://shop.example.com/cb?")
		if q.Get("code") == "" || q.Get("iss") != env.url {
			t.Errorf("remembered consent: %v", q)
		}
		// prompt=consent asks again; a smaller scope set is covered; prompt=none gives a code.
		res = br.get(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier2), oauth2.SetAuthURLParam("prompt", "consent")))
		res.redirectParams(t, "prompt=consent", "/api/auth/oauth2/consent?")
		res = br.get(authorizeURL(env.url, shop.ID, "https://shop.example.com/cb", oauth2.S256ChallengeFromVerifier(verifier2), "prompt", "none"))
		if q := res.redirectParams(t, "prompt=none signed in", "https://shop.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("prompt=none with a session and consent: %v", q)
		}
		// A scope outside the consented set asks again... (all eight were consented; a new
		// session asking with prompt=login goes through the sign-in page first).
		res = br.get(authorizeURL(env.url, shop.ID, "https://shop.example.com/cb", oauth2.S256ChallengeFromVerifier(verifier2), "prompt", "login"))
		res.wantPage(t, "prompt=login", http.StatusOK, `action="/api/auth/sign-in/email"`)
		if cb := res.hidden(t, "callbackURL"); strings.Contains(cb, "prompt=login") {
			t.Errorf("the callback keeps prompt=login: %q", cb)
		}

		// RP-initiated logout with the ID token as hint, a registered post-logout URI and state.
		res = br.get(env.url + "/api/auth/oauth2/end-session?" + url.Values{"id_token_hint": {rawID},
			"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"bye-123"}}.Encode())
		if q := res.redirectParams(t, "end-session", "https://shop.example.com/?"); q.Get("state") != "bye-123" {
			t.Errorf("end-session state %v", q)
		}
		// The session is gone: prompt=none now says login_required.
		res = br.get(authorizeURL(env.url, shop.ID, "https://shop.example.com/cb", oauth2.S256ChallengeFromVerifier(verifier2), "prompt", "none"))
		if q := res.redirectParams(t, "prompt=none after logout", "https://shop.example.com/cb?"); q.Get("error") != "login_required" || q.Get("iss") != env.url {
			t.Errorf("prompt=none after logout: %v", q)
		}
		// The ID token's session is ended server-side too: the old cookie no longer works.
		if _, _, _, err := env.app.srv.sessions.FromRequest(httpRequestWithJar(t, br, env.url)); err == nil {
			t.Error("the browser still has a session after end-session")
		}
	})
}

// httpRequestWithJar returns a request to base carrying the browser's cookies.
func httpRequestWithJar(t *testing.T, b *browser, base string) *http.Request {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/", nil)
	u, _ := url.Parse(base)
	for _, c := range b.c.Jar.Cookies(u) {
		req.AddCookie(c)
	}
	return req
}

// TestOAuthAuthorizeErrors is the authorization endpoint's negative table: an error the client
// may hear is a 303 to its registered redirect URI with error, state and iss; a request
// without a usable client or an exactly matching redirect URI gets the error page.
func TestOAuthAuthorizeErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		shop, _ := env.create(t, consentClientBody)
		ada := env.app.newUser(t, "Ada Lovelace", "ada-errors@example.com")
		verifier := oauth2.GenerateVerifier()
		challenge := oauth2.S256ChallengeFromVerifier(verifier)
		const cb = "https://shop.example.com/cb"

		anonymous := newBrowser(t, env.url)
		br := newBrowser(t, env.url)
		br.signIn(t, ada.Email, "password-"+ada.Email)

		redirected := func(name string, b *browser, raw, code string) {
			t.Helper()
			q := b.get(raw).redirectParams(t, name, cb+"?")
			if q.Get("error") != code || q.Get("state") != "state-0123456789" || q.Get("iss") != env.url || q.Get("code") != "" {
				t.Errorf("%s: %v; want error %q with state and iss", name, q, code)
			}
		}
		for _, c := range []struct {
			name  string
			extra []string
			code  string
		}{
			{"missing PKCE", []string{"code_challenge", "", "code_challenge_method", ""}, "invalid_request"},
			{"missing challenge method", []string{"code_challenge_method", ""}, "invalid_request"},
			{"plain PKCE", []string{"code_challenge", verifier, "code_challenge_method", "plain"}, "invalid_request"},
			{"response_type=token", []string{"response_type", "token"}, "unsupported_response_type"},
			{"response_type=id_token", []string{"response_type", "id_token"}, "unsupported_response_type"},
			{"unknown scope", []string{"scope", "openid admin"}, "invalid_scope"},
			{"unknown prompt", []string{"prompt", "select_account"}, "invalid_request"},
			{"prompt none with login", []string{"prompt", "none login"}, "invalid_request"},
			{"response_mode fragment", []string{"response_mode", "fragment"}, "unsupported_response_mode"},
		} {
			redirected(c.name, br, authorizeURL(env.url, shop.ID, cb, challenge, c.extra...), c.code)
		}
		redirected("prompt=none without a session", anonymous, authorizeURL(env.url, shop.ID, cb, challenge, "prompt", "none"), "login_required")
		redirected("prompt=none without consent", br, authorizeURL(env.url, shop.ID, cb, challenge, "prompt", "none"), "consent_required")
		redirected("repeated scope", br, authorizeURL(env.url, shop.ID, cb, challenge)+"&scope=email", "invalid_request")
		// A client without the authorization_code grant is refused.
		machine, raw := env.create(t, `{"name":"Machine","type":"web","redirectUris":["https://shop.example.com/cb"],"grantTypes":["client_credentials"],"scopes":["openid"]}`)
		if machine.ID == "" {
			t.Fatalf("create a client_credentials client: %s", raw)
		}
		redirected("client without authorization_code", br, authorizeURL(env.url, machine.ID, cb, challenge, "scope", "openid"), "unauthorized_client")
		// The authorization request as a form post behaves as the GET.
		form, _ := url.Parse(authorizeURL(env.url, shop.ID, cb, challenge))
		br.post("/api/auth/oauth2/authorize", form.Query(), "").redirectParams(t, "form post", "/api/auth/oauth2/consent?")
		// Unknown parameters are ignored.
		res := br.get(authorizeURL(env.url, shop.ID, cb, challenge, "x-unknown", "1"))
		res.redirectParams(t, "unknown parameter", "/api/auth/oauth2/consent?")

		// The error page, never a redirect.
		env.disable(t, env.peer.ID)
		for _, c := range []struct{ name, url string }{
			{"trailing slash", authorizeURL(env.url, shop.ID, cb+"/", challenge)},
			{"case", authorizeURL(env.url, shop.ID, "https://shop.example.com/CB", challenge)},
			{"host case", authorizeURL(env.url, shop.ID, "https://SHOP.example.com/cb", challenge)},
			{"extra query", authorizeURL(env.url, shop.ID, cb+"?x=1", challenge)},
			{"fragment", authorizeURL(env.url, shop.ID, cb+"#f", challenge)},
			{"another site", authorizeURL(env.url, shop.ID, "https://evil.example/cb", challenge)},
			{"unknown client", authorizeURL(env.url, "cli_00000000000000000000000000", cb, challenge)},
			{"disabled client", authorizeURL(env.url, env.peer.ID, cb, challenge)},
			{"no client", authorizeURL(env.url, "", cb, challenge, "client_id", "")},
			{"repeated client_id", authorizeURL(env.url, shop.ID, cb, challenge) + "&client_id=" + shop.ID},
			{"repeated redirect_uri", authorizeURL(env.url, shop.ID, cb, challenge) + "&redirect_uri=" + url.QueryEscape(cb)},
		} {
			br.get(c.url).wantPage(t, c.name, http.StatusBadRequest, "Something went wrong")
		}

		// Consent denied: access_denied back to the client.
		res = br.get(authorizeURL(env.url, shop.ID, cb, challenge))
		res.redirectParams(t, "consent", "/api/auth/oauth2/consent?")
		consent := br.get("/api/auth/oauth2/consent?" + res.location().RawQuery)
		res = br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {consent.hidden(t, "consent_challenge")}, "decision": {"deny"}}, env.url)
		if q := res.redirectParams(t, "consent denied", cb+"?"); q.Get("error") != "access_denied" || q.Get("iss") != env.url || q.Get("state") != "state-0123456789" {
			t.Errorf("consent denied: %v", q)
		}
		if got, _ := env.app.store.OAuthConsents(ctx, ada.ID, shop.ID); len(got) != 0 {
			t.Errorf("a denied consent was recorded: %v", got)
		}

		// A wrong PKCE verifier at the token endpoint (a skipConsent client: straight to the code).
		webCfg := oauth2.Config{ClientID: env.web.ID, ClientSecret: env.webSecret, RedirectURL: cb,
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize", TokenURL: env.url + "/api/auth/oauth2/token"},
			Scopes:   []string{"openid"}}
		res = br.get(webCfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
		q := res.redirectParams(t, "skipConsent client", cb+"?")
		if _, err := webCfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil ||
			!strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("exchange with a wrong verifier: %v; want invalid_grant", err)
		}
		// ...and without one (RFC 7636 4.4.1: a missing parameter is invalid_request).
		res = br.get(webCfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
		q = res.redirectParams(t, "skipConsent client", cb+"?")
		if _, err := webCfg.Exchange(ctx, q.Get("code")); err == nil || !strings.Contains(err.Error(), `"invalid_request"`) {
			t.Errorf("exchange without a verifier: %v; want invalid_request", err)
		}
		// prompt=consent asks even for a skipConsent client; accepting writes no consent row.
		res = br.get(authorizeURL(env.url, env.web.ID, cb, challenge, "prompt", "consent"))
		res.redirectParams(t, "prompt=consent, skipConsent client", "/api/auth/oauth2/consent?")
		consent = br.get("/api/auth/oauth2/consent?" + res.location().RawQuery)
		res = br.post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {consent.hidden(t, "consent_challenge")}, "decision": {"accept"}}, env.url)
		if q := res.redirectParams(t, "prompt=consent accepted", cb+"?"); q.Get("code") == "" {
			t.Errorf("prompt=consent accepted: %v", q)
		}
		if n, _ := env.app.store.OAuthConsents(ctx, ada.ID, env.web.ID); len(n) != 0 {
			t.Errorf("a skipConsent client wrote consent rows: %v", n)
		}

		// max_age: a session older than max_age signs in again; a younger one does not.
		old := br.get(authorizeURL(env.url, env.web.ID, cb, challenge, "max_age", "0"))
		old.wantPage(t, "max_age exceeded", http.StatusOK, `action="/api/auth/sign-in/email"`)
		if cbURL := old.hidden(t, "callbackURL"); strings.Contains(cbURL, "max_age") {
			t.Errorf("the callback keeps max_age: %q", cbURL)
		}
		br.get(authorizeURL(env.url, env.web.ID, cb, challenge, "max_age", "3600")).redirectParams(t, "max_age satisfied", cb+"?code=")
	})
}

// TestOAuthEndSession: end-session without a valid hint asks first (POST confirms with 303);
// an unregistered post-logout URI gets the error page.
func TestOAuthEndSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ada := env.app.newUser(t, "Ada Lovelace", "ada-logout@example.com")
		br := newBrowser(t, env.url)
		br.signIn(t, ada.Email, "password-"+ada.Email)

		br.get("/api/auth/oauth2/end-session?"+url.Values{"client_id": {env.web.ID},
			"post_logout_redirect_uri": {"https://evil.example/"}}.Encode()).
			wantPage(t, "unregistered post-logout URI", http.StatusBadRequest, "not registered")
		br.get("/api/auth/oauth2/end-session?"+url.Values{"id_token_hint": {"not.a.token"},
			"post_logout_redirect_uri": {"https://shop.example.com/"}}.Encode()).
			wantPage(t, "invalid hint with a redirect", http.StatusBadRequest, "not registered")

		confirm := br.get("/api/auth/oauth2/end-session?" + url.Values{"client_id": {env.web.ID},
			"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"s-1"}}.Encode())
		confirm.wantPage(t, "logout confirmation", http.StatusOK, "Sign out?", ada.Email)
		ch := confirm.hidden(t, "logout_challenge")
		br.post("/api/auth/oauth2/end-session", url.Values{"logout_challenge": {ch}}, "https://evil.example").
			wantPage(t, "logout from another origin", http.StatusForbidden)
		res := br.post("/api/auth/oauth2/end-session", url.Values{"logout_challenge": {ch}}, env.url)
		if q := res.redirectParams(t, "logout confirmed", "https://shop.example.com/?"); q.Get("state") != "s-1" {
			t.Errorf("logout state %v", q)
		}
		if _, _, _, err := env.app.srv.sessions.FromRequest(httpRequestWithJar(t, br, env.url)); err == nil {
			t.Error("still signed in after confirming the logout")
		}
		br.get("/api/auth/oauth2/end-session").wantPage(t, "signed out", http.StatusOK, "Signed out")
	})
}

// TestSignInFormPost: /api/auth/sign-in/email answers a browser's form post with a
// callbackURL by 303 (success, or back with login_error), keeps JSON answers for JSON clients,
// and never redirects to an untrusted callbackURL.
func TestSignInFormPost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ada := env.app.newUser(t, "Ada Lovelace", "ada-form@example.com")
		br := newBrowser(t, env.url)
		const cb = "/api/auth/oauth2/authorize?client_id=x"

		// A JSON client (Accept: application/json) posting a form still gets better-auth's JSON.
		req, _ := http.NewRequest("POST", env.url+"/api/auth/sign-in/email", strings.NewReader(url.Values{
			"email": {ada.Email}, "password": {"password-" + ada.Email}, "callbackURL": {cb}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Origin", env.url)
		if res := br.do(req); res.status != http.StatusOK || !strings.Contains(res.body, `"redirect":true`) || !strings.Contains(res.body, `"url":"`+cb+`"`) {
			t.Errorf("JSON client: %d %s", res.status, res.body)
		}
		// An untrusted callbackURL is refused, not followed.
		res := br.post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"password-" + ada.Email},
			"callbackURL": {"https://evil.example/steal"}}, env.url)
		if res.status != http.StatusForbidden || res.header.Get("Location") != "" {
			t.Errorf("untrusted callbackURL: %d %v", res.status, res.header)
		}
		// Wrong passwords: back with invalid_credentials, then too_many_attempts once throttled.
		var codes []string
		for range 6 {
			res := br.post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"}, "callbackURL": {cb}}, env.url)
			codes = append(codes, res.redirectParams(t, "failed sign-in", "/api/auth/oauth2/authorize?").Get("login_error"))
		}
		want := []string{"invalid_credentials", "invalid_credentials", "invalid_credentials", "invalid_credentials", "invalid_credentials", "too_many_attempts"}
		if !slices.Equal(codes, want) {
			t.Errorf("login_error sequence %v; want %v", codes, want)
		}
		// The sign-in page shows the matching message and does not forward the flag.
		page := newBrowser(t, env.url).get(authorizeURL(env.url, env.web.ID, "https://shop.example.com/cb",
			oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), "login_error", "too_many_attempts"))
		page.wantPage(t, "throttled sign-in page", http.StatusOK, "Too many failed attempts")
		if strings.Contains(page.hidden(t, "callbackURL"), "login_error") {
			t.Errorf("the callbackURL forwards login_error: %q", page.hidden(t, "callbackURL"))
		}
	})
}
