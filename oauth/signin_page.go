package oauth

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatehouse-dev/gatehouse/identity"
)

// SignInPath is the hosted sign-in page of the product's own browser apps (the admin console):
// the authorization endpoint's sign-in page without an authorization request.
const SignInPath = "/api/auth/sign-in"

// hostedSignIn serves GET SignInPath (see the spec's getSignInPage). The form's callbackURL is
// this page itself with the same target, the authorization endpoint's pattern: a failed
// sign-in comes back here with login_error, and a successful one (password, second factor,
// passkey or social) comes back here, finds the session and goes on to the target.
func (b *browserProvider) hostedSignIn(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target := q.Get("callbackURL")
	if target == "" {
		target = "/"
	}
	if !isLocalPath(target) {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "This sign-in link is malformed: it must return to a page on this site.")
		return
	}
	_, _, _, err := b.sessions.FromRequest(r)
	switch {
	case err == nil:
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	case !errors.Is(err, identity.ErrNoSession):
		b.errorPage(w, http.StatusInternalServerError, "server_error", "")
		return
	}
	self := SignInPath + "?" + url.Values{"callbackURL": {target}}.Encode()
	hint := q.Get("login_hint")
	b.render(w, http.StatusOK, PageSignIn, Page{
		Title: "Sign in", Action: "/api/auth/sign-in/email", Error: loginMessage(q.Get(loginErrorParam)), Email: hint,
		CallbackURL: self, Social: b.social, SocialErrorURL: withQueryParam(self, loginErrorParam, "social"),
		SignUpURL: pageLinkTo(b.signUpURL, self, ""), ForgotURL: pageLinkTo(b.forgotPasswordURL, self, hint),
	})
}

// isLocalPath reports whether raw is a path on this site: "/…" but not "//…", with no
// back-slash, white space or control character (which browsers strip or read as slashes).
func isLocalPath(raw string) bool {
	if !strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, "//") {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
