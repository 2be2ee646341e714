package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"

	jose "github.com/go-jose/go-jose/v3"

	"github.com/gatehouse-dev/gatehouse/store"
)

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
		client, err := b.store.OIDCClientByID(ctx, clientID)
		if clientID == "" || err != nil || !client.Usable() || !slices.Contains(client.PostLogoutRedirectURIs, redirect) {
			b.errorPage(w, http.StatusBadRequest, "invalid_request", "The post-logout redirect URI is not registered for this application.")
			return
		}
	}
	sess, user, _, err := b.sessions.FromRequest(r)
	signedIn := err == nil
	if signedIn && (hintSub == "" || hintSub != user.ID) {
		// Without a valid hint for this user, ask first.
		ch := b.sign(challenge{Kind: "logout", Session: sess.ID, Client: clientID, Redirect: redirect, State: q.Get("state")})
		b.render(w, http.StatusOK, PageLogout, Page{
			Title: "Sign out", Action: EndSessionPath, Email: user.Email, Challenge: ch})
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
	sess, _, _, err := b.sessions.FromRequest(r)
	if err != nil {
		// Already signed out.
		http.Redirect(w, r, EndSessionPath, http.StatusSeeOther)
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
	err := b.store.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteSession(ctx, sess.ID) })
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for _, c := range b.sessions.ExpiredCookies() {
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
			http.Redirect(w, r, EndSessionPath, http.StatusSeeOther)
			return
		}
		b.render(w, http.StatusOK, PageSignedOut, Page{Title: "Signed out"})
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

// verifyIDTokenHint checks an id_token_hint: an ID token (see below) in an RS256 JWS signed by
// a published key (kid), issued here. It may have expired (OpenID Connect RP-Initiated Logout
// 1.0, section 2). It returns the subject and the client (azp, else the single audience).
//
// The same keys sign the access tokens, and a user's access token from the code flow has the
// same iss, sub and aud (the client) as their ID token; but it travels to every resource server
// the client calls, so accepting it here would let any of them sign the user out unasked. The
// discriminator is the explicit type (RFC 8725 section 3.11): the ID token strategy writes the
// header typ "JWT", the access token strategy "at+jwt" (RFC 9068 section 2.1, which exists to
// keep one kind of token from passing for another), so only typ JWT is accepted. The claims
// agree and are checked too, so that the distinction survives a change of either header: RFC
// 9068 section 2.2 makes client_id REQUIRED in every access token (the client-credentials ones
// included), while an ID token has none (OpenID Connect Core section 2), nor a scope.
func (b *browserProvider) verifyIDTokenHint(ctx context.Context, raw string) (subject, clientID string, err error) {
	jws, err := jose.ParseSigned(raw)
	if err != nil || len(jws.Signatures) != 1 || CheckSigningAlgorithm(jws.Signatures[0].Header.Algorithm) != nil {
		return "", "", errors.New("malformed id token")
	}
	if typ, _ := jws.Signatures[0].Protected.ExtraHeaders[jose.HeaderType].(string); typ != "JWT" {
		return "", "", errors.New("not an id token: typ is not JWT")
	}
	set, err := b.keys.JWKS(ctx)
	if err != nil {
		return "", "", err
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) == 0 {
		return "", "", errors.New("unknown signing key")
	}
	if keys[0].Algorithm != jws.Signatures[0].Header.Algorithm {
		return "", "", errors.New("the signing key has another algorithm")
	}
	payload, err := jws.Verify(keys[0].Key)
	if err != nil {
		return "", "", err
	}
	var claims struct {
		Iss      string          `json:"iss"`
		Sub      string          `json:"sub"`
		Azp      string          `json:"azp"`
		Aud      json.RawMessage `json:"aud"`
		ClientID *string         `json:"client_id"`
		Scope    *string         `json:"scope"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Iss != b.p.Issuer() || claims.Sub == "" {
		return "", "", errors.New("not an id token of this issuer")
	}
	if claims.ClientID != nil || claims.Scope != nil {
		return "", "", errors.New("not an id token: it has access token claims")
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
