package server

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// wantHostedPage asserts a hosted page: status, HTML, the page headers (a CSP with a fresh
// nonce that the inline stylesheet carries, frame-ancestors 'none', X-Frame-Options DENY,
// no-store) and texts in the body.
func wantHostedPage(t *testing.T, name string, res response, status int, texts ...string) string {
	t.Helper()
	return wantHostedPageImages(t, name, res, status, "'self' data:", texts...)
}

// wantHostedPageImages is wantHostedPage with the CSP's img-src sources.
func wantHostedPageImages(t *testing.T, name string, res response, status int, imgSrc string, texts ...string) string {
	t.Helper()
	h := res.Header()
	body := res.Body.String()
	if res.Code != status || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: %d %s; want a %d page\n%s", name, res.Code, h.Get("Content-Type"), status, body)
	}
	m := regexp.MustCompile(`<style nonce="([A-Za-z0-9_-]{24})">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("%s: no nonced stylesheet:\n%s", name, body)
	}
	wantCSP := "default-src 'none'; style-src 'nonce-" + m[1] + "'; img-src " + imgSrc + "; base-uri 'none'; frame-ancestors 'none'"
	// A page with a script (the passkey ceremonies of sign-in and the account page) runs only
	// inline scripts carrying the page's nonce, and fetches only from this origin.
	if scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1); len(scripts) > 0 {
		for _, tag := range scripts {
			if tag != `<script nonce="`+m[1]+`">` {
				t.Errorf("%s: script tag %s, want only inline scripts with the page's nonce", name, tag)
			}
		}
		wantCSP += "; script-src 'nonce-" + m[1] + "'; connect-src 'self'"
	}
	if got := h.Get("Content-Security-Policy"); got != wantCSP {
		t.Errorf("%s: CSP %q, want %q", name, got, wantCSP)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: X-Frame-Options %q, Cache-Control %q", name, h.Get("X-Frame-Options"), h.Get("Cache-Control"))
	}
	for _, want := range append([]string{`<html lang="en">`, `name="viewport"`}, texts...) {
		if !strings.Contains(body, want) {
			t.Errorf("%s: the page lacks %q:\n%s", name, want, body)
		}
	}
	return body
}

// hrefOf returns the unescaped href of the link with id on page, "" when there is none.
func hrefOf(page, id string) string {
	m := regexp.MustCompile(`href="([^"]*)" id="` + regexp.QuoteMeta(id) + `"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// hiddenOf returns the unescaped value of the hidden input name on page, "" when none.
func hiddenOf(page, name string) string {
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// browserForm is a hosted page's form post: a form body, Accept as a browser sends it, and the
// page's Origin.
func browserForm(path string, values url.Values) request {
	r := form(path, values)
	r.headers["Accept"] = "text/html,application/xhtml+xml"
	r.headers["Sec-Fetch-Site"] = "same-origin"
	return r
}

func getPage(path string) request {
	return request{method: http.MethodGet, path: path, headers: map[string]string{"Accept": "text/html"}}
}

// TestHostedPagesHeaders: every hosted page keeps the sign-in page's headers: its own CSP
// nonce per response, no framing, no caching.
func TestHostedPagesHeaders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		a.verifiedUser(t, "Ada", "ada@example.com")
		a.requestReset(t, "ada@example.com", "")
		reset := a.link(t, "ada@example.com", 1, "/api/auth/reset-password/")
		nonces := map[string]bool{}
		for _, c := range []struct {
			name   string
			path   string
			status int
			text   string
		}{
			{"sign-up", "/api/auth/sign-up", 200, "Create your account"},
			{"forgot password", "/api/auth/forgot-password", 200, "Reset your password"},
			{"check inbox", "/api/auth/check-inbox", 200, "Check your inbox"},
			{"check inbox (reset)", "/api/auth/check-inbox?for=reset-password", 200, "a link to choose a new password"},
			{"reset form", reset, 200, "Choose a new password"},
			{"verify result", "/api/auth/verify-email?token=no-such-token", 401, "This link does not work"},
			{"unknown invitation", "/accept-invitation/inv_nosuchinvitation", 404, "Invitation not found"},
		} {
			body := wantHostedPage(t, c.name, a.do(getPage(c.path)), c.status, c.text)
			nonce := regexp.MustCompile(`<style nonce="([^"]+)">`).FindStringSubmatch(body)[1]
			if nonces[nonce] {
				t.Errorf("%s: nonce %s seen before", c.name, nonce)
			}
			nonces[nonce] = true
		}
	})
}

