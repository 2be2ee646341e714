package e2e

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
)

// TestHostedPagesAccessible opens every hosted page — sign-in, sign-up, forgot password, check
// your inbox (both), the reset form and its result, the verification results, each state of
// the accept-invitation page and its result, consent, the logout confirmation, signed out and
// the error page — in headless Chromium at 390 px and 1280 px, reaching them as a person would
// (links, forms, mailed links). On each, axe-core (from node_modules) finds no serious or
// critical violation, and at 390 px nothing scrolls sideways. Then, with a brand logo served
// from another origin (GATEHOUSE_BRAND_LOGO_URL), the provider's pages and an account page
// show the logo: loaded (the CSP allows its origin), named by its alt text, at most 40 px high
// and inside the card.
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

	// Signing out: the confirmation, then the signed-out page.
	d.do("end session", chromedp.Navigate(env.base+oauth.EndSessionPath))
	d.waitHeading("Sign out?")
	check("logout")
	d.do("sign out", chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Signed out")
	check("signed out")
	if checked != 19 {
		t.Errorf("%d pages checked", checked)
	}

	// With a logo from another origin.
	logo := startLogoServer(t)
	branded := startAccountsEnv(t, func(c *server.Config) {
		c.Brand = mail.Brand{Name: "Acme Cloud", LogoURL: logo + "/brand/logo.png", Color: "#0a7d3b"}
	})
	branded.verifiedUser(t, "Grace Hopper", "grace@example.com", "grace-password-1")
	checkLogo := func(name string) {
		t.Helper()
		check(name)
		for _, width := range []int64{390, 1280} {
			d.do(name+": viewport", chromedp.EmulateViewport(width, 844))
			got, err := chromedp.Run(d.ctx, chromedp.Evaluate[logoFacts](logoFactsJS, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !got.Loaded || got.Alt != "Acme Cloud" || got.Height < 1 || got.Height > 40 || got.Right > got.CardRight {
				t.Errorf("%s at %d px: logo %+v; want it loaded, alt \"Acme Cloud\", at most 40 px high, inside the card", name, width, got)
			}
		}
	}
	brandedAuth := branded.oauth.AuthCodeURL("state-logo-000001", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	d.do("branded sign-in", chromedp.Navigate(brandedAuth))
	d.waitHeading("Sign in")
	checkLogo("logo sign-in")
	d.do("branded sign-up", chromedp.Click(chromedp.ID("sign-up")))
	d.waitHeading("Create your account")
	checkLogo("logo sign-up")
	d.do("branded sign-in again", chromedp.Navigate(brandedAuth))
	d.waitHeading("Sign in")
	d.do("branded sign in", chromedp.SendKeys(chromedp.ID("email"), "grace@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "grace-password-1"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Allow access?")
	checkLogo("logo consent")
	d.do("branded end session", chromedp.Navigate(branded.base+oauth.EndSessionPath))
	d.waitHeading("Sign out?")
	checkLogo("logo logout")
	d.do("branded sign out", chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Signed out")
	checkLogo("logo signed out")
}

// logoFacts is what the browser says of a page's logo: loaded, its alt text, its rendered
// height and right edge, and the right edge of the card's content box (CSS pixels).
type logoFacts struct {
	Loaded           bool
	Alt              string
	Height           float64
	Right, CardRight float64
}

// logoFactsJS measures the page's logo once it has loaded or failed.
const logoFactsJS = `(async () => {
	const img = document.querySelector('img.logo');
	if (!img) return {Loaded: false, Alt: '', Height: 0, Right: 0, CardRight: 0};
	try { await img.decode(); } catch (e) {}
	const main = document.querySelector('main'), r = img.getBoundingClientRect(), m = main.getBoundingClientRect();
	const pad = parseFloat(getComputedStyle(main).paddingRight);
	return {Loaded: img.complete && img.naturalWidth > 0, Alt: img.alt, Height: r.height, Right: r.right, CardRight: m.right - pad};
})()`

// startLogoServer serves a 480×120 PNG logo (a wide 2x logo) at /brand/logo.png on another
// origin than the app's, and returns that origin.
func startLogoServer(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 480, 120))
	for y := range 120 {
		for x := range 480 {
			c := color.RGBA{0x0a, 0x7d, 0x3b, 0xff}
			if (x/40+y/40)%2 == 0 {
				c = color.RGBA{0xff, 0xff, 0xff, 0xff}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/brand/logo.png" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(buf.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv.URL
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
