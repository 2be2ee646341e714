package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v3"
	"github.com/labstack/echo/v4"
	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// The provider's browser side: the authorization endpoint with its sign-in and consent pages,
// userinfo and RP-initiated logout. Every route is a protocol route (x-surface: protocol):
// the pipeline neither authenticates nor checks Origin for it, so the handlers here read the
// /api/auth session themselves and defend their own form posts (trusted Origin plus a signed
// challenge bound to the session).

// challengeTTL bounds how long a consent or logout page may be left open before its form
// post is refused.
const challengeTTL = 15 * time.Minute

// loginErrorParam is the parameter sign-in adds to its callbackURL on failure: the sign-in
// page shows the matching message and never forwards the parameter.
const loginErrorParam = "login_error"

// browserProvider serves the browser-side protocol routes.
type browserProvider struct {
	s *Server
	p *oauth.Provider
	// key signs consent and logout challenges.
	key []byte
}

// routeBrowserProvider registers the authorization, consent, userinfo and end-session routes.
func (s *Server) routeBrowserProvider(e *echo.Echo, p *oauth.Provider) {
	b := &browserProvider{s: s, p: p, key: seal.DeriveKey(s.cfg.SecretKey, "oauth-browser-challenge")}
	wrap := func(h http.HandlerFunc) echo.HandlerFunc { return echo.WrapHandler(h) }
	e.GET(oauth.AuthorizePath, wrap(b.authorize))
	e.POST(oauth.AuthorizePath, wrap(b.authorize))
	e.GET(oauth.ConsentPath, wrap(b.consentPage))
	e.POST(oauth.ConsentPath, wrap(b.consentDecision))
	e.GET(oauth.UserinfoPath, wrap(b.userinfo))
	e.POST(oauth.UserinfoPath, wrap(b.userinfo))
	e.GET(oauth.EndSessionPath, wrap(b.endSession))
	e.POST(oauth.EndSessionPath, wrap(b.endSessionConfirm))
}

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
	if !slices.Contains(ar.GetClient().GetGrantTypes(), "authorization_code") {
		b.authorizeError(w, ar, fosite.ErrUnauthorizedClient.WithHint("The client may not use the authorization code grant."))
		return
	}
	if err := checkAuthorizeParams(r.Form); err != nil {
		b.authorizeError(w, ar, err)
		return
	}
	prompts := promptSet(r.Form.Get("prompt"))
	sess, user, _, err := b.s.sessions.FromRequest(r)
	signedIn := err == nil
	if err != nil && !errors.Is(err, identity.ErrNoSession) {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	needLogin := !signedIn || prompts["login"]
	if maxAge, ok := maxAgeOf(r.Form); ok && signedIn && time.Since(sess.CreatedAt) > time.Duration(maxAge)*time.Second {
		needLogin = true
	}
	client, err := b.s.store.OIDCClientByID(ctx, ar.GetClient().GetID())
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	if client.RequirePAR && !pushed {
		b.authorizeError(w, ar, fosite.ErrInvalidRequest.WithHint(
			"This client must push its authorization requests: POST them to "+oauth.PARPath+" and send the request_uri."))
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
			consents, err := b.s.store.OAuthConsents(ctx, user.ID, client.ID)
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
			http.Redirect(w, r, oauth.ConsentPath+"?consent_challenge="+url.QueryEscape(ch), http.StatusSeeOther)
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
	callback := oauth.AuthorizePath + "?" + q.Encode()
	buttons := make([]oauth.SocialButton, len(b.s.social.order))
	for i, p := range b.s.social.order {
		buttons[i] = oauth.SocialButton{ID: p.ID, Name: p.Name}
	}
	oauth.RenderPage(w, http.StatusOK, oauth.PageSignIn, oauth.Page{
		Title: "Sign in", Action: "/api/auth/sign-in/email", Error: message, Email: r.Form.Get("login_hint"),
		CallbackURL: callback, ClientName: clientName,
		Social: buttons, SocialErrorURL: withQueryParam(callback, loginErrorParam, "social"),
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
	fs := oauth.NewSession(user.ID)
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
	oauth.RenderPage(w, status, oauth.PageError, oauth.Page{Title: "Error", Code: code, Error: message})
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
// loginErrorParam, which sign-in adds), valid for challengeTTL.
func (b *browserProvider) markPushed(q url.Values) {
	q.Del("request_uri")
	q.Del(pushedParam)
	q.Del(loginErrorParam)
	q.Del("error")
	exp := strconv.FormatInt(time.Now().Add(challengeTTL).Unix(), 10)
	q.Set(pushedParam, exp+"."+b.pushedMAC(exp, q.Encode()))
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
	return hmac.Equal([]byte(mac), []byte(b.pushedMAC(exp, q.Encode())))
}

// pushedMAC signs the expiry and the encoded parameters (without the marker).
func (b *browserProvider) pushedMAC(exp, encoded string) string {
	mac := hmac.New(sha256.New, b.key)
	mac.Write([]byte("pushed\x00" + exp + "\x00" + encoded))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// ---- Challenges ----

// challenge ties a consent or logout form to the browser session that was shown it and to
// the pending request; it is signed with HMAC-SHA256 and expires after challengeTTL.
type challenge struct {
	Kind    string `json:"k"`
	Session string `json:"s"`
	Client  string `json:"c,omitempty"`
	// Query is the pending authorization request (consent).
	Query string `json:"q,omitempty"`
	// Redirect and State are the validated post-logout redirect (logout).
	Redirect string `json:"r,omitempty"`
	State    string `json:"st,omitempty"`
	Expires  int64  `json:"e"`
}

func (b *browserProvider) sign(c challenge) string {
	c.Expires = time.Now().Add(challengeTTL).Unix()
	payload, _ := json.Marshal(c)
	mac := hmac.New(sha256.New, b.key)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// open verifies a challenge of kind issued to session sessionID.
func (b *browserProvider) open(raw, kind, sessionID string) (challenge, error) {
	payloadPart, sigPart, ok := strings.Cut(raw, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(payloadPart)
	sig, err2 := base64.RawURLEncoding.DecodeString(sigPart)
	if !ok || err1 != nil || err2 != nil {
		return challenge{}, errors.New("malformed challenge")
	}
	mac := hmac.New(sha256.New, b.key)
	mac.Write(payload)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return challenge{}, errors.New("bad challenge signature")
	}
	var c challenge
	if err := json.Unmarshal(payload, &c); err != nil {
		return challenge{}, errors.New("malformed challenge")
	}
	if c.Kind != kind || c.Session != sessionID || time.Now().Unix() > c.Expires {
		return challenge{}, errors.New("the challenge is expired or belongs to another session")
	}
	return c, nil
}

// sameOrigin is the form posts' Origin check: like checkOrigin, but the Origin (or, without
// one, the Referer's origin) must be present and trusted, since these posts always carry the
// session cookie.
func (b *browserProvider) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if u, err := url.Parse(r.Header.Get("Referer")); err == nil && u.Scheme != "" && u.Host != "" {
			origin = u.Scheme + "://" + u.Host
		}
	}
	return origin != "" && origin != "null" && b.s.trustedOrigin(origin)
}

// ---- Consent ----

// consentPage serves GET /api/auth/oauth2/consent: the client's name and the requested scopes
// in plain words, with Allow and Deny.
func (b *browserProvider) consentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sess, user, _, err := b.s.sessions.FromRequest(r)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "login_required", "You are not signed in. Go back to the application and start again.")
		return
	}
	raw := r.URL.Query().Get("consent_challenge")
	c, err := b.open(raw, "consent", sess.ID)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "This consent request is invalid or has expired. Go back to the application and start again.")
		return
	}
	client, err := b.s.store.OIDCClientByID(ctx, c.Client)
	if err != nil || !client.Usable() {
		b.errorPage(w, http.StatusBadRequest, "invalid_client", "The application is not available.")
		return
	}
	q, _ := url.ParseQuery(c.Query)
	oauth.RenderPage(w, http.StatusOK, oauth.PageConsent, oauth.Page{
		Title: "Allow access", Action: oauth.ConsentPath, ClientName: client.Name, Email: user.Email,
		Scopes: oauth.DescribeScopes(strings.Fields(q.Get("scope"))), Challenge: raw,
	})
}

