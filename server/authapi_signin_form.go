package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatehouse-dev/gatehouse/oauth"
)

// Sign-in and social sign-in form posts from the provider's sign-in page: a browser gets a
// redirect back to its callbackURL (with login_error on failure), better-auth's client JSON.

// acceptsJSON reports whether an Accept header asks for JSON (better-auth's client does);
// browsers' form posts do not.
func acceptsJSON(accept string) bool {
	return strings.Contains(accept, "application/json") || strings.Contains(accept, "+json")
}

// signInErrorCode is the login_error a failed browser sign-in is sent back with, or "" when
// the failure is not the user's (the error is answered as usual).
func signInErrorCode(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return ""
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return "invalid_credentials"
	case http.StatusTooManyRequests:
		return "too_many_attempts"
	case http.StatusForbidden:
		if e.Code == errEmailNotVerified.Code {
			return "email_not_verified"
		}
	}
	return ""
}

// withQueryParam returns raw with key=value set in its query.
func withQueryParam(raw, key, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// signInRetryURL is where a failed browser sign-in is sent back: callbackURL with login_error
// code, and, when callbackURL is the provider's authorization endpoint on this site (the
// hosted sign-in page's own continuation) or the hosted sign-in page itself, with the typed email as login_hint, which the page
// shows again. The access log records paths without their query, so the address stays out of
// it; a product's callbackURL never receives it.
func signInRetryURL(callbackURL, code, email string) string {
	loc := withQueryParam(callbackURL, "login_error", code)
	if u, err := url.Parse(callbackURL); err == nil && u.Scheme == "" && u.Host == "" &&
		(u.Path == oauth.AuthorizePath || u.Path == oauth.SignInPath) {
		loc = withQueryParam(loc, "login_hint", email)
	}
	return loc
}
