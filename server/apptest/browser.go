package apptest

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Browser is a user agent with a cookie jar that never follows redirects by itself, for an app
// served at Base.
type Browser struct {
	T      testing.TB
	Base   string
	Client *http.Client
}

// Page is an answer the browser received.
type Page struct {
	Status int
	Header http.Header
	Body   string
}

// Location is the page's Location header, parsed.
func (p Page) Location() *url.URL {
	u, _ := url.Parse(p.Header.Get("Location"))
	return u
}

// NewBrowser is a browser with an empty cookie jar for the app at base.
func NewBrowser(t testing.TB, base string) *Browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Browser{T: t, Base: base, Client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// Do sends req with the browser's cookies and reads the whole answer.
func (b *Browser) Do(req *http.Request) Page {
	b.T.Helper()
	res, err := b.Client.Do(req)
	if err != nil {
		b.T.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.T.Fatal(err)
	}
	return Page{Status: res.StatusCode, Header: res.Header, Body: string(body)}
}

// Get fetches raw (absolute, or a path on the server).
func (b *Browser) Get(raw string) Page {
	b.T.Helper()
	if strings.HasPrefix(raw, "/") {
		raw = b.Base + raw
	}
	req, err := http.NewRequest("GET", raw, nil)
	if err != nil {
		b.T.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	return b.Do(req)
}

// Post sends a browser form post with the given Origin ("" for none).
func (b *Browser) Post(path string, form url.Values, origin string) Page {
	b.T.Helper()
	req, err := http.NewRequest("POST", b.Base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.Do(req)
}

// SignIn signs the browser in through the sign-in form post.
func (b *Browser) SignIn(t testing.TB, email, password string) {
	t.Helper()
	res := b.Post("/api/auth/sign-in/email", url.Values{"email": {email}, "password": {password}, "callbackURL": {"/"}}, b.Base)
	if res.Status != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d %v %s", res.Status, res.Header, res.Body)
	}
}

// Hidden returns the value of the hidden input name on a page.
func (p Page) Hidden(t testing.TB, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("no hidden input %s on the page (%d): %s", name, p.Status, p.Body)
	}
	return html.UnescapeString(m[1])
}

// WantPage asserts an HTML page of the provider with status, its security headers, and texts.
func (p Page) WantPage(t testing.TB, name string, status int, texts ...string) {
	t.Helper()
	csp := p.Header.Get("Content-Security-Policy")
	if p.Status != status || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") ||
		p.Header.Get("Location") != "" {
		t.Fatalf("%s: %d %v; want a %d page without redirect\n%s", name, p.Status, p.Header, status, p.Body)
	}
	nonce := regexp.MustCompile(`style-src 'nonce-([^']+)'`).FindStringSubmatch(csp)
	if nonce == nil || !strings.Contains(p.Body, `<style nonce="`+nonce[1]+`">`) {
		t.Errorf("%s: the inline stylesheet does not carry the CSP nonce (%q)", name, csp)
	}
	for _, want := range append([]string{`<html lang="en">`, `name="viewport"`}, texts...) {
		if !strings.Contains(p.Body, want) {
			t.Errorf("%s: the page lacks %q:\n%s", name, want, p.Body)
		}
	}
	if strings.Contains(p.Body, "http://") || strings.Contains(p.Body, "https://") {
		t.Errorf("%s: the page references an external URL:\n%s", name, p.Body)
	}
}

// RedirectParams asserts a 303 to prefix and returns its query.
func (p Page) RedirectParams(t testing.TB, name, prefix string) url.Values {
	t.Helper()
	loc := p.Header.Get("Location")
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(loc, prefix) {
		t.Fatalf("%s: %d Location %q; want 303 to %s\n%s", name, p.Status, loc, prefix, p.Body)
	}
	return p.Location().Query()
}

// AuthorizeURL is an authorization request for client to redirect with PKCE S256; extra
// key/value pairs are added (or, with an empty value, removed).
func AuthorizeURL(base, clientID, redirect, challenge string, extra ...string) string {
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