// TestHostedSignUp: the sign-up page carries its callbackURL into the form; a browser's sign-up
// goes on to "check your inbox" while verification is required (a taken address too, as a new
// one), the mailed link leads back to the callbackURL; without the requirement the browser is
// signed in and goes to the callbackURL; a refusal goes back to the page, which explains it.
func TestHostedSignUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		const cb = "/api/auth/oauth2/authorize?client_id=cli_x&state=s1"
		cfg := testConfig()
		cfg.RequireEmailVerification = true
		a := newMailApp(t, b, cfg)
		page := wantHostedPage(t, "sign-up", a.do(getPage("/api/auth/sign-up?callbackURL="+url.QueryEscape(cb)+"&email=grace%40example.com")), 200,
			`<form method="post" action="/api/auth/sign-up/email">`, `value="grace@example.com"`)
		if hiddenOf(page, "callbackURL") != cb || hrefOf(page, "sign-in") != cb {
			t.Errorf("callbackURL %q, sign-in link %q; want %q", hiddenOf(page, "callbackURL"), hrefOf(page, "sign-in"), cb)
		}
		signUp := url.Values{"name": {"Grace"}, "email": {"grace@example.com"}, "password": {"grace-password-1"}, "callbackURL": {cb}}
		wantInbox := "/api/auth/check-inbox?callbackURL=%2Fapi%2Fauth%2Foauth2%2Fauthorize%3Fclient_id%3Dcli_x%26state%3Ds1&for=verify-email"
		for i := range 2 { // the second time the address is taken: the same answer
			res := a.do(browserForm("/api/auth/sign-up/email", signUp))
			if res.Code != http.StatusSeeOther || res.Header().Get("Location") != wantInbox || len(res.Result().Cookies()) != 0 {
				t.Fatalf("sign-up %d: %d to %q, cookies %v; want 303 to %q without a cookie", i, res.Code, res.Header().Get("Location"), res.Result().Cookies(), wantInbox)
			}
		}
		inbox := wantHostedPage(t, "check inbox", a.do(getPage(wantInbox)), 200, "Check your inbox", "Back to sign in")
		if hrefOf(inbox, "continue") != cb {
			t.Errorf("check inbox links to %q, want %q", hrefOf(inbox, "continue"), cb)
		}
		verify := a.link(t, "grace@example.com", 1, "/api/auth/verify-email?")
		res := a.do(getPage(verify))
		if res.Code != http.StatusFound || res.Header().Get("Location") != cb {
			t.Errorf("verification link: %d to %q, want 302 to %q", res.Code, res.Header().Get("Location"), cb)
		}

		// Without the requirement: signed in, on to the callbackURL; a taken address goes back
		// to the page with the code, the typed name and email (never the password).
		open := newMailApp(t, b, testConfig())
		res = open.do(browserForm("/api/auth/sign-up/email", signUp))
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != cb {
			t.Fatalf("sign-up: %d to %q, want 303 to %q", res.Code, res.Header().Get("Location"), cb)
		}
		res.sessionCookie(t, open.srv.sessionCookieName)
		res = open.do(browserForm("/api/auth/sign-up/email", signUp))
		back := "/api/auth/sign-up?callbackURL=%2Fapi%2Fauth%2Foauth2%2Fauthorize%3Fclient_id%3Dcli_x%26state%3Ds1&email=grace%40example.com&error=USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL&name=Grace"
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != back {
			t.Fatalf("taken address: %d to %q, want 303 to %q", res.Code, res.Header().Get("Location"), back)
		}
		wantHostedPage(t, "refused sign-up", open.do(getPage(back)), 200,
			`<p class="error" role="alert">An account with this email address already exists. Sign in, or reset its password if you have forgotten it.</p>`,
			`value="Grace"`, `value="grace@example.com"`)
		// A JSON client keeps better-auth's answers.
		open.signUp("Grace", "grace@example.com", "grace-password-1", "").wantProblem(t, 422, "http-4xx", "User already exists. Use another email.")
	})
}

