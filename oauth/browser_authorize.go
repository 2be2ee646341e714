package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ---- Authorization endpoint ----

// authorize serves GET and POST /api/auth/oauth2/authorize (see the spec). The order of the
// checks decides where an error goes: a request without a usable client and exactly matching
// redirect URI gets the error page; everything after that is redirected with error and iss.
func (b *browserProvider) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "The authorization request could not be read.")
		return
	}
	repeated := ""
	for k, v := range r.Form {
		if len(v) > 1 {
			if k == "client_id" || k == "redirect_uri" {
				b.errorPage(w, http.StatusBadRequest, "invalid_request", "The parameter "+k+" is repeated.")
				return
			}
			repeated = k
		}
	}
	// A pushed request (RFC 9126) is one whose request_uri fosite resolves (and uses up) in
	// NewAuthorizeRequest; a continuation of one after sign-in carries a signed marker instead.
	pushed := strings.HasPrefix(r.Form.Get("request_uri"), parRequestURIPrefix) || b.pushedContinuation(r.Form)
	ar, err := b.p.NewAuthorizeRequest(ctx, r)
	if err != nil {
		b.authorizeError(w, ar, err)
		return
	}
	if repeated != "" {
		b.authorizeError(w, ar, fosite.ErrInvalidRequest.WithHintf("The parameter '%s' is repeated.", repeated))
		return
	}
	if !slices.Contains(ar.GetClient().GetGrantTypes(), GrantAuthorizationCode) {
		b.authorizeError(w, ar, fosite.ErrUnauthorizedClient.WithHint("The client may not use the authorization code grant."))
		return
	}
	if err := checkAuthorizeParams(r.Form); err != nil {
		b.authorizeError(w, ar, err)
		return
	}
	prompts := promptSet(r.Form.Get("prompt"))
	sess, user, _, err := b.sessions.FromRequest(r)
	signedIn := err == nil
	if err != nil && !errors.Is(err, identity.ErrNoSession) {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	needLogin := !signedIn || prompts["login"]
	if maxAge, ok := maxAgeOf(r.Form); ok && signedIn && time.Since(sess.CreatedAt) > time.Duration(maxAge)*time.Second {
		needLogin = true
	}
	client, err := b.store.OIDCClientByID(ctx, ar.GetClient().GetID())
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	if client.RequirePAR && !pushed {
		b.authorizeError(w, ar, fosite.ErrInvalidRequest.WithHint(
			"This client must push its authorization requests: POST them to "+PARPath+" and send the request_uri."))
		return
	}
	if needLogin {
		if prompts["none"] {
			b.authorizeError(w, ar, fosite.ErrLoginRequired.WithHint("The user is not signed in (prompt=none)."))
			return
		}
		b.signInPage(w, r, client.Name, pushed)
		return
	}
	// prompt=consent asks every client's user, skipConsent clients' too; otherwise
	// skipConsent clients never ask and the others ask unless a consent covers the scopes.
	if !client.SkipConsent || prompts["consent"] {
		covered := false
		if !prompts["consent"] {
			consents, err := b.store.OAuthConsents(ctx, user.ID, client.ID)
			if err != nil {
				b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
				return
			}
			for _, c := range consents {
				covered = covered || c.Covers(ar.GetRequestedScopes())
			}
		}
		if !covered {
			if prompts["none"] {
				b.authorizeError(w, ar, fosite.ErrConsentRequired.WithHint("The user has not consented to this client and these scopes (prompt=none)."))
				return
			}
			q := cloneValues(r.Form)
			q.Del(loginErrorParam)
			if pushed {
				b.markPushed(q)
			}
			ch := b.sign(challenge{Kind: "consent", Session: sess.ID, Client: client.ID, Query: q.Encode()})
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, ConsentPath+"?consent_challenge="+url.QueryEscape(ch), http.StatusSeeOther)
			return
		}
	}
	b.grant(ctx, w, ar, sess, user)
}

