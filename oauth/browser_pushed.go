package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ---- Pushed requests ----

// parRequestURIPrefix is the prefix of the request_uri values the PAR endpoint issues
// (fosite's default).
const parRequestURIPrefix = "urn:ietf:params:oauth:request_uri:"

// pushedByClient refuses, with the error page, a request_uri that another client pushed:
// fosite would take (delete) the pushed request before comparing the clients and then
// redirect its error to the pushed request's redirect URI, which is not the requesting
// client's. An unknown, used or expired request_uri passes here; fosite refuses it
// (invalid_request_uri). A client's pushed requests never change client, so nothing can slip
// in between this read and fosite's take.
func (b *browserProvider) pushedByClient(w http.ResponseWriter, r *http.Request) bool {
	owner, err := b.store.PARRequestClient(r.Context(), r.Form.Get("request_uri"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true
	case err != nil:
		b.errorPage(w, http.StatusInternalServerError, "server_error", "")
		return false
	case owner != r.Form.Get("client_id"):
		b.errorPage(w, http.StatusBadRequest, "invalid_request", msgPushedOther)
		return false
	}
	return true
}

// ---- The sign-in continuation of a pushed request ----
//
// When a pushed request needs the sign-in page, its request_uri is used up: the page's
// callback carries the pushed parameters instead, with pushedParam, a marker that lets the
// continuation pass a client's requirePushedAuthorizationRequests. The marker is
//
//   - signed: an HMAC-SHA256 over its expiry, the browser binding and every other parameter,
//     so an altered continuation is a plain request again;
//   - bound to the browser that was shown the sign-in page: the HMAC covers a random value
//     held only in that browser's bindingCookie (HttpOnly, SameSite=Lax, challengeTTL), which
//     the marker does not reveal, so a copied continuation URL is a plain request in any
//     other browser, signed in or not;
//   - single-use: its first use is recorded in oauth_used_challenges until it expires
//     (store.UseChallenge), so a second use, on any replica, is a plain request.
//
// A failed sign-in comes back through the continuation (using it) to a new sign-in page with
// a new marker. The binding cookie is reused while it lives, so two tabs signing in at once
// each keep a valid continuation.

// pushedParam is the continuation's marker: "<expiry unix>.<nonce>.<base64url HMAC-SHA256>";
// the random nonce makes each marker new, even when the sign-in page is shown again within a
// second for the same request.
const pushedParam = "pushed"

// bindingCookieName is the name of the cookie that binds continuations to a browser; over
// https it carries the __Host- prefix.
const bindingCookieName = "gatehouse.authorize_binding"

// bindingForm is a binding value: 32 random bytes, base64url.
var bindingForm = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func (b *browserProvider) bindingCookie() (name string, secure bool) {
	secure = strings.HasPrefix(b.p.baseURL, "https://")
	if secure {
		return "__Host-" + bindingCookieName, true
	}
	return bindingCookieName, false
}

// bindBrowser returns the browser's binding value, making one when the request carries none,
// and (re)sets the cookie for another challengeTTL.
func (b *browserProvider) bindBrowser(w http.ResponseWriter, r *http.Request) string {
	name, secure := b.bindingCookie()
	value := ""
	if c, err := r.Cookie(name); err == nil && bindingForm.MatchString(c.Value) {
		value = c.Value
	} else {
		var raw [32]byte
		_, _ = rand.Read(raw[:])
		value = base64.RawURLEncoding.EncodeToString(raw[:])
	}
	http.SetCookie(w, identity.SessionCookie(name, value, challengeTTL, secure))
	return value
}

// markPushed turns q, the parameters of a pushed request, into its continuation for the
// browser bound by binding: without the request_uri (used up) and with a pushedParam signed
// over every other parameter (but loginErrorParam and error, which sign-in adds), valid for
// challengeTTL.
func (b *browserProvider) markPushed(q url.Values, binding string) {
	q.Del("request_uri")
	q.Del(pushedParam)
	q.Del(loginErrorParam)
	q.Del("error")
	exp := strconv.FormatInt(time.Now().Add(challengeTTL).Unix(), 10)
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	q.Set(pushedParam, exp+"."+nonce+"."+b.pushedMAC(exp, nonce, binding, q))
}

// takeContinuation reports whether r is a continuation made by markPushed for this browser,
// unexpired, unaltered and unused, and records it as used. An error is the store's.
func (b *browserProvider) takeContinuation(ctx context.Context, r *http.Request) (bool, error) {
	parts := strings.Split(r.Form.Get(pushedParam), ".")
	if len(parts) != 3 {
		return false, nil
	}
	exp, nonce, mac := parts[0], parts[1], parts[2]
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > n || r.Form.Get("request_uri") != "" {
		return false, nil
	}
	name, _ := b.bindingCookie()
	c, err := r.Cookie(name)
	if err != nil || !bindingForm.MatchString(c.Value) {
		return false, nil
	}
	q := cloneValues(r.Form)
	q.Del(loginErrorParam)
	q.Del("error") // a refused social sign-in adds it (authapi_social.go)
	q.Del(pushedParam)
	if !hmac.Equal([]byte(mac), []byte(b.pushedMAC(exp, nonce, c.Value, q))) {
		return false, nil
	}
	return b.spend(ctx, pushedParam, mac, n)
}

// pushedMAC signs the expiry, the nonce, the browser binding and the parameters q (without
// the marker). login_hint is left out: a failed sign-in sends the page the typed email in it,
// and it only fills in the form.
func (b *browserProvider) pushedMAC(exp, nonce, binding string, q url.Values) string {
	q = cloneValues(q)
	q.Del("login_hint")
	mac := hmac.New(sha256.New, b.key)
	mac.Write([]byte("pushed\x00" + exp + "\x00" + nonce + "\x00" + binding + "\x00" + q.Encode()))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// spend records the single-use challenge of kind whose signature is sig as used until exp
// (unix seconds). It reports false when it was used before.
func (b *browserProvider) spend(ctx context.Context, kind, sig string, exp int64) (bool, error) {
	err := b.store.UseChallenge(ctx, kind+":"+sig, time.Unix(exp, 0))
	if errors.Is(err, store.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}
