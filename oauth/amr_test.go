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
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// postJSON sends a JSON POST from the app's own origin with the browser's cookies.
func postJSON(t *testing.T, br *apptest.Browser, path, body string) apptest.Page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, br.Base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", br.Base)
	return br.Do(req)
}

// totpCode is the RFC 6238 code of the otpauth URI's secret at at, computed with pquerna/otp.
func totpCode(t *testing.T, uri string, at time.Time) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	c, err := totp.GenerateCodeCustom(u.Query().Get("secret"), at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOAuthAMR: go-oidc verifies ID tokens that say how the user signed in. A password session
// gives amr [pwd] and no acr; acr_values=urn:gatehouse:mfa sends a password-only session back
// to sign in, where the second factor is asked, and its ID token has amr [pwd otp mfa] and acr
// urn:gatehouse:mfa; a user without a factor gets unmet_authentication_requirements; max_age
// asks for a fresh sign-in. Discovery lists the acr value and the amr and acr claims.
func TestOAuthAMR(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		provider, err := oidc.NewProvider(ctx, env.url)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			ACR    []string `json:"acr_values_supported"`
			Claims []string `json:"claims_supported"`
		}
		if err := provider.Claims(&meta); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(meta.ACR, []string{"urn:gatehouse:mfa"}) || !slices.Contains(meta.Claims, "amr") || !slices.Contains(meta.Claims, "acr") {
			t.Fatalf("discovery: %+v", meta)
		}
		cfg := oauth2.Config{ClientID: env.web.ID, ClientSecret: env.webSecret, Endpoint: provider.Endpoint(),
			RedirectURL: "https://shop.example.com/cb", Scopes: []string{"openid", "email"}}
		verifier := provider.Verifier(&oidc.Config{ClientID: env.web.ID})
		authURL := func(verifierStr string, extra ...oauth2.AuthCodeOption) string {
			return cfg.AuthCodeURL("state-0123456789", append(extra, oauth2.S256ChallengeOption(verifierStr))...)
		}
		mfa := oauth2.SetAuthURLParam("acr_values", "urn:gatehouse:mfa")
		// idToken runs the code flow for a signed-in browser and returns the ID token's claims.
		idToken := func(br *apptest.Browser, extra ...oauth2.AuthCodeOption) map[string]any {
			t.Helper()
			v := oauth2.GenerateVerifier()
			q := br.Get(authURL(v, extra...)).RedirectParams(t, "authorize", "https://shop.example.com/cb?")
			if q.Get("code") == "" {
				t.Fatalf("authorization response %v", q)
			}
			tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(v))
			if err != nil {
				t.Fatalf("exchange: %v", err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := verifier.Verify(ctx, raw)
			if err != nil {
				t.Fatalf("go-oidc rejects the ID token: %v", err)
			}
			var claims map[string]any
			if err := idt.Claims(&claims); err != nil {
				t.Fatal(err)
			}
			if at, _ := claims["auth_time"].(float64); at == 0 || time.Since(time.Unix(int64(at), 0)) > time.Minute {
				t.Errorf("auth_time = %v", claims["auth_time"])
			}
			return claims
		}
		amrOf := func(claims map[string]any) string {
			b, _ := json.Marshal(claims["amr"])
			return string(b)
		}

		ada := env.app.NewUser(t, "Ada", "ada-amr@example.com")
		password := "password-" + ada.Email
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, password)

		// A password session: amr [pwd], no acr.
		claims := idToken(br)
		if amrOf(claims) != `["pwd"]` || claims["acr"] != nil {
			t.Fatalf("password sign-in: amr %s acr %v; want [\"pwd\"] and none", amrOf(claims), claims["acr"])
		}
		// max_age=0: the session is too old, the sign-in page again.
		br.Get(authURL(oauth2.GenerateVerifier(), oauth2.SetAuthURLParam("max_age", "0"))).
			WantPage(t, "sign-in page for max_age=0", http.StatusOK, `action="/api/auth/sign-in/email"`)
		// A second factor asked of a user who has none: unmet_authentication_requirements.
		q := br.Get(authURL(oauth2.GenerateVerifier(), mfa)).RedirectParams(t, "acr without a factor", "https://shop.example.com/cb?")
		if q.Get("error") != "unmet_authentication_requirements" || q.Get("code") != "" {
			t.Fatalf("acr without a factor: %v", q)
		}

		// Ada turns TOTP on.
		page := postJSON(t, br, "/api/auth/two-factor/enable", `{"password":"`+password+`"}`)
		var enrolment struct {
			TotpURI string `json:"totpURI"`
		}
		if page.Status != http.StatusOK || json.Unmarshal([]byte(page.Body), &enrolment) != nil {
			t.Fatalf("enable: %d %s", page.Status, page.Body)
		}
		if page = postJSON(t, br, "/api/auth/two-factor/verify-totp", `{"code":"`+totpCode(t, enrolment.TotpURI, time.Now())+`"}`); page.Status != http.StatusOK {
			t.Fatalf("verify-totp: %d %s", page.Status, page.Body)
		}
		// The password-only session does not satisfy acr urn:gatehouse:mfa: sign in again.
		br.Get(authURL(oauth2.GenerateVerifier(), mfa)).
			WantPage(t, "sign-in page for acr_values", http.StatusOK, `action="/api/auth/sign-in/email"`)
		// Without acr_values it still does.
		if claims = idToken(br); amrOf(claims) != `["pwd"]` {
			t.Fatalf("without acr_values: amr %s", amrOf(claims))
		}

		// Signing in with the password and a code (of the next step: the enrolment used this one).
		page = postJSON(t, br, "/api/auth/sign-in/email", `{"email":"`+ada.Email+`","password":"`+password+`"}`)
		if page.Status != http.StatusOK || !strings.Contains(page.Body, `"twoFactorRedirect":true`) {
			t.Fatalf("sign-in: %d %s", page.Status, page.Body)
		}
		code := totpCode(t, enrolment.TotpURI, time.Now().Add(30*time.Second))
		if page = postJSON(t, br, "/api/auth/two-factor/verify-totp", `{"code":"`+code+`"}`); page.Status != http.StatusOK {
			t.Fatalf("verify-totp after sign-in: %d %s", page.Status, page.Body)
		}
		claims = idToken(br, mfa)
		if amrOf(claims) != `["pwd","otp","mfa"]` || claims["acr"] != "urn:gatehouse:mfa" {
			t.Fatalf("with a second factor: amr %s acr %v", amrOf(claims), claims["acr"])
		}
	})
}

