package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"golang.org/x/oauth2"
)

// TestTwoFactorPagesInBrowser: in Chromium, a signed-in user turns TOTP on through the hosted
// account page (reading the setup key off the page and computing the code with pquerna/otp),
// signs out, and signs in again through the provider's pages, where the second step asks for
// the code. Each page of the two-factor flow is checked with axe-core (no serious or critical
// violation) at 390 and 1280 px, without sideways scrolling at 390 px.
func TestTwoFactorPagesInBrowser(t *testing.T) {
	browser := findBrowser(t)
	axe := axeSource(t)
	env := startAccountsEnv(t)
	env.verifiedUser(t, "Grace Hopper", "grace@example.com", "grace-password-1")
	authURL := env.oauth.AuthCodeURL("state-2fa-0000001", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	d := pageDriver{t: t, ctx: newOfflineBrowser(t, browser, 3*time.Minute), shots: "2fa-"}
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
	code := func(at time.Time) string {
		t.Helper()
		secret, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.querySelector('.secret').textContent.replaceAll(' ', '')`))
		if err != nil {
			t.Fatal(err)
		}
		c, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	d.do("sign in", chromedp.Navigate(authURL))
	d.waitHeading("Sign in")
	d.do("password", chromedp.SendKeys(chromedp.ID("email"), "grace@example.com"), chromedp.SendKeys(chromedp.ID("password"), "grace-password-1"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Allow access?")

	d.do("account page", chromedp.Navigate(env.base+"/api/auth/account"))
	d.waitHeading("Your account")
	d.waitText("Two-factor authentication is off.")
	check("account (off)")
	d.do("set up", chromedp.SendKeys(chromedp.ID("password"), "grace-password-1"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitText("Set up your authenticator app")
	check("account (set up)")
	var secret string
	if s, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.querySelector('.secret').textContent`)); err != nil || len(strings.ReplaceAll(s, " ", "")) != 32 {
		t.Fatalf("setup key %q (%v)", s, err)
	} else {
		secret = s
	}
	d.do("confirm", chromedp.SendKeys(chromedp.ID("code"), code(time.Now())), chromedp.Click(chromedp.CSS(`form:has(#code) button[type=submit]`)))
	d.waitText("Two-factor authentication is on.")
	check("account (on)")

	// Signed out (the cookies cleared), the provider's sign-in asks for the second factor.
	if _, err := chromedp.Call(d.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	d.do("sign in again", chromedp.Navigate(authURL))
	d.waitHeading("Sign in")
	d.do("password again", chromedp.SendKeys(chromedp.ID("email"), "grace@example.com"), chromedp.SendKeys(chromedp.ID("password"), "grace-password-1"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Two-factor authentication")
	check("second step")
	d.do("wrong code", chromedp.SendKeys(chromedp.ID("code"), "000000"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitText("That code is not correct.")
	check("second step (wrong code)")
	d.do("backup form", chromedp.Click(chromedp.CSS(`a[href*="method=backup"]`)))
	d.waitText("Backup code")
	check("second step (backup code)")
	d.do("back to the app code", chromedp.Click(chromedp.CSS(`p.muted a`)))
	d.waitText("Code from your authenticator app")
	// The code of the next step: enrolment used this one.
	next, err := totp.GenerateCodeCustom(strings.ReplaceAll(secret, " ", ""), time.Now().Add(30*time.Second),
		totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	d.do("code", chromedp.SendKeys(chromedp.ID("code"), next), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	d.waitHeading("Allow access?")
}