// TestHostedSignUpModes: the sign-in page links to sign-up only while sign-up is open, and to
// "forgot password" (with the email it shows) always, both carrying its authorization request;
// the sign-up page itself
// says when sign-up is by invitation and shows no form when it is closed.
func TestHostedSignUpModes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		for _, mode := range []SignUpMode{SignUpOpen, SignUpInviteOnly, SignUpClosed} {
			t.Run(string(mode), func(t *testing.T) {
				cfg := testConfig()
				cfg.SignUp = mode
				app := newTestApp(t, st, cfg)
				owner, org := app.NewOrganization(t)
				project := app.NewProject(t, org.ID, "signup-"+string(mode))
				client, _ := app.CreateOIDCClient(t, owner, project.ID, apptest.WebClientBody, testBaseURL)
				authorize := strings.TrimPrefix(apptest.AuthorizeURL(testBaseURL, client.ID, "https://shop.example.com/cb",
					oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), "login_hint", "ada@example.com"), testBaseURL)
				signIn := wantHostedPage(t, "sign-in", app.do(getPage(authorize)), 200, "Sign in")
				callback := hiddenOf(signIn, "callbackURL")
				wantSignUp := ""
				if mode == SignUpOpen {
					wantSignUp = "/api/auth/sign-up?callbackURL=" + url.QueryEscape(callback)
				}
				if got := hrefOf(signIn, "sign-up"); got != wantSignUp {
					t.Errorf("sign-up link %q, want %q", got, wantSignUp)
				}
				if got, want := hrefOf(signIn, "forgot-password"), "/api/auth/forgot-password?callbackURL="+url.QueryEscape(callback)+"&email=ada%40example.com"; got != want {
					t.Errorf("forgot-password link %q, want %q", got, want)
				}
				page := app.do(getPage("/api/auth/sign-up"))
				switch mode {
				case SignUpOpen:
					wantHostedPage(t, "sign-up page", page, 200, `action="/api/auth/sign-up/email"`)
				case SignUpInviteOnly:
					wantHostedPage(t, "sign-up page", page, 200, `action="/api/auth/sign-up/email"`,
						"Sign-up is by invitation: use the email address your invitation was sent to.")
				case SignUpClosed:
					if body := wantHostedPage(t, "sign-up page", page, 200, "New accounts cannot be created here."); strings.Contains(body, "<form") {
						t.Errorf("closed sign-up shows a form:\n%s", body)
					}
				}
			})
		}
	})
}

