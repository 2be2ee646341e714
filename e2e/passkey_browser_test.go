package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
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
// gets a code whose ID token (verified with go-oidc) has amr hwk and mfa. The app runs on
// localhost: WebAuthn takes no IP address as a relying party id. The pages are checked with
// axe-core at 390 and 1280 px.
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

	q, ok := env.rp.hit("/cb")
	if !ok || q.Get("code") == "" || q.Get("state") != "state-passkey-0001" {
		t.Fatalf("the client's redirect URI got %v (%v); the browser is at %s", q, ok, d.location())
	}
	tok, err := env.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	provider, err := oidc.NewProvider(ctx, env.base)
	if err != nil {
		t.Fatal(err)
	}
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
	if idToken.Nonce != "nonce-passkey-0123456789" || !slices.Contains(claims.AMR, "hwk") || !slices.Contains(claims.AMR, "mfa") ||
		slices.Contains(claims.AMR, "pwd") || claims.ACR != "urn:gatehouse:mfa" {
		t.Errorf("ID token: nonce %q, amr %v, acr %q; want amr with hwk and mfa and no pwd, acr urn:gatehouse:mfa", idToken.Nonce, claims.AMR, claims.ACR)
	}
}