// readPageForm reads the form of a post from one of the provider's own pages (at most 64 KiB),
// which must come from this site; otherwise it answers with the error page and reports false.
func (b *browserProvider) readPageForm(w http.ResponseWriter, r *http.Request) bool {
	if !b.sameOrigin(r) {
		b.errorPage(w, http.StatusForbidden, "access_denied", "This form was not sent from this site.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "The form could not be read.")
		return false
	}
	return true
}

// consentDecision serves POST /api/auth/oauth2/consent: a same-origin post with the page's
// challenge. Accept records the consent and issues the code; deny answers access_denied.
func (b *browserProvider) consentDecision(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !b.readPageForm(w, r) {
		return
	}
	sess, user, _, err := b.s.sessions.FromRequest(r)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "login_required", "You are not signed in. Go back to the application and start again.")
		return
	}
	c, err := b.open(r.PostForm.Get("consent_challenge"), "consent", sess.ID)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "This consent request is invalid or has expired. Go back to the application and start again.")
		return
	}
	// Replay the pending authorization request through fosite: it checks the client and the
	// redirect URI again (a client disabled meanwhile gets the error page).
	areq, err := http.NewRequestWithContext(ctx, http.MethodGet, oauth.AuthorizePath+"?"+c.Query, nil)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "The pending request is invalid.")
		return
	}
	ar, err := b.p.NewAuthorizeRequest(ctx, areq)
	if err != nil {
		b.authorizeError(w, ar, err)
		return
	}
	switch r.PostForm.Get("decision") {
	case "accept":
	case "deny":
		b.authorizeError(w, ar, fosite.ErrAccessDenied.WithHint("The user denied the request."))
		return
	default:
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "Choose Allow or Deny.")
		return
	}
	consent := store.OAuthConsent{UserID: user.ID, ClientID: ar.GetClient().GetID(), Scopes: ar.GetRequestedScopes()}
	client, err := b.s.store.OIDCClientByID(ctx, consent.ClientID)
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	if client.SkipConsent {
		// Asked because of prompt=consent; skipConsent clients keep no consent rows.
		b.grant(ctx, w, ar, sess, user)
		return
	}
	err = b.s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.GrantOAuthConsent(ctx, &consent); err != nil {
			return err
		}
		meta := requestMetaFrom(ctx)
		return tx.AppendAudit(ctx, &store.AuditEntry{
			ActorType: store.ActorUser, ActorID: user.ID, Action: "oauth_consent.grant",
			TargetType: "oidc_client", TargetID: consent.ClientID, OrganizationID: client.OrganizationID, ProjectID: client.ProjectID,
			RequestID: meta.ID, IPAddress: meta.IP, UserAgent: meta.UserAgent,
			Metadata: map[string]any{"scopes": consent.Scopes},
		})
	})
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	b.grant(ctx, w, ar, sess, user)
}