// TestHostedPasswordReset: "forgot password" posts request-password-reset as a form and goes
// on to "check your inbox" whether or not the address exists; the link of a reset asked for
// within an authorization request opens the hosted form, which continues the request after.
func TestHostedPasswordReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		const cb = "/api/auth/oauth2/authorize?client_id=cli_x&state=s1"
		a := newMailApp(t, b, testConfig())
		a.verifiedUser(t, "Ada", "ada@example.com")
		page := wantHostedPage(t, "forgot password", a.do(getPage("/api/auth/forgot-password?callbackURL="+url.QueryEscape(cb))), 200,
			`<form method="post" action="/api/auth/request-password-reset">`)
		if hiddenOf(page, "redirectTo") != cb || hrefOf(page, "sign-in") != cb {
			t.Errorf("redirectTo %q, back link %q; want %q", hiddenOf(page, "redirectTo"), hrefOf(page, "sign-in"), cb)
		}
		want := "/api/auth/check-inbox?callbackURL=%2Fapi%2Fauth%2Foauth2%2Fauthorize%3Fclient_id%3Dcli_x%26state%3Ds1&for=reset-password"
		for _, email := range []string{"ada@example.com", "nobody@example.com"} {
			res := a.do(browserForm("/api/auth/request-password-reset", url.Values{"email": {email}, "redirectTo": {cb}}))
			if res.Code != http.StatusSeeOther || res.Header().Get("Location") != want || res.Body.Len() != 0 {
				t.Errorf("%s: %d to %q (%q); want 303 to %q", email, res.Code, res.Header().Get("Location"), res.Body, want)
			}
		}
		link := a.link(t, "ada@example.com", 1, "/api/auth/reset-password/")
		form := wantHostedPage(t, "reset form", a.do(getPage(link)), 200, `action="/api/auth/reset-password"`)
		if hiddenOf(form, "callbackURL") != cb || hiddenOf(form, "token") == "" {
			t.Fatalf("reset form callbackURL %q, token %q", hiddenOf(form, "callbackURL"), hiddenOf(form, "token"))
		}
		done := wantHostedPage(t, "reset done", a.do(browserForm("/api/auth/reset-password", url.Values{
			"token": {hiddenOf(form, "token")}, "newPassword": {"a-new-password-1"}, "callbackURL": {cb}})), 200,
			"Password changed", ">Continue to sign in</a>")
		if hrefOf(done, "continue") != cb {
			t.Errorf("continue link %q, want %q", hrefOf(done, "continue"), cb)
		}
		if in, _ := a.signIn(t, "ada@example.com", "a-new-password-1"); in.User.Email != "ada@example.com" {
			t.Errorf("sign-in with the new password: %+v", in)
		}
		// An invitation's page is a hosted continuation too.
		const invitation = "/accept-invitation/inv_01jd3m8a1b2c3d4e5f6g7h8j9k"
		a.requestReset(t, "ada@example.com", invitation)
		form = wantHostedPage(t, "reset form (invitation)", a.do(getPage(a.link(t, "ada@example.com", 2, "/api/auth/reset-password/"))), 200,
			`action="/api/auth/reset-password"`)
		if hiddenOf(form, "callbackURL") != invitation {
			t.Errorf("reset form callbackURL %q, want %q", hiddenOf(form, "callbackURL"), invitation)
		}
		// A product's redirectTo still gets the token (no hosted form).
		a.requestReset(t, "ada@example.com", "https://app.example.com/reset")
		res := a.do(getPage(a.link(t, "ada@example.com", 3, "/api/auth/reset-password/")))
		if loc := res.Header().Get("Location"); res.Code != http.StatusFound || !strings.HasPrefix(loc, "https://app.example.com/reset?token=") {
			t.Errorf("product link: %d to %q", res.Code, loc)
		}
	})
}