// TestOAuthSecondStepPages: a browser signs in through the provider's pages with a second
// factor: the password form sends it to the hosted second step, a wrong code comes back with a
// message, the backup-code form (linked from the first) completes the sign-in, and the ID token
// says so. A used-up pending sign-in sends the browser back to the sign-in page.
func TestOAuthSecondStepPages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		ada := env.app.NewUser(t, "Ada", "ada-steps@example.com")
		password := "password-" + ada.Email
		// Ada turns TOTP on (JSON, in a browser of her own).
		setup := apptest.NewBrowser(t, env.url)
		setup.SignIn(t, ada.Email, password)
		page := postJSON(t, setup, "/api/auth/two-factor/enable", `{"password":"`+password+`"}`)
		var enrolment struct {
			TotpURI     string   `json:"totpURI"`
			BackupCodes []string `json:"backupCodes"`
		}
		if page.Status != http.StatusOK || json.Unmarshal([]byte(page.Body), &enrolment) != nil {
			t.Fatalf("enable: %d %s", page.Status, page.Body)
		}
		if page = postJSON(t, setup, "/api/auth/two-factor/verify-totp", `{"code":"`+totpCode(t, enrolment.TotpURI, time.Now())+`"}`); page.Status != http.StatusOK {
			t.Fatalf("verify-totp: %d %s", page.Status, page.Body)
		}

		provider, err := oidc.NewProvider(ctx, env.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg := oauth2.Config{ClientID: env.web.ID, ClientSecret: env.webSecret, Endpoint: provider.Endpoint(),
			RedirectURL: "https://shop.example.com/cb", Scopes: []string{"openid", "email"}}
		v := oauth2.GenerateVerifier()
		br := apptest.NewBrowser(t, env.url)
		signin := br.Get(cfg.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(v)))
		callback := signin.Hidden(t, "callbackURL")
		res := br.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {password}, "callbackURL": {callback}}, env.url)
		step := res.RedirectParams(t, "sign-in with a second factor due", "/api/auth/two-factor?")
		if step.Get("callbackURL") != callback {
			t.Fatalf("second step callbackURL %q, want %q", step.Get("callbackURL"), callback)
		}
		form := br.Get(res.Header.Get("Location"))
		form.WantPage(t, "second step", http.StatusOK, `action="/api/auth/two-factor/verify-totp"`,
			`<label for="code">Code from your authenticator app</label>`, `autocomplete="one-time-code"`,
			`<label class="check" for="trustDevice">`, "Use a backup code instead")
		if got := form.Hidden(t, "callbackURL"); got != callback {
			t.Fatalf("form callbackURL %q", got)
		}
		// A cross-site post of the form is refused.
		if res := br.Post("/api/auth/two-factor/verify-totp", url.Values{"code": {"123456"}, "callbackURL": {callback}}, "https://evil.example"); res.Status != http.StatusForbidden ||
			!strings.Contains(res.Body, `"code":"INVALID_ORIGIN"`) {
			t.Fatalf("cross-site second step: %d %s", res.Status, res.Body)
		}
		// A wrong code: back to the form, with a message.
		res = br.Post("/api/auth/two-factor/verify-totp", url.Values{"code": {"000000"}, "callbackURL": {callback}}, env.url)
		if q := res.RedirectParams(t, "wrong code", "/api/auth/two-factor?"); q.Get("error") != "invalid_code" {
			t.Fatalf("after a wrong code: %v", q)
		}
		br.Get(res.Header.Get("Location")).WantPage(t, "second step after a wrong code", http.StatusOK, `role="alert"`, "That code is not correct.")
		// The backup-code form, linked from the first.
		backup := br.Get("/api/auth/two-factor?" + url.Values{"callbackURL": {callback}, "method": {"backup"}}.Encode())
		backup.WantPage(t, "backup-code form", http.StatusOK, `action="/api/auth/two-factor/verify-backup-code"`,
			`<label for="code">Backup code</label>`, "Use your authenticator app instead")
		res = br.Post("/api/auth/two-factor/verify-backup-code", url.Values{"code": {enrolment.BackupCodes[0]}, "callbackURL": {callback}}, env.url)
		if res.Status != http.StatusSeeOther || res.Header.Get("Location") != callback {
			t.Fatalf("backup code: %d %q, want 303 to %q\n%s", res.Status, res.Header.Get("Location"), callback, res.Body)
		}
		q := br.Get(callback).RedirectParams(t, "authorize after the second step", "https://shop.example.com/cb?")
		tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(v))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := tok.Extra("id_token").(string)
		idt, err := provider.Verifier(&oidc.Config{ClientID: env.web.ID}).Verify(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		var claims struct {
			AMR []string `json:"amr"`
		}
		if err := idt.Claims(&claims); err != nil || !slices.Equal(claims.AMR, []string{"pwd", "otp", "mfa"}) {
			t.Fatalf("amr %v, %v", claims.AMR, err)
		}
		// The pending sign-in is used up: the form says to sign in again, and a post goes back
		// to the sign-in page with a message.
		br.Get("/api/auth/two-factor?"+url.Values{"callbackURL": {callback}}.Encode()).
			WantPage(t, "second step without a pending sign-in", http.StatusBadRequest, "Sign in again")
		other := apptest.NewBrowser(t, env.url)
		res = other.Post("/api/auth/two-factor/verify-totp", url.Values{"code": {"123456"}, "callbackURL": {callback}}, env.url)
		if q := res.RedirectParams(t, "no pending sign-in", "/api/auth/oauth2/authorize?"); q.Get("login_error") != "two_factor_expired" {
			t.Fatalf("without a pending sign-in: %v", q)
		}
		other.Get(res.Header.Get("Location")).WantPage(t, "sign-in page after an expired second step", http.StatusOK,
			"The second step of your sign-in expired")
	})
}