// ---- Userinfo ----

// userinfo serves GET and POST /api/auth/oauth2/userinfo (OpenID Connect Core 5.3): the
// claims of the token's user for the granted scopes.
func (b *browserProvider) userinfo(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	token := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(rest) == "" {
			bearerError(w, http.StatusUnauthorized, "invalid_token", "The Authorization header must carry a Bearer token.")
			return
		}
		token = strings.TrimSpace(rest)
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			bearerError(w, http.StatusBadRequest, "invalid_request", "The body must be a form.")
			return
		}
		if body := r.PostForm.Get("access_token"); body != "" {
			if token != "" {
				bearerError(w, http.StatusBadRequest, "invalid_request", "Send the token once: in the Authorization header or in the body.")
				return
			}
			token = body
		}
	}
	if token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse"`)
		bearerError(w, http.StatusUnauthorized, "invalid_token", "No access token.")
		return
	}
	_, ar, err := b.p.IntrospectToken(ctx, token, fosite.AccessToken, oauth.NewSession(""))
	if err != nil {
		bearerError(w, http.StatusUnauthorized, "invalid_token", "The access token is invalid, expired or revoked.")
		return
	}
	fs, ok := ar.GetSession().(*oauth.Session)
	if !ok || !ar.GetGrantedScopes().Has("openid") || fs.Subject == "" || fs.Subject == ar.GetClient().GetID() {
		bearerError(w, http.StatusUnauthorized, "invalid_token", "The access token was not issued to a signed-in user with the openid scope.")
		return
	}
	user, err := b.s.store.User(ctx, fs.Subject)
	if errors.Is(err, store.ErrNotFound) {
		bearerError(w, http.StatusUnauthorized, "invalid_token", "The token's user no longer exists.")
		return
	}
	if err != nil {
		bearerError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again later.")
		return
	}
	claims, err := b.claims(ctx, ar, fs, user)
	if err != nil {
		bearerError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again later.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(claims)
}

