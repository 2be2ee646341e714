package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
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
		b.errorPage(w, http.StatusBadRequest, "invalid_request", msgMalformedLink)
		return
	}
	repeated := ""
	for k, v := range r.Form {
		if len(v) > 1 {
			if k == "client_id" || k == "redirect_uri" {
				b.errorPage(w, http.StatusBadRequest, "invalid_request", msgMalformedLink)
				return
			}
			repeated = k
		}
	}
	// A pushed request (RFC 9126) is one whose request_uri fosite resolves (and uses up) in
	// NewAuthorizeRequest; a continuation of one after sign-in carries a signed marker instead.
	viaPAR := strings.HasPrefix(r.Form.Get("request_uri"), parRequestURIPrefix)
	if viaPAR && !b.pushedByClient(w, r) {
		return
	}
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
	if wantsMultiFactor(r.Form) && signedIn && !slices.Contains(sess.AMR, "mfa") {
		// A session without a second factor: the user signs in again, with the factor, or the
		// request fails when there is none to ask for.
		on, err := b.twoFactorOn(ctx, user.ID)
		if err != nil {
			b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
			return
		}
		if !on {
			b.authorizeError(w, ar, errUnmetAuthenticationRequirements)
			return
		}
		needLogin = true
	}
	client, err := b.store.OIDCClientByID(ctx, ar.GetClient().GetID())
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	pushed := viaPAR
	if !pushed && r.Form.Get(pushedParam) != "" {
		if pushed, err = b.takeContinuation(ctx, r); err != nil {
			b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
			return
		}
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
			// The pending request, without what is used up (a pushed request's request_uri, a
			// continuation's marker): the consent challenge carries it from here on.
			q := cloneValues(r.Form)
			q.Del(loginErrorParam)
			q.Del(pushedParam)
			if viaPAR {
				q.Del("request_uri")
			}
			ch := b.sign(challenge{Kind: "consent", Session: sess.ID, Client: client.ID, Query: q.Encode()})
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, ConsentPath+"?consent_challenge="+url.QueryEscape(ch), http.StatusSeeOther)
			return
		}
	}
	b.grant(ctx, w, ar, sess, user)
}