// TestHostedFormsRefuseCrossOrigin: every form a hosted page posts is refused from another
// origin, without an origin, and when the browser says it is cross-site; a refused post
// changes nothing.
func TestHostedFormsRefuseCrossOrigin(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		grace := w.newUser(t, "Grace", "grace@example.com")
		org := w.createOrg(t, ada, "acme")
		ctx := context.Background()
		// A real reset token of grace's, and her password hash, which a refused reset keeps.
		w.do(request{method: http.MethodPost, path: "/api/auth/request-password-reset", body: `{"email":"grace@example.com"}`})
		resetLink := w.mail.WaitFor(t, "grace@example.com", 20*time.Second).Link(t, testBaseURL+"/api/auth/reset-password/")
		inv := w.invite(t, org.ID, ada, "grace@example.com", RoleDeveloper)
		token := strings.TrimPrefix(resetLink, testBaseURL+"/api/auth/reset-password/")
		_, graceHash, err := w.store.UserByEmail(ctx, "grace@example.com")
		if err != nil {
			t.Fatal(err)
		}
		forms := []struct {
			name    string
			path    string
			values  url.Values
			as      *testUser
			changed func() bool
		}{
			{"sign-up", "/api/auth/sign-up/email", url.Values{"name": {"Eve"}, "email": {"eve@example.com"}, "password": {"eve-password-1"}}, nil,
				func() bool { _, _, err := w.store.UserByEmail(ctx, "eve@example.com"); return err == nil }},
			{"sign-in", "/api/auth/sign-in/email", url.Values{"email": {"ada@example.com"}, "password": {"password-ada@example.com"}, "callbackURL": {"/x"}}, nil,
				nil}, // the refused sign-in sets no cookie (below)
			{"forgot password", "/api/auth/request-password-reset", url.Values{"email": {"ada@example.com"}}, nil,
				func() bool { return len(w.mail.To("ada@example.com")) > 0 }},
			{"reset password", "/api/auth/reset-password", url.Values{"token": {token}, "newPassword": {"a-new-password-1"}}, nil,
				func() bool {
					_, h, err := w.store.UserByEmail(ctx, "grace@example.com")
					return err != nil || h != graceHash
				}},
			{"accept invitation", "/accept-invitation/" + inv.ID, url.Values{"decision": {"accept"}}, &grace,
				func() bool {
					i, err := w.store.Invitation(ctx, inv.ID)
					return err != nil || i.Status != store.InvitationPending
				}},
		}
		cases := []struct {
			name    string
			headers map[string]string
			title   string
		}{
			{"foreign Origin", map[string]string{"Origin": "https://evil.example"}, "Invalid origin"},
			{"no Origin or Referer", map[string]string{}, "Missing or null Origin"},
			{"cross-site", map[string]string{"Origin": testBaseURL, "Sec-Fetch-Site": "cross-site"}, "Cross-site navigation login blocked"},
		}
		for _, f := range forms {
			for _, c := range cases {
				r := request{method: http.MethodPost, path: f.path, body: f.values.Encode(), headers: map[string]string{
					"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}}
				if f.as != nil {
					r = f.as.as(r)
					delete(r.headers, "Origin")
				}
				for k, v := range c.headers {
					r.headers[k] = v
				}
				res := w.do(r)
				res.wantProblem(t, http.StatusForbidden, "http-403", c.title)
				for _, ck := range res.Result().Cookies() {
					t.Errorf("%s, %s: sets cookie %s", f.name, c.name, ck.Name)
				}
				if f.changed != nil && f.changed() {
					t.Errorf("%s, %s: the refused post changed something", f.name, c.name)
				}
			}
		}
		// The same posts from the page's origin work: a mail, then a membership.
		w.do(browserForm("/api/auth/request-password-reset", url.Values{"email": {"ada@example.com"}}))
		w.mail.WaitFor(t, "ada@example.com", 20*time.Second)
		res := w.do(grace.as(browserForm("/accept-invitation/"+inv.ID, url.Values{"decision": {"accept"}})))
		wantHostedPage(t, "accepted", res, 200, "You are now a member of Org acme as developer.")
		if n := len(w.mail.To("ada@example.com")); n != 1 {
			t.Errorf("%d mails to ada, want the one of the accepted post", n)
		}
	})
}

// TestHostedPagesBrand: the provider's pages and the account pages show the product's brand
// (GATEHOUSE_BRAND_NAME, GATEHOUSE_BRAND_COLOR) alike; without a logo, the name, no image and
// no logo style (TestHostedPagesLogo has one).
func TestHostedPagesBrand(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.Brand = mail.Brand{Name: "Acme Cloud", Color: "#0a7d3b"}
		app := newTestApp(t, b.Open(t), cfg)
		owner, org := app.NewOrganization(t)
		client, _ := app.CreateOIDCClient(t, owner, app.NewProject(t, org.ID, "brand").ID, apptest.WebClientBody, testBaseURL)
		authorize := strings.TrimPrefix(apptest.AuthorizeURL(testBaseURL, client.ID, "https://shop.example.com/cb",
			oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())), testBaseURL)
		for _, p := range []struct{ name, path, title string }{
			{"sign-in", authorize, "Sign in"},
			{"sign-up", "/api/auth/sign-up", "Create your account"},
			{"error", "/api/auth/oauth2/authorize?client_id=cli_unknown", "Error"},
		} {
			res := app.do(getPage(p.path))
			body := wantHostedPage(t, p.name, res, res.Code, "<title>"+p.title+" · Acme Cloud</title>", `<p class="brand">Acme Cloud</p>`,
				"border-top:6px solid #0a7d3b", "background:#0a7d3b")
			if strings.Contains(body, "<img") || strings.Contains(body, "logo") {
				t.Errorf("%s: no logo is configured, but the page has one:\n%s", p.name, body)
			}
		}
	})
}
