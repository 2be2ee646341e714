package server

import (
	"mime"
	"net/http"
	"net/url"
)

// Login CSRF through form posts. checkOrigin lets an unsafe request without the session cookie
// through when it names no origin at all, so that non-browser clients (better-auth's
// server-side client, curl) keep working. A browser form, though, can be posted from any site,
// and one that arrives without Origin or Referer (a privacy extension, a proxy, an older
// browser, Referrer-Policy: no-referrer on the attacking page) would sign the victim's browser
// in to an account the attacker chose. On the /api/auth surface, where form posts are
// sign-in, sign-up and the social sign-in start, a form post must therefore name its origin,
// like the provider's consent and end-session posts, and is refused when the browser itself
// says it comes from another site.

var (
	errFormPostNoOrigin = authError(http.StatusForbidden, kindForbidden, "MISSING_OR_NULL_ORIGIN", "Missing or null Origin")
	// better-auth's code for the same refusal (its message adds "This request appears to be a
	// CSRF attack.").
	errCrossSiteFormPost = authError(http.StatusForbidden, kindForbidden, "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED",
		"Cross-site navigation login blocked")
)

// checkFormPost applies the form-post rule to an /api/auth request, after checkOrigin (which
// has refused any untrusted Origin, or untrusted Referer without an Origin): a
// form-urlencoded POST must carry Origin or a Referer with an origin (else 403
// MISSING_OR_NULL_ORIGIN), and Sec-Fetch-Site: cross-site is 403
// CROSS_SITE_NAVIGATION_LOGIN_BLOCKED even from a trusted origin — a product on another site
// signs in with JSON through CORS. JSON and other bodies are not affected.
func checkFormPost(req *http.Request) error {
	if req.Method != http.MethodPost {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil
	}
	if req.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errCrossSiteFormPost
	}
	if req.Header.Get("Origin") != "" {
		return nil
	}
	if u, err := url.Parse(req.Header.Get("Referer")); err == nil && u.Scheme != "" && u.Host != "" {
		return nil
	}
	return errFormPostNoOrigin
}
