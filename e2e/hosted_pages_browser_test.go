package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/oauth"
)

// TestHostedPagesAccessible opens every hosted page — sign-in, sign-up, forgot password, check
// your inbox (both), the reset form and its result, the verification results, each state of
// the accept-invitation page and its result, consent and the error page — in headless
// Chromium at 390 px and 1280 px, reaching them as a person would (links, forms, mailed
// links). On each, axe-core (from node_modules) finds no serious or critical violation, and at
// 390 px nothing scrolls sideways.
func TestHostedPagesAccessible(t *testing.T) {
	browser := findBrowser(t)
	axe := axeSource(t)
	env := startAccountsEnv(t)
	env.verifiedUser(t, "Grace Hopper", "grace@example.com", "grace-password-1")
	env.verifiedUser(t, "Eve Example", "eve@example.com", "eve-password-1")
	inv := env.invite(t, "grace@example.com", time.Now().Add(48*time.Hour))
	expired := env.invite(t, "hal@example.com", time.Now().Add(-time.Hour))
	authURL := env.oauth.AuthCodeURL("state-axe-000001", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))

	d := pageDriver{t: t, ctx: newOfflineBrowser(t, browser, 4*time.Minute), shots: "axe-"}
	checked := 0
	check := func(name string) {
		t.Helper()
		checked++
		for _, width := range []int64{390, 1280} {
			d.do(name+": viewport", chromedp.EmulateViewport(width, 844))
			found, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](`typeof axe !== 'undefined'`))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !found {
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
				sw, err := chromedp.Run(d.ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
				if err != nil || sw > 390 {
					t.Errorf("%s: scrollWidth %d at 390 px (%v)", name, sw, err)
				}
			}
			screenshot(d.ctx, t, "axe-"+strings.ReplaceAll(name, " ", "-")+"-"+map[int64]string{390: "390", 1280: "1280"}[width]+".png")
		}
	}

	// Signed out: sign-in, sign-up, forgot password and their follow-ups.
	d.do("sign-in", chromedp.Navigate(authURL))
	d.waitHeading("Sign in")
	check("sign-in")
	d.do("to sign-up", chromedp.Click(chromedp.ID("sign-up")))
	d.waitHeading("Create your account")
	check("sign-up")
	d.do("sign up", chromedp.SendKeys(chromedp.ID("name"), "Hal Newcomer"), chromedp.SendKeys(chromedp.ID("email"), "hal@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "hal-password-1"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Check your inbox")
	check("check inbox (sign-up)")
	verify, err := url.Parse(env.link(t, "hal@example.com", 1, "/api/auth/verify-email?"))
	if err != nil {
		t.Fatal(err)
	}
	d.do("bad verification link", chromedp.Navigate(env.base+"/api/auth/verify-email?token=not-a-token"))
	d.waitHeading("This link does not work")
	check("verify failed")
	q := verify.Query()
	q.Del("callbackURL") // the hosted result page rather than the authorization request
	verify.RawQuery = q.Encode()
	d.do("verification link", chromedp.Navigate(verify.String()))
	d.waitHeading("Email address verified")
	check("verify done")

	d.do("sign-in again", chromedp.Navigate(authURL))
	d.waitHeading("Sign in")
	d.do("to forgot password", chromedp.Click(chromedp.ID("forgot-password")))
	d.waitHeading("Reset your password")
	check("forgot password")
	d.do("ask for a reset", chromedp.SendKeys(chromedp.ID("email"), "grace@example.com"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Check your inbox")
	check("check inbox (reset)")
	d.do("reset link", chromedp.Navigate(env.link(t, "grace@example.com", 1, "/api/auth/reset-password/")))
	d.waitHeading("Choose a new password")
	check("reset form")
	d.do("reset", chromedp.SendKeys(chromedp.ID("newPassword"), "grace-password-2"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Password changed")
	check("reset done")

	d.do("error page", chromedp.Navigate(env.base+oauth.AuthorizePath+"?client_id=cli_unknown&response_type=code"))
	d.waitHeading("Something went wrong")
	check("error")

	// The invitation pages: unknown, expired, signed out, another account, the recipient.
	d.do("unknown invitation", chromedp.Navigate(env.base+"/accept-invitation/inv_unknown"))
	d.waitHeading("Invitation not found")
	check("invitation unknown")
	d.do("expired invitation", chromedp.Navigate(env.base+"/accept-invitation/"+expired.ID))
	d.waitHeading("This invitation can't be used")
	check("invitation expired")
	invitation := env.base + "/accept-invitation/" + inv.ID
	d.do("invitation", chromedp.Navigate(invitation))
	d.waitHeading("Join Navy Labs")
	check("invitation signed out")
	d.do("sign in as eve", chromedp.SetValue(chromedp.ID("email"), "eve@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "eve-password-1"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitText("You are signed in as eve@example.com, but this invitation is for grace@example.com.")
	check("invitation other account")
	d.do("switch", chromedp.Click(chromedp.CSS(`button[value=switch-account]`)))
	d.waitText("Sign in with the invited address to accept.")
	d.do("sign in as grace", chromedp.SendKeys(chromedp.ID("password"), "grace-password-2"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitText("You have been invited to join Navy Labs as developer.")
	check("invitation recipient")
	d.do("accept", chromedp.Click(chromedp.CSS(`button[value=accept]`)))
	d.waitHeading("Welcome to Navy Labs")
	check("invitation accepted")

	// Signed in: consent.
	d.do("consent", chromedp.Navigate(authURL))
	d.waitHeading("Allow access?")
	check("consent")
	if checked != 17 {
		t.Errorf("%d pages checked", checked)
	}
}

// TestAccountWalkInBrowser is the walk of issue 22 with email verification required: from an
// OAuth authorization request (x/oauth2, PKCE S256) the browser goes sign-in → "create an
// account" → sign-up → "check your inbox" → the verification link read out of the message the
// test's SMTP server received → back at sign-in, a wrong password → "forgot password" → the
// reset link from the mail → a new password → sign-in with it → consent → the client's
// redirect URI with a code, which the test exchanges; go-oidc verifies the ID token, and userinfo
// names the verified address.
func TestAccountWalkInBrowser(t *testing.T) {
	browser := findBrowser(t)
	env := startAccountsEnv(t)
	ctx := context.Background()
	verifier := oauth2.GenerateVerifier()
	authURL := env.oauth.AuthCodeURL("state-walk-000001", oauth2.S256ChallengeOption(verifier), oidc.Nonce("nonce-walk-0123456789"))
	d := pageDriver{t: t, ctx: newOfflineBrowser(t, browser, 3*time.Minute), shots: "walk-"}
	const email = "ada@example.com"

	d.do("authorize", chromedp.EmulateViewport(390, 844), chromedp.Navigate(authURL))
	d.waitHeading("Sign in")
	d.do("create an account", chromedp.Click(chromedp.ID("sign-up")))
	d.waitHeading("Create your account")
	d.do("sign up", chromedp.SendKeys(chromedp.ID("name"), "Ada Lovelace"), chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), "first-password-1"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Check your inbox")

	verify := env.link(t, email, 1, "/api/auth/verify-email?")
	if u, _ := url.Parse(verify); !strings.HasPrefix(u.Query().Get("callbackURL"), oauth.AuthorizePath+"?") {
		t.Fatalf("the verification link does not lead back to the authorization request: %s", verify)
	}
	d.do("verification link", chromedp.Navigate(verify))
	d.waitHeading("Sign in") // verified, back at the authorization request, signed out

	d.do("wrong password", chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), "not-my-password"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitText("The email or password is not correct.")
	d.do("forgot password", chromedp.Click(chromedp.ID("forgot-password")))
	d.waitHeading("Reset your password")
	if typed, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.getElementById('email').value`)); err != nil || typed != email {
		t.Errorf("the forgot-password page has %q (%v), want the email typed at sign-in", typed, err)
	}
	d.do("ask for a reset", chromedp.SetValue(chromedp.ID("email"), email), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Check your inbox")
	d.do("reset link", chromedp.Navigate(env.link(t, email, 2, "/api/auth/reset-password/")))
	d.waitHeading("Choose a new password")
	d.do("new password", chromedp.SendKeys(chromedp.ID("newPassword"), "second-password-2"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Password changed")
	d.do("continue", chromedp.Click(chromedp.ID("continue")))
	d.waitHeading("Sign in")
	d.do("sign in", chromedp.SetValue(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), "second-password-2"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Allow access?")
	d.do("allow", chromedp.Click(chromedp.CSS(`button[value=accept]`)), chromedp.WaitVisible(chromedp.ID("rp")))

	q, ok := env.rp.hit("/cb")
	if !ok || q.Get("code") == "" || q.Get("state") != "state-walk-000001" || q.Get("iss") != env.base {
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
	info, err := provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		t.Fatalf("userinfo: %v", err)
	}
	if idToken.Nonce != "nonce-walk-0123456789" || info.Subject != idToken.Subject || info.Email != email || !info.EmailVerified {
		t.Errorf("ID token: nonce %q, subject %q; userinfo %+v", idToken.Nonce, idToken.Subject, info)
	}
}
