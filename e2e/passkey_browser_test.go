package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server"
)

// TestPasskeyPagesInBrowser: in Chromium with a virtual authenticator (DevTools
// WebAuthn.addVirtualAuthenticator: CTAP2, internal transport, resident keys, user
// verification), a user signed in with a password registers a passkey on the hosted account
// page and renames it; signed out, they continue an OAuth authorization request from the
// sign-in page with "Sign in with a passkey", no password typed, and the client's redirect URI
// gets a code whose ID token (verified with go-oidc) has amr hwk and mfa (conditional UI
// where Chromium offers it). Then, with conditional UI turned off: a password sign-in on a
// request with acr_values=urn:gatehouse:mfa reaches the second step, which offers "Use a
// passkey" and no code form; clicking it gives amr pwd, hwk, mfa. Last, the sign-in page's
// "Sign in with a passkey" button, clicked, signs in (get-session names the user; amr hwk,
// mfa). The app runs on localhost: WebAuthn takes no IP address as a relying party id. The
// pages are checked with axe-core at 390 and 1280 px.
func TestPasskeyPagesInBrowser(t *testing.T) {
	browser := findBrowser(t)
	axe := axeSource(t)
	env := startAccountsEnv(t, func(c *server.Config) {
		c.BaseURL = strings.Replace(c.BaseURL, "http://127.0.0.1:", "http://localhost:", 1)
	})
	if !strings.HasPrefix(env.base, "http://localhost:") {
		t.Fatalf("base URL %s, want localhost", env.base)
	}
	env.verifiedUser(t, "Grace Hopper", "grace@example.com", "grace-password-1")
	ctx := context.Background()
	verifier := oauth2.GenerateVerifier()
	authURL := env.oauth.AuthCodeURL("state-passkey-0001", oauth2.S256ChallengeOption(verifier),
		oidc.Nonce("nonce-passkey-0123456789"), oauth2.SetAuthURLParam("acr_values", "urn:gatehouse:mfa"))
	d := pageDriver{t: t, ctx: newOfflineBrowserResolving(t, browser, 3*time.Minute, "127.0.0.1", "localhost"), shots: "passkey-"}
	check := func(name string) {
		t.Helper()
		for _, width := range []int64{390, 1280} {
			d.do(name+": viewport", chromedp.EmulateViewport(width, 844))
			if found, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](`typeof axe !== 'undefined'`)); err != nil {
				t.Fatalf("%s: %v", name, err)
			} else if !found {
				if _, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](axe+";\ntrue")); err != nil {
					t.Fatalf("%s: inject axe-core: %v", name, err)
				}
			}
			violations, err := chromedp.Run(d.ctx, chromedp.Evaluate[[]string](axeSerious, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatalf("%s at %d px: axe: %v", name, width, err)
			}
			for _, v := range violations {
				t.Errorf("%s at %d px: %s", name, width, v)
			}
			if width == 390 {
				if sw, err := chromedp.Run(d.ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || sw > 390 {
					t.Errorf("%s: scrollWidth %d at 390 px (%v)", name, sw, err)
				}
			}
		}
	}

	if _, err := chromedp.Call(d.ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	va, err := chromedp.Call(d.ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{Protocol: webauthn.AuthenticatorProtocolCtap2,
			Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true}})
	if err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}

	// A password sign-in (the acr_values ask for a second factor the user does not have yet,
	// so the request cannot be met: the browser lands on the client with an error or the
	// error page), then the account page.
	plain := env.oauth.AuthCodeURL("state-passkey-0000", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	d.do("sign in", chromedp.Navigate(plain))
	d.waitHeading("Sign in")
	d.do("passkey button", chromedp.WaitVisible(chromedp.ID("passkey")))
	if ac, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.getElementById('email').autocomplete`)); err != nil || ac != "username webauthn" {
		t.Errorf("email autocomplete = %q (%v), want username webauthn", ac, err)
	}
	check("sign-in (passkey offered)")
	d.do("password", chromedp.SendKeys(chromedp.ID("email"), "grace@example.com"), chromedp.SendKeys(chromedp.ID("password"), "grace-password-1"),
		chromedp.Click(chromedp.CSS(`form:has(#password) button[type=submit]`)))
	d.waitHeading("Allow access?")
	d.do("account page", chromedp.Navigate(env.base+"/api/auth/account"))
	d.waitHeading("Your account")
	d.waitText("You have no passkeys yet.")
	check("account (no passkey)")
	d.do("add a passkey", chromedp.SendKeys(chromedp.ID("pk-new"), "Laptop"), chromedp.Click(chromedp.CSS(`#pk-add button`)))
	d.waitText("Remove Laptop")
	check("account (a passkey)")
	d.do("rename", chromedp.SetValue(chromedp.CSS(`.pk-rename input`), "Work laptop"), chromedp.Click(chromedp.CSS(`.pk-rename button`)))
	d.waitText("Remove Work laptop")
	creds, err := chromedp.Call(d.ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams(va))
	if err != nil || len(creds.Credentials) != 1 || !creds.Credentials[0].IsResidentCredential || creds.Credentials[0].RpID != "localhost" {
		t.Fatalf("authenticator credentials: %+v (%v), want one resident credential for localhost", creds, err)
	}

	// Signed out, the passkey alone signs in and continues the authorization request.
	if _, err := chromedp.Call(d.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	d.do("sign in with a passkey", chromedp.Navigate(authURL))
	d.waitHeading("Sign in")
	// Where the browser offers conditional UI, the page's conditional request is answered by
	// the virtual authenticator (it picks its one credential by itself): the passkey signs in
	// with nothing typed or clicked. Elsewhere the button does it.
	conditional, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](`PublicKeyCredential.isConditionalMediationAvailable ? PublicKeyCredential.isConditionalMediationAvailable() : false`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conditional mediation available: %v", conditional)
	if !conditional {
		d.do("use the passkey", chromedp.Click(chromedp.ID("passkey")))
	}
	d.waitHeading("Allow access?")
	if typed, err := chromedp.Run(d.ctx, chromedp.Evaluate[int](`document.querySelectorAll('input[type=password]').length`)); err != nil || typed != 0 {
		t.Errorf("the consent page after a passkey sign-in has %d password fields (%v)", typed, err)
	}
	d.do("allow", chromedp.Click(chromedp.CSS(`button[value=accept]`)), chromedp.WaitVisible(chromedp.ID("rp")))

	provider, err := oidc.NewProvider(ctx, env.base)
	if err != nil {
		t.Fatal(err)
	}
	// idTokenOf exchanges the code the client's redirect URI got for state and returns the ID
	// token's nonce, amr and acr, verified with go-oidc.
	idTokenOf := func(state, verifier string) (nonce string, amr []string, acr string) {
		t.Helper()
		q, ok := env.rp.hit("/cb")
		if !ok || q.Get("code") == "" || q.Get("state") != state {
			t.Fatalf("the client's redirect URI got %v (%v), want state %s; the browser is at %s", q, ok, state, d.location())
		}
		tok, err := env.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		raw, _ := tok.Extra("id_token").(string)
		idToken, err := provider.Verifier(&oidc.Config{ClientID: env.client.ID}).Verify(ctx, raw)
		if err != nil {
			t.Fatalf("ID token: %v", err)
		}
		var claims struct {
			AMR []string `json:"amr"`
			ACR string   `json:"acr"`
		}
		if err := idToken.Claims(&claims); err != nil {
			t.Fatal(err)
		}
		return idToken.Nonce, claims.AMR, claims.ACR
	}
	nonce, amr, acr := idTokenOf("state-passkey-0001", verifier)
	if nonce != "nonce-passkey-0123456789" || !slices.Contains(amr, "hwk") || !slices.Contains(amr, "mfa") ||
		slices.Contains(amr, "pwd") || acr != "urn:gatehouse:mfa" {
		t.Errorf("ID token: nonce %q, amr %v, acr %q; want amr with hwk and mfa and no pwd, acr urn:gatehouse:mfa", nonce, amr, acr)
	}

	// From here on the browser offers no conditional UI (isConditionalMediationAvailable says
	// false before the pages' scripts run), so that the passkey is used only through buttons.
	if _, err := chromedp.Call(d.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `if (window.PublicKeyCredential) Object.defineProperty(PublicKeyCredential, 'isConditionalMediationAvailable', {value: () => Promise.resolve(false)});`}); err != nil {
		t.Fatal(err)
	}
	// toClient waits until the browser reaches the client's redirect URI, allowing access if
	// the consent page asks.
	toClient := func(name string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.HasPrefix(d.location(), env.rp.url) {
			if h, _ := chromedp.Run(d.ctx, chromedp.Evaluate[string](`(document.querySelector('h1') || {}).textContent || ''`)); h == "Allow access?" {
				d.do(name+": allow", chromedp.Click(chromedp.CSS(`button[value=accept]`)))
			}
			if time.Now().After(deadline) {
				body, _ := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
				t.Fatalf("%s: the browser stays at %s:\n%s", name, d.location(), body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Grace's only second factor is her passkey. A password sign-in on a request that asks for
	// a second factor goes to the second step, which offers the passkey and no code form; the
	// passkey completes it: amr pwd, hwk, mfa.
	if _, err := chromedp.Call(d.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	verifier2 := oauth2.GenerateVerifier()
	d.do("password then passkey", chromedp.Navigate(env.oauth.AuthCodeURL("state-passkey-0002", oauth2.S256ChallengeOption(verifier2),
		oidc.Nonce("nonce-passkey-0223456789"), oauth2.SetAuthURLParam("acr_values", "urn:gatehouse:mfa"))))
	d.waitHeading("Sign in")
	d.do("password", chromedp.SendKeys(chromedp.ID("email"), "grace@example.com"), chromedp.SendKeys(chromedp.ID("password"), "grace-password-1"),
		chromedp.Click(chromedp.CSS(`form:has(#password) button[type=submit]`)))
	d.waitHeading("Two-factor authentication")
	d.waitText("Confirm that it is you with one of your passkeys.")
	if n, err := chromedp.Run(d.ctx, chromedp.Evaluate[int](`document.querySelectorAll('input[name=code], form[action*="verify-totp"], form[action*="verify-backup-code"]').length`)); err != nil || n != 0 {
		t.Errorf("the second step of a user without TOTP has %d code fields or forms (%v)", n, err)
	}
	check("second step (passkey)")
	d.do("use a passkey", chromedp.Click(chromedp.ID("passkey")))
	toClient("second step with a passkey")
	if _, amr, acr := idTokenOf("state-passkey-0002", verifier2); !slices.Equal(amr, []string{"pwd", "hwk", "mfa"}) || acr != "urn:gatehouse:mfa" {
		t.Errorf("ID token after password and passkey: amr %v, acr %q; want [pwd hwk mfa], urn:gatehouse:mfa", amr, acr)
	}

	// The sign-in page's "Sign in with a passkey" button, clicked: a session (get-session
	// names Grace) whose ID token has amr hwk and mfa.
	if _, err := chromedp.Call(d.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	verifier3 := oauth2.GenerateVerifier()
	d.do("the passkey button", chromedp.Navigate(env.oauth.AuthCodeURL("state-passkey-0003", oauth2.S256ChallengeOption(verifier3))))
	d.waitHeading("Sign in")
	d.do("click Sign in with a passkey", chromedp.WaitVisible(chromedp.ID("passkey")), chromedp.Click(chromedp.ID("passkey")))
	toClient("the passkey button")
	if _, amr, _ := idTokenOf("state-passkey-0003", verifier3); !slices.Equal(amr, []string{"hwk", "mfa"}) {
		t.Errorf("ID token after the passkey button: amr %v, want [hwk mfa]", amr)
	}
	d.do("back to the provider", chromedp.Navigate(env.base+"/api/auth/account"))
	email, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`fetch('/api/auth/get-session').then(r => r.json()).then(s => s && s.user ? s.user.email : '')`, chromedp.EvalAwaitPromise))
	if err != nil || email != "grace@example.com" {
		t.Errorf("get-session after the passkey button: user %q (%v), want grace@example.com", email, err)
	}
}