// claims are the userinfo claims by granted scope.
func (b *browserProvider) claims(ctx context.Context, ar fosite.AccessRequester, fs *oauth.Session, user store.User) (map[string]any, error) {
	scopes := ar.GetGrantedScopes()
	out := map[string]any{"sub": user.ID}
	if scopes.Has("profile") {
		out["name"] = user.Name
		out["picture"] = user.Image
		out["updated_at"] = user.UpdatedAt.Unix()
	}
	if scopes.Has("email") {
		out["email"] = user.Email
		out["email_verified"] = user.EmailVerified
	}
	if scopes.Has("organization") {
		var org any
		if fs.OrganizationID != "" {
			o, err := b.s.store.Organization(ctx, fs.OrganizationID)
			m, merr := b.s.store.Member(ctx, fs.OrganizationID, user.ID)
			switch {
			case err == nil && merr == nil:
				org = map[string]string{"id": o.ID, "slug": o.Slug, "role": m.Role}
			case errors.Is(err, store.ErrNotFound) || errors.Is(merr, store.ErrNotFound):
			case err != nil:
				return nil, err
			default:
				return nil, merr
			}
		}
		out["organization"] = org
	}
	if scopes.Has("roles") {
		roles := []string{}
		if c, ok := ar.GetClient().(*oauth.Client); ok {
			bindings, err := b.s.store.ListRoleBindings(ctx, c.ProjectID, store.RoleBindingFilter{
				PrincipalType: store.PrincipalUser, PrincipalID: user.ID, Limit: store.MaxRoleBindingPage})
			if err != nil {
				return nil, err
			}
			now := time.Now()
			for _, rb := range bindings {
				if (rb.ExpiresAt == nil || rb.ExpiresAt.After(now)) && !slices.Contains(roles, rb.RoleSlug) {
					roles = append(roles, rb.RoleSlug)
				}
			}
			slices.Sort(roles)
		}
		out["roles"] = roles
	}
	if scopes.Has("entitlements") || scopes.Has("billing") {
		// Both are the subject's state in the client's project (every environment).
		c, _ := ar.GetClient().(*oauth.Client)
		projectID := ""
		if c != nil {
			projectID = c.ProjectID
		}
		if scopes.Has("entitlements") {
			ents, err := b.s.entitlementClaims(ctx, projectID, user.ID)
			if err != nil {
				return nil, err
			}
			out["entitlements"] = ents
		}
		if scopes.Has("billing") {
			billing, err := b.s.billingClaims(ctx, projectID, user.ID)
			if err != nil {
				return nil, err
			}
			out["billing"] = billing
		}
	}
	return out, nil
}