// checkAuthorizeParams refuses what fosite would accept or only refuse later: a missing or
// non-S256 PKCE challenge (mandatory for every client), a response mode other than query,
// an unknown or contradictory prompt, a malformed max_age.
func checkAuthorizeParams(form url.Values) error {
	if form.Get("code_challenge") == "" {
		return fosite.ErrInvalidRequest.WithHint("PKCE is required: send code_challenge with code_challenge_method=S256.")
	}
	if form.Get("code_challenge_method") != "S256" {
		return fosite.ErrInvalidRequest.WithHint("Only the S256 code_challenge_method is supported.")
	}
	if rm := form.Get("response_mode"); rm != "" && rm != "query" {
		return fosite.ErrInvalidRequest.WithHint("Only the query response mode is supported.")
	}
	prompts := promptSet(form.Get("prompt"))
	for p := range prompts {
		if p != "none" && p != "login" && p != "consent" {
			return fosite.ErrInvalidRequest.WithHintf("Unknown prompt value '%s'.", p)
		}
	}
	if prompts["none"] && len(prompts) > 1 {
		return fosite.ErrInvalidRequest.WithHint("prompt=none cannot be combined with other values.")
	}
	if v := form.Get("max_age"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < 0 {
			return fosite.ErrInvalidRequest.WithHint("max_age must be a non-negative integer.")
		}
	}
	return nil
}

func promptSet(raw string) map[string]bool {
	out := map[string]bool{}
	for _, p := range strings.Fields(raw) {
		out[p] = true
	}
	return out
}

