package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/server"
)

// passkeyClientPage loads better-auth's client with the passkey plugin (npm
// @better-auth/passkey, the version of better-auth) as native ES modules through the import
// map IMPORTMAP, and exposes it as window.client. nanostores reads process.env.NODE_ENV, which
// bundlers replace at build time; the first script defines it as a bundler would.
const passkeyClientPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>passkey client</title>
<script>globalThis.process = { env: { NODE_ENV: "production" } };</script>
<script type="importmap">IMPORTMAP</script>
<script type="module">
import { createAuthClient } from "better-auth/client";
import { passkeyClient } from "@better-auth/passkey/client";
window.client = createAuthClient({ baseURL: location.origin, plugins: [passkeyClient()] });
window.ready = true;
</script></head><body><p>better-auth passkey client</p></body></html>`

// TestPasskeyClientInBrowser drives Gatehouse's passkey routes with better-auth's own passkey
// client (npm @better-auth/passkey with createAuthClient). Its client calls
// navigator.credentials (through @simplewebauthn/browser), which Node does not have, so it runs
// in Chromium with a DevTools virtual authenticator, loaded from node_modules as ES modules
// through an import map (e2e/js/importmap.mjs) on a page of the app's own origin (WebAuthn
// checks the origin). Signed in with a password, the client registers a passkey (addPasskey)
// and lists it; signed out, signIn.passkey signs in (getSession names the user; amr hwk, mfa).
// A password sign-in asking for a second factor (acr_values=urn:gatehouse:mfa) answers
// twoFactorRedirect with twoFactorMethods ["passkey"], and signIn.passkey completes it (amr pwd,
// hwk, mfa).
func TestPasskeyClientInBrowser(t *testing.T) {
	browser := findBrowser(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	node := findNode(t, root)
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@better-auth", "passkey", "package.json")); err != nil {
		t.Fatalf("node_modules/@better-auth/passkey is missing (npm ci): %v", err)
	}
	cmd := exec.Command(node, "--experimental-import-meta-resolve", "--conditions=browser", filepath.Join("e2e", "js", "importmap.mjs"),
		"better-auth/client", "@better-auth/passkey/client")
	cmd.Dir = root
	importMap, err := cmd.Output()
	if err != nil {
		t.Fatalf("importmap.mjs: %v", err)
	}

	env := startAccountsEnv(t, func(c *server.Config) {
		c.BaseURL = strings.Replace(c.BaseURL, "http://127.0.0.1:", "http://localhost:", 1)
	})
	env.extra.Handle("/node_modules/", http.StripPrefix("/node_modules/", http.FileServer(http.Dir(filepath.Join(root, "node_modules")))))
	env.extra.HandleFunc("/e2e/passkey-client", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(passkeyClientPage, "IMPORTMAP", string(importMap), 1)))
	})
	ada := env.verifiedUser(t, "Ada Lovelace", "ada@example.com", "ada-password-1")

	d := pageDriver{t: t, ctx: newOfflineBrowserResolving(t, browser, 3*time.Minute, "127.0.0.1", "localhost"), shots: "passkey-client-"}
	if _, err := chromedp.Call(d.ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	if _, err := chromedp.Call(d.ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{Protocol: webauthn.AuthenticatorProtocolCtap2,
			Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true}}); err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	d.do("client page", chromedp.Navigate(env.base+"/e2e/passkey-client"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		ready, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](`window.ready === true`))
		if err == nil && ready {
			break
		}
		if time.Now().After(deadline) {
			// The same again, to say why.
			why, _ := chromedp.Run(d.ctx, chromedp.Evaluate[string](`Promise.all([import("better-auth/client"), import("@better-auth/passkey/client")]).then(([a, p]) => { a.createAuthClient({ baseURL: location.origin, plugins: [p.passkeyClient()] }); return "created" }).catch(e => String(e) + " " + e.stack)`, chromedp.EvalAwaitPromise))
			t.Fatalf("the client did not load (%v): %s", err, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// call runs expr (a promise of a better-auth result {data, error}) in the page and returns
	// its data, failing on an error.
	type result struct {
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"error"`
	}
	call := func(name, expr string, into any) {
		t.Helper()
		raw, err := chromedp.Run(d.ctx, chromedp.Evaluate[string](`(`+expr+`).then(r => JSON.stringify(r))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var r result
		if err := json.Unmarshal([]byte(raw), &r); err != nil || r.Error != nil || string(r.Data) == "null" {
			t.Fatalf("%s: %s", name, raw)
		}
		if into != nil {
			if err := json.Unmarshal(r.Data, into); err != nil {
				t.Fatalf("%s: %v in %s", name, err, raw)
			}
		}
	}
	type sessionUser struct {
		User struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"user"`
	}
	// latestAMR is the amr of Ada's newest session.
	latestAMR := func() []string {
		t.Helper()
		sessions, err := env.store.ListSessions(context.Background(), ada.ID)
		if err != nil || len(sessions) == 0 {
			t.Fatalf("sessions: %v (%v)", sessions, err)
		}
		newest := sessions[0]
		for _, s := range sessions {
			if s.CreatedAt.After(newest.CreatedAt) {
				newest = s
			}
		}
		return newest.AMR
	}

	var signedIn sessionUser
	call("signIn.email", `client.signIn.email({email: "ada@example.com", password: "ada-password-1"})`, &signedIn)
	if signedIn.User.ID != ada.ID {
		t.Fatalf("signed in as %q", signedIn.User.ID)
	}
	var added struct {
		Name   string `json:"name"`
		UserID string `json:"userId"`
	}
	call("passkey.addPasskey", `client.passkey.addPasskey({name: "Laptop"})`, &added)
	if added.Name != "Laptop" || added.UserID != ada.ID {
		t.Fatalf("addPasskey = %+v", added)
	}
	var listed []struct {
		Name string `json:"name"`
	}
	call("passkey.listUserPasskeys", `client.passkey.listUserPasskeys()`, &listed)
	if len(listed) != 1 || listed[0].Name != "Laptop" {
		t.Fatalf("listUserPasskeys = %+v", listed)
	}

	call("signOut", `client.signOut()`, nil)
	call("signIn.passkey", `client.signIn.passkey()`, &signedIn)
	var session sessionUser
	call("getSession", `client.getSession()`, &session)
	if signedIn.User.ID != ada.ID || session.User.Email != "ada@example.com" {
		t.Fatalf("after signIn.passkey: %+v, getSession %+v", signedIn, session)
	}
	if amr := latestAMR(); !slices.Equal(amr, []string{"hwk", "mfa"}) {
		t.Errorf("passkey session amr %v, want [hwk mfa]", amr)
	}

	// The passkey as the second step of a password sign-in that asks for one.
	call("signOut", `client.signOut()`, nil)
	var pending struct {
		TwoFactorRedirect bool     `json:"twoFactorRedirect"`
		TwoFactorMethods  []string `json:"twoFactorMethods"`
	}
	call("signIn.email asking for a second factor", `client.signIn.email({email: "ada@example.com", password: "ada-password-1",
		callbackURL: "/api/auth/oauth2/authorize?acr_values=urn%3Agatehouse%3Amfa"})`, &pending)
	if !pending.TwoFactorRedirect || !slices.Equal(pending.TwoFactorMethods, []string{"passkey"}) {
		t.Fatalf("sign-in answer %+v, want twoFactorRedirect with [passkey]", pending)
	}
	call("signIn.passkey as the second step", `client.signIn.passkey()`, &signedIn)
	call("getSession", `client.getSession()`, &session)
	if session.User.ID != ada.ID {
		t.Fatalf("getSession after the second step: %+v", session)
	}
	if amr := latestAMR(); !slices.Equal(amr, []string{"pwd", "hwk", "mfa"}) {
		t.Errorf("second-step session amr %v, want [pwd hwk mfa]", amr)
	}
}