// bearerError writes an RFC 6750 error: the JSON body and, for 401, WWW-Authenticate.
func bearerError(w http.ResponseWriter, status int, code, description string) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="gatehouse", error=%q, error_description=%q`, code, description))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

// ---- End session ----

// endSession serves GET /api/auth/oauth2/end-session (OpenID Connect RP-Initiated Logout).
func (b *browserProvider) endSession(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	hintSub, hintClient := "", ""
	if hint := q.Get("id_token_hint"); hint != "" {
		var err error
		if hintSub, hintClient, err = b.verifyIDTokenHint(ctx, hint); err != nil {
			hintSub, hintClient = "", ""
		}
	}
	clientID := q.Get("client_id")
	if clientID != "" && hintClient != "" && clientID != hintClient {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "client_id does not match the ID token.")
		return
	}
	if clientID == "" {
		clientID = hintClient
	}
	redirect := q.Get("post_logout_redirect_uri")
	if redirect != "" {
		client, err := b.s.store.OIDCClientByID(ctx, clientID)
		if clientID == "" || err != nil || !client.Usable() || !slices.Contains(client.PostLogoutRedirectURIs, redirect) {
			b.errorPage(w, http.StatusBadRequest, "invalid_request", "The post-logout redirect URI is not registered for this application.")
			return
		}
	}
	sess, user, _, err := b.s.sessions.FromRequest(r)
	signedIn := err == nil
	if signedIn && (hintSub == "" || hintSub != user.ID) {
		// Without a valid hint for this user, ask first.
		ch := b.sign(challenge{Kind: "logout", Session: sess.ID, Client: clientID, Redirect: redirect, State: q.Get("state")})
		oauth.RenderPage(w, http.StatusOK, oauth.PageLogout, oauth.Page{
			Title: "Sign out", Action: oauth.EndSessionPath, Email: user.Email, Challenge: ch})
		return
	}
	if signedIn {
		if err := b.endBrowserSession(ctx, w, sess); err != nil {
			b.errorPage(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again later.")
			return
		}
	}
	b.afterLogout(w, r, redirect, q.Get("state"))
}

// endSessionConfirm serves POST /api/auth/oauth2/end-session: the confirmation page's
// same-origin post with its challenge.
func (b *browserProvider) endSessionConfirm(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !b.readPageForm(w, r) {
		return
	}
	sess, _, _, err := b.s.sessions.FromRequest(r)
	if err != nil {
		// Already signed out.
		http.Redirect(w, r, oauth.EndSessionPath, http.StatusSeeOther)
		return
	}
	c, err := b.open(r.PostForm.Get("logout_challenge"), "logout", sess.ID)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "This sign-out request is invalid or has expired.")
		return
	}
	if err := b.endBrowserSession(ctx, w, sess); err != nil {
		b.errorPage(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again later.")
		return
	}
	b.afterLogout(w, r, c.Redirect, c.State)
}

// endBrowserSession deletes the session and expires its cookies.
func (b *browserProvider) endBrowserSession(ctx context.Context, w http.ResponseWriter, sess store.Session) error {
	err := b.s.store.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteSession(ctx, sess.ID) })
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for _, c := range b.s.sessions.ExpiredCookies() {
		http.SetCookie(w, c)
	}
	return nil
}

// afterLogout sends the browser to the (already validated) post-logout redirect URI with
// state, or shows the signed-out page.
func (b *browserProvider) afterLogout(w http.ResponseWriter, r *http.Request, redirect, state string) {
	w.Header().Set("Cache-Control", "no-store")
	if redirect == "" {
		if r.Method == http.MethodPost {
			http.Redirect(w, r, oauth.EndSessionPath, http.StatusSeeOther)
			return
		}
		oauth.RenderPage(w, http.StatusOK, oauth.PageSignedOut, oauth.Page{Title: "Signed out"})
		return
	}
	u, err := url.Parse(redirect)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "The post-logout redirect URI is invalid.")
		return
	}
	if state != "" {
		qv := u.Query()
		qv.Set("state", state)
		u.RawQuery = qv.Encode()
	}
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}

// ---- Sign-in form posts ----

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

// verifyIDTokenHint checks an id_token_hint: an RS256 JWS signed by a published key (kid),
// issued here. It may have expired (OpenID Connect RP-Initiated Logout 1.0, section 2). It
// returns the subject and the client (azp, else the single audience).
func (b *browserProvider) verifyIDTokenHint(ctx context.Context, raw string) (subject, clientID string, err error) {
	jws, err := jose.ParseSigned(raw)
	if err != nil || len(jws.Signatures) != 1 || jws.Signatures[0].Header.Algorithm != oauth.SigningAlgorithm {
		return "", "", errors.New("malformed id token")
	}
	set, err := b.s.signingKeys.JWKS(ctx)
	if err != nil {
		return "", "", err
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) == 0 {
		return "", "", errors.New("unknown signing key")
	}
	payload, err := jws.Verify(keys[0].Key)
	if err != nil {
		return "", "", err
	}
	var claims struct {
		Iss string          `json:"iss"`
		Sub string          `json:"sub"`
		Azp string          `json:"azp"`
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Iss != b.p.Issuer() || claims.Sub == "" {
		return "", "", errors.New("not an id token of this issuer")
	}
	clientID = claims.Azp
	if clientID == "" {
		var one string
		var many []string
		if json.Unmarshal(claims.Aud, &one) == nil {
			clientID = one
		} else if json.Unmarshal(claims.Aud, &many) == nil && len(many) == 1 {
			clientID = many[0]
		}
	}
	return claims.Sub, clientID, nil
}