func maxAgeOf(form url.Values) (int64, bool) {
	v := form.Get("max_age")
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	return n, err == nil && n >= 0
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// signInPage renders the sign-in form, which posts to /api/auth/sign-in/email with the
// authorization request as callbackURL. Once signed in the request must not ask for a new
// sign-in again, so the callback drops prompt=login and max_age (the new session's auth_time
// is now, which satisfies any max_age).
//
// The callback of a pushed request carries its parameters instead of the used-up request_uri,
// with a signed marker (markPushed) that lets it pass a client's requirePushedAuthorizationRequests.
func (b *browserProvider) signInPage(w http.ResponseWriter, r *http.Request, clientName string, pushed bool) {
	q := cloneValues(r.Form)
	message := ""
	switch q.Get(loginErrorParam) {
	case "":
	case "too_many_attempts":
		message = "Too many failed attempts. Wait a while and try again."
	case "social":
		message = "Signing in with that provider did not work. Try again or use another way."
	default:
		message = "The email or password is not correct."
	}
	q.Del(loginErrorParam)
	q.Del("error")
	q.Del("max_age")
	if p := promptSet(q.Get("prompt")); p["login"] {
		delete(p, "login")
		rest := make([]string, 0, len(p))
		for k := range p {
			rest = append(rest, k)
		}
		slices.Sort(rest)
		if len(rest) == 0 {
			q.Del("prompt")
		} else {
			q.Set("prompt", strings.Join(rest, " "))
		}
	}
	if pushed {
		b.markPushed(q)
	}
	callback := AuthorizePath + "?" + q.Encode()
	RenderPage(w, http.StatusOK, PageSignIn, Page{
		Title: "Sign in", Action: "/api/auth/sign-in/email", Error: message, Email: r.Form.Get("login_hint"),
		CallbackURL: callback, ClientName: clientName,
		Social: b.social, SocialErrorURL: withQueryParam(callback, loginErrorParam, "social"),
	})
}

// grant issues the authorization code for the signed-in user and redirects to the client
// with code, state and iss. The session carries what the ID token needs (auth_time: when the
// browser session signed in; azp; the nonce comes from the request) and the active
// organization for userinfo.
func (b *browserProvider) grant(ctx context.Context, w http.ResponseWriter, ar fosite.AuthorizeRequester, sess store.Session, user store.User) {
	clientID := ar.GetClient().GetID()
	for _, scope := range ar.GetRequestedScopes() {
		ar.GrantScope(scope)
	}
	ar.GrantAudience(clientID)
	fs := NewSession(user.ID)
	fs.ClientID = clientID
	fs.GrantedAt = time.Now().UTC()
	if sess.ActiveOrganizationID != nil {
		fs.OrganizationID = *sess.ActiveOrganizationID
	}
	fs.Claims.AuthTime = sess.CreatedAt.UTC().Truncate(time.Second)
	fs.Claims.RequestedAt = ar.GetRequestedAt()
	fs.Claims.Extra = map[string]interface{}{"azp": clientID}
	resp, err := b.p.NewAuthorizeResponse(ctx, ar, fs)
	if err != nil {
		b.authorizeError(w, ar, err)
		return
	}
	resp.AddParameter("iss", b.p.Issuer())
	b.p.WriteAuthorizeResponse(ctx, w, ar, resp)
}

// authorizeError answers a failed authorization request: with a 303 to the client's redirect
// URI carrying error, error_description, state and iss (RFC 9207) when the client is known
// and usable and the redirect URI matched one of its registered URIs exactly; otherwise with
// the error page, so that nothing is ever sent to an unregistered URI.
func (b *browserProvider) authorizeError(w http.ResponseWriter, ar fosite.AuthorizeRequester, err error) {
	rfc := fosite.ErrorToRFC6749Error(err)
	if ar == nil || ar.GetClient() == nil || !ar.IsRedirectURIValid() {
		status := rfc.CodeField
		if status < 400 || status == http.StatusUnauthorized {
			status = http.StatusBadRequest
		}
		b.errorPage(w, status, rfc.ErrorField, rfc.GetDescription())
		return
	}
	u := *ar.GetRedirectURI()
	u.Fragment = ""
	q := u.Query()
	q.Set("error", rfc.ErrorField)
	if d := rfc.GetDescription(); d != "" {
		q.Set("error_description", d)
	}
	if st := ar.GetState(); st != "" {
		q.Set("state", st)
	}
	q.Set("iss", b.p.Issuer())
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}

// errorPage renders the error page: it links nowhere and redirects nowhere.
func (b *browserProvider) errorPage(w http.ResponseWriter, status int, code, message string) {
	if message == "" {
		message = "The request could not be completed."
	}
	RenderPage(w, status, PageError, Page{Title: "Error", Code: code, Error: message})
}

// ---- Pushed requests ----

// parRequestURIPrefix is the prefix of the request_uri values the PAR endpoint issues
// (fosite's default).
const parRequestURIPrefix = "urn:ietf:params:oauth:request_uri:"

// pushedParam is the marker of the continuation of a pushed authorization request after
// sign-in: "<expiry unix>.<base64url HMAC-SHA256 of the expiry and the other parameters>".
const pushedParam = "pushed"

// markPushed turns q, the parameters of a pushed request, into its continuation: without the
// request_uri (used up) and with a pushedParam signed over every other parameter (but
// loginErrorParam and login_hint, which a failed sign-in sets), valid for challengeTTL.
func (b *browserProvider) markPushed(q url.Values) {
	q.Del("request_uri")
	q.Del(pushedParam)
	q.Del(loginErrorParam)
	q.Del("error")
	exp := strconv.FormatInt(time.Now().Add(challengeTTL).Unix(), 10)
	q.Set(pushedParam, exp+"."+b.pushedMAC(exp, q))
}

// pushedContinuation reports whether form is a continuation made by markPushed, unexpired and
// unaltered.
func (b *browserProvider) pushedContinuation(form url.Values) bool {
	v := form.Get(pushedParam)
	exp, mac, ok := strings.Cut(v, ".")
	n, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || time.Now().Unix() > n || form.Get("request_uri") != "" {
		return false
	}
	q := cloneValues(form)
	q.Del(loginErrorParam)
	q.Del("error") // a refused social sign-in adds it (authapi_social.go)
	q.Del(pushedParam)
	return hmac.Equal([]byte(mac), []byte(b.pushedMAC(exp, q)))
}

// pushedMAC signs the expiry and the parameters q (without the marker). login_hint is left
// out: a failed sign-in sends the page the typed email in it, and it only fills in the form.
func (b *browserProvider) pushedMAC(exp string, q url.Values) string {
	q = cloneValues(q)
	q.Del("login_hint")
	mac := hmac.New(sha256.New, b.key)
	mac.Write([]byte("pushed\x00" + exp + "\x00" + q.Encode()))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
