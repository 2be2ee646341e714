package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// relyingParty is a loopback stand-in for a native app's redirect URIs: it records the query
// of every request it gets.
type relyingParty struct {
	url  string
	mu   sync.Mutex
	hits map[string]url.Values
}

func startRelyingParty(t *testing.T) *relyingParty {
	rp := &relyingParty{hits: map[string]url.Values{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.mu.Lock()
		rp.hits[r.URL.Path] = r.URL.Query()
		rp.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><html lang="en"><title>RP</title><p id="rp">relying party `+r.URL.Path+`</p></html>`)
	}))
	t.Cleanup(srv.Close)
	rp.url = srv.URL
	return rp
}

func (rp *relyingParty) hit(path string) (url.Values, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	q, ok := rp.hits[path]
	return q, ok
}

// TestOAuthPagesInBrowser signs in, consents and signs out through the provider's pages in
// headless Chromium (reaching nothing but 127.0.0.1), with a native client whose loopback
// redirect URI is a local relying party; the code it receives is exchanged with x/oauth2.
// Screenshots of the sign-in, consent and logout pages are kept as test artefacts.
func TestOAuthPagesInBrowser(t *testing.T) {
	browser := findBrowser(t)
	ctx := context.Background()
	rp := startRelyingParty(t)

	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	st := storetest.Backends(t)[0].Open(t)
	app, err := newServer(server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32)},
		st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	// A user with a password, and a native client (public: it always asks for consent).
	const email, password = "grace@example.com", "correct-horse-battery-staple"
	hash, err := identity.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	user := store.User{Name: "Grace Hopper", Email: email}
	client := store.OIDCClient{Name: "Compiler Desktop", Type: store.OIDCClientNative,
		RedirectURIs: []string{rp.url + "/cb"}, PostLogoutRedirectURIs: []string{rp.url + "/bye"},
		GrantTypes: []string{"authorization_code", "refresh_token"}, Scopes: []string{"openid", "profile", "email"}}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		org := store.Organization{Name: "Navy", Slug: "navy"}
		p := store.Project{Name: "Compilers", Slug: "compilers"}
		if err := storetest.CreateOwnedProject(ctx, tx, &user, hash, &org, &p); err != nil {
			return err
		}
		client.ProjectID = p.ID
		return tx.CreateOIDCClient(ctx, &client)
	})
	if err != nil {
		t.Fatal(err)
	}

	cfg := oauth2.Config{ClientID: client.ID, RedirectURL: rp.url + "/cb", Scopes: []string{"openid", "profile", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: base + oauth.AuthorizePath, TokenURL: base + oauth.TokenPath, AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL("state-browser-0001", oauth2.S256ChallengeOption(verifier))

	bctx := newOfflineBrowser(t, browser, 90*time.Second)
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatalf("start browser %s: %v", browser, err)
	}
	steps, cancel := context.WithTimeout(bctx, 75*time.Second)
	defer cancel()
	checkCSP := func(name string) {
		t.Helper()
		violations, err := chromedp.Run(steps, chromedp.Evaluate[[]cspViolation](`window.__cspViolations || []`))
		if err != nil {
			t.Errorf("%s: read CSP violations: %v", name, err)
		}
		for _, v := range violations {
			t.Errorf("%s: CSP violation: %s blocked %q (%s)", name, v.Directive, v.Blocked, v.Source)
		}
	}

	// The sign-in page, on a phone-sized viewport.
	err = chromedp.Do(steps,
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(authURL),
		chromedp.WaitVisible(chromedp.ID("email")),
	)
	screenshot(bctx, t, "oauth-signin.png")
	if err != nil {
		t.Fatalf("sign-in page: %v", err)
	}
	checkCSP("sign-in page")
	overflow, err := chromedp.Run(steps, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil || overflow {
		t.Errorf("the sign-in page scrolls sideways on a phone (%v)", err)
	}

	// Sign in: the form posts to /api/auth/sign-in/email, which answers 303 back to the
	// authorization request, which sends the browser to the consent page.
	err = chromedp.Do(steps,
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[value=accept]`)),
	)
	screenshot(bctx, t, "oauth-consent.png")
	if err != nil {
		t.Fatalf("consent page: %v", err)
	}
	checkCSP("consent page")
	consentText, err := chromedp.Run(steps, chromedp.Text(chromedp.CSS(`main`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Compiler Desktop", "See your email address", "See your name and profile picture"} {
		if !strings.Contains(consentText, want) {
			t.Errorf("the consent page lacks %q: %q", want, consentText)
		}
	}

	// Allow: the browser lands on the relying party with the code, state and iss.
	err = chromedp.Do(steps,
		chromedp.Click(chromedp.CSS(`button[value=accept]`)),
		chromedp.WaitVisible(chromedp.ID("rp")),
	)
	if err != nil {
		t.Fatalf("redirect to the relying party: %v", err)
	}
	q, ok := rp.hit("/cb")
	if !ok || q.Get("code") == "" || q.Get("state") != "state-browser-0001" || q.Get("iss") != base {
		t.Fatalf("the relying party got %v (%v)", q, ok)
	}
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if id, _ := tok.Extra("id_token").(string); id == "" {
		t.Error("no ID token")
	}

	// Logout without a hint: the confirmation page, then 303 to the registered URI.
	err = chromedp.Do(steps,
		chromedp.Navigate(base+oauth.EndSessionPath+"?"+url.Values{"client_id": {client.ID},
			"post_logout_redirect_uri": {rp.url + "/bye"}, "state": {"bye-1"}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`button[type=submit]`)),
	)
	screenshot(bctx, t, "oauth-logout.png")
	if err != nil {
		t.Fatalf("logout page: %v", err)
	}
	checkCSP("logout page")
	err = chromedp.Do(steps,
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("rp")),
	)
	if err != nil {
		t.Fatalf("logout redirect: %v", err)
	}
	if q, ok := rp.hit("/bye"); !ok || q.Get("state") != "bye-1" {
		t.Errorf("post-logout redirect got %v (%v)", q, ok)
	}
	// Signed out: the authorization request shows the sign-in page again.
	if err := chromedp.Do(steps, chromedp.Navigate(authURL), chromedp.WaitVisible(chromedp.ID("email"))); err != nil {
		t.Errorf("after logout: %v", err)
	}
}