// codeChallengeForm is what an S256 code_challenge can be (RFC 7636 section 4.2: 43 to 128
// characters of the verifier's alphabet, [A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"; an
// S256 challenge is 43 of them). fosite checks only that one is present.
var codeChallengeForm = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// checkAuthorizeParams refuses what fosite would accept or only refuse later: a missing,
// malformed or non-S256 PKCE challenge (mandatory for every client), a response mode other
// than query, a nonce shorter than fosite.MinParameterEntropy (fosite refuses it only at the
// token endpoint, after the user has consented; state it checks itself, in
// NewAuthorizeRequest), an unknown or contradictory prompt, a malformed max_age.
func checkAuthorizeParams(form url.Values) error {
	if form.Get("code_challenge") == "" {
		return fosite.ErrInvalidRequest.WithHint("PKCE is required: send code_challenge with code_challenge_method=S256.")
	}
	if form.Get("code_challenge_method") != "S256" {
		return fosite.ErrInvalidRequest.WithHint("Only the S256 code_challenge_method is supported.")
	}
	if !codeChallengeForm.MatchString(form.Get("code_challenge")) {
		return fosite.ErrInvalidRequest.WithHint("The code_challenge must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_' and '~' (RFC 7636).")
	}
	if n := form.Get("nonce"); n != "" && len(n) < fosite.MinParameterEntropy {
		return fosite.ErrInsufficientEntropy.WithHintf("The nonce must be at least %d characters long.", fosite.MinParameterEntropy)
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

// errUnmetAuthenticationRequirements (OpenID Connect Core 1.0, errata set 2) answers a request
// for acr urn:gatehouse:mfa from a user without a second factor to ask for.
var errUnmetAuthenticationRequirements = &fosite.RFC6749Error{ErrorField: "unmet_authentication_requirements",
	DescriptionField: "The request asks for a second factor (acr_values=" + ACRMultiFactor + ") and the user has none.",
	CodeField:        http.StatusBadRequest}

// wantsMultiFactor reports whether the request's acr_values ask for ACRMultiFactor.
func wantsMultiFactor(form url.Values) bool {
	return slices.Contains(strings.Fields(form.Get("acr_values")), ACRMultiFactor)
}

// WantsMultiFactor reports whether callbackURL is this provider's authorization endpoint asking
// for acr urn:gatehouse:mfa: a sign-in continuing such a request must ask for the second factor
// even on a trusted device.
func WantsMultiFactor(callbackURL string) bool {
	u, err := url.Parse(callbackURL)
	return err == nil && u.Path == AuthorizePath && wantsMultiFactor(u.Query())
}

// twoFactorOn reports whether userID has a second factor to sign in with again: TOTP that is
// on, or a passkey.
func (b *browserProvider) twoFactorOn(ctx context.Context, userID string) (bool, error) {
	return identity.HasSecondFactor(ctx, b.store, userID)
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
// with a signed, single-use marker bound to this browser (markPushed) that lets it pass a
// client's requirePushedAuthorizationRequests.
func (b *browserProvider) signInPage(w http.ResponseWriter, r *http.Request, clientName string, pushed bool) {
	q := cloneValues(r.Form)
	message := loginMessage(q.Get(loginErrorParam))
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
		b.markPushed(q, b.bindBrowser(w, r))
	}
	callback := AuthorizePath + "?" + q.Encode()
	b.render(w, http.StatusOK, PageSignIn, Page{
		Title: "Sign in", Action: "/api/auth/sign-in/email", Error: message, Email: r.Form.Get("login_hint"),
		CallbackURL: callback, ClientName: clientName,
		Social: b.social, SocialErrorURL: withQueryParam(callback, loginErrorParam, "social"),
		SignUpURL: pageLinkTo(b.signUpURL, callback, ""), ForgotURL: pageLinkTo(b.forgotPasswordURL, callback, r.Form.Get("login_hint")),
	})
}

// loginMessage is the sentence the sign-in page shows for the login_error a failed sign-in
// came back with ("" for none).
func loginMessage(code string) string {
	switch code {
	case "":
		return ""
	case "too_many_attempts":
		return "Too many failed attempts. Wait a while and try again."
	case "email_not_verified":
		return "Confirm your email address first: we have sent you a new link."
	case "social":
		return "Signing in with that provider did not work. Try again or use another way."
	case "two_factor_expired":
		return "The second step of your sign-in expired or took too many wrong codes. Sign in again."
	default:
		return "The email or password is not correct."
	}
}

// grant issues the authorization code for the signed-in user and redirects to the client
// with code, state and iss. The session carries what the ID token needs (auth_time: when the
// browser session signed in; amr: how; acr urn:gatehouse:mfa when that was with a second
// factor; azp; the nonce comes from the request) and the active organization for userinfo.
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
	fs.Claims.AuthenticationMethodsReferences = slices.Clone(sess.AMR)
	if slices.Contains(sess.AMR, "mfa") {
		fs.Claims.AuthenticationContextClassReference = ACRMultiFactor
	}
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
		b.errorPage(w, status, rfc.ErrorField, pageMessage(ar, rfc))
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

// pageMessage is the error page's sentence for a failed authorization request that cannot be
// redirected: by error code, and for invalid_request with a known client by what is wrong
// with its redirect URI.
func pageMessage(ar fosite.AuthorizeRequester, rfc *fosite.RFC6749Error) string {
	switch rfc.ErrorField {
	case fosite.ErrInvalidClient.ErrorField:
		return msgUnknownClient
	case fosite.ErrInvalidRequestURI.ErrorField:
		return msgPushedUsed
	case fosite.ErrServerError.ErrorField:
		return msgServerError
	}
	if ar != nil && ar.GetClient() != nil && rfc.ErrorField == fosite.ErrInvalidRequest.ErrorField {
		raw := ar.GetRequestForm().Get("redirect_uri")
		if raw == "" {
			return msgNoRedirect
		}
		if _, err := fosite.MatchRedirectURIWithClientRedirectURIs(raw, ar.GetClient()); err != nil {
			return msgRedirectMismatch
		}
	}
	return msgCannotComplete
}

// errorPage renders the error page with message, one sentence for a person (msgServerError
// when empty): it links nowhere and redirects nowhere.
func (b *browserProvider) errorPage(w http.ResponseWriter, status int, code, message string) {
	if message == "" {
		message = msgServerError
	}
	b.render(w, status, PageError, Page{Title: "Error", Code: code, Error: message})
}

// pageLinkTo is the hosted page at path with callback as its callbackURL and email to fill
// in (when not ""), or "" when path is.
func pageLinkTo(path, callback, email string) string {
	if path == "" {
		return ""
	}
	q := url.Values{"callbackURL": {callback}}
	if email != "" {
		q.Set("email", email)
	}
	return path + "?" + q.Encode()
}
