package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/ory/fosite"
)

// The provider's token-side endpoints. Each is an http.Handler func that server mounts on its
// protocol route; every body is fosite's (RFC 6749 errors: {"error", "error_description"}).

// maxFormBytes bounds a protocol request body.
const maxFormBytes = 64 << 10

// clientAuthError rewrites a client-authentication failure as RFC 6749 invalid_client (401)
// and adds WWW-Authenticate: Basic (RFC 6749 section 5.2).
//
// A request with a client assertion whose error is not an RFC 6749 error failed the
// assertion's time claims (fosite returns the JWT library's plain "Token is expired", "Token
// used before issued" or "Token is not valid yet"): that is invalid_client too, not a 500.
func clientAuthError(w http.ResponseWriter, r *http.Request, err error) error {
	if err == nil {
		return nil
	}
	var rfcErr *fosite.RFC6749Error
	if !errors.As(err, &rfcErr) && r.PostForm.Get("client_assertion_type") != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="gatehouse", charset="UTF-8"`)
		return fosite.ErrInvalidClient.WithHint("The client assertion has expired or is not valid yet.").WithWrap(err)
	}
	rfc := fosite.ErrorToRFC6749Error(err)
	if rfc.ErrorField == fosite.ErrJTIKnown.ErrorField {
		// A replayed client assertion: fosite says jti_known, RFC 7523 section 3 and OpenID
		// Connect Core section 9 make any failed client authentication invalid_client.
		w.Header().Set("WWW-Authenticate", `Basic realm="gatehouse", charset="UTF-8"`)
		return fosite.ErrInvalidClient.WithHint("The client assertion's jti was used before.").WithWrap(err)
	}
	if rfc.ErrorField == fosite.ErrInvalidClient.ErrorField || errors.Is(err, fosite.ErrRequestUnauthorized) {
		w.Header().Set("WWW-Authenticate", `Basic realm="gatehouse", charset="UTF-8"`)
		if rfc.ErrorField != fosite.ErrInvalidClient.ErrorField {
			return fosite.ErrInvalidClient.WithWrap(err).WithDebug(rfc.GetDescription())
		}
	}
	return err
}

// bothClientAuthMethods reports whether r authenticates its client twice: an Authorization
// header and a client_secret in the body (RFC 6749 section 2.3: one method per request).
func bothClientAuthMethods(r *http.Request) bool {
	_, _, basic := r.BasicAuth()
	return basic && r.PostForm.Get("client_secret") != ""
}

// parseForm reads the url-encoded body (at most maxFormBytes).
func parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return fosite.ErrInvalidRequest.WithHint("The request body must be a form (application/x-www-form-urlencoded).")
	}
	return nil
}

// grantTypes are the grants the token endpoint knows; any other is unsupported_grant_type
// (fosite itself would answer invalid_request).
var grantTypes = func() map[string]bool {
	m := make(map[string]bool, len(Grants))
	for _, g := range Grants {
		m[g] = true
	}
	return m
}()

// Token serves POST /api/auth/oauth2/token: the authorization_code, refresh_token and
// client_credentials grants. Clients authenticate with client_secret_basic or
// client_secret_post (both at once is invalid_request); public clients send only client_id.
// The response carries Cache-Control: no-store. A client-credentials token's subject is the
// client id (cli_…), which never collides with a user id (usr_…); its audience is the
// requested audience (which must be among the client's) or, by default, the client id.
func (p *Provider) Token(w http.ResponseWriter, r *http.Request) {
	r, ok := p.readClientRequest(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	if gt := r.PostForm.Get("grant_type"); gt != "" && !grantTypes[gt] {
		p.WriteAccessError(ctx, w, nil, fosite.ErrUnsupportedGrantType.WithHint(
			"Supported grant types: authorization_code, refresh_token and client_credentials."))
		return
	}
	// A client_credentials request may be served from a client kept from an earlier request
	// (kept_clients.go); when that fails, it is answered from a fresh read of the client.
	attempt := ctx
	if r.PostForm.Get("grant_type") == GrantClientCredentials {
		attempt = withKeptClients(ctx)
	}
	ar, resp, err := p.accessResponse(attempt, w, r)
	if err != nil && p.store.answerAgain(attempt, err) {
		w.Header().Del("WWW-Authenticate") // set by clientAuthError for the first answer
		ar, resp, err = p.accessResponse(withClientMemo(ctx), w, r)
	}
	if err != nil {
		p.WriteAccessError(ctx, w, ar, err)
		return
	}
	p.WriteAccessResponse(ctx, w, ar, resp)
}

// accessResponse checks the token request r and issues its response, with ctx (carrying the
// request's client memo); an error is what the token endpoint answers, in RFC 6749 terms.
func (p *Provider) accessResponse(ctx context.Context, w http.ResponseWriter, r *http.Request) (fosite.AccessRequester, fosite.AccessResponder, error) {
	session := NewSession("")
	ar, err := p.NewAccessRequest(ctx, r, session)
	if err != nil {
		if ar != nil && ar.GetClient() != nil && ar.GetClient().IsPublic() && ar.GetGrantTypes().ExactOne(GrantClientCredentials) {
			// fosite says invalid_grant; RFC 6749 section 5.2 calls this unauthorized_client.
			err = fosite.ErrUnauthorizedClient.WithHint("Public clients may not use the client_credentials grant.").WithWrap(err)
		}
		return ar, nil, clientAuthError(w, r, err)
	}
	if ar.GetGrantTypes().ExactOne(GrantClientCredentials) {
		client := ar.GetClient()
		session.Subject, session.ClientID = client.GetID(), client.GetID()
		session.GrantedAt = ar.GetRequestedAt()
		for _, scope := range ar.GetRequestedScopes() {
			ar.GrantScope(scope)
		}
		if len(ar.GetRequestedAudience()) == 0 {
			ar.GrantAudience(client.GetID())
		}
		for _, aud := range ar.GetRequestedAudience() {
			ar.GrantAudience(aud)
		}
	}
	resp, err := p.NewAccessResponse(ctx, ar)
	if err != nil {
		switch {
		case errors.Is(err, fosite.ErrInvalidatedAuthorizeCode):
			// A concurrent redemption of the same code won (FositeStore.InvalidateAuthorizeCodeSession);
			// fosite reports it as server_error.
			err = fosite.ErrInvalidGrant.WithHint("The authorization code has already been used.").WithWrap(err)
		case ar.GetGrantTypes().ExactOne(GrantRefreshToken) &&
			(errors.Is(err, fosite.ErrInactiveToken) || errors.Is(err, fosite.ErrNotFound)):
			// A concurrent refresh with the same token rotated it first (FositeStore.RotateRefreshToken
			// finds it inactive), or a reuse detected meanwhile deleted it (not found): that is reuse
			// too, so the family goes, as fosite does for a sequential reuse (which it answers
			// invalid_grant; for this race it would say invalid_request).
			if rerr := p.revokeFamily(ctx, ar.GetID()); rerr != nil {
				err = rerr
				break
			}
			err = fosite.ErrInvalidGrant.WithHint("The refresh token has already been used.").WithWrap(err)
		}
		return ar, nil, err
	}
	return ar, resp, nil
}

// revokeFamily revokes every refresh and access token of grant requestID, in one transaction.
func (p *Provider) revokeFamily(ctx context.Context, requestID string) error {
	tctx, err := p.store.BeginTX(ctx)
	if err != nil {
		return err
	}
	if err := p.store.RevokeRefreshToken(tctx, requestID); err != nil {
		_ = p.store.Rollback(tctx)
		return err
	}
	if err := p.store.RevokeAccessToken(tctx, requestID); err != nil {
		_ = p.store.Rollback(tctx)
		return err
	}
	return p.store.Commit(tctx)
}

// Introspect serves POST /api/auth/oauth2/introspect (RFC 7662). The caller authenticates as a
// client with client_secret_basic; a failure is 401 invalid_client. An unknown, expired,
// revoked or malformed token, one whose client is disabled, or one issued to a client of
// another project answers exactly {"active":false}.
func (p *Provider) Introspect(w http.ResponseWriter, r *http.Request) {
	if err := parseForm(w, r); err != nil {
		p.WriteIntrospectionError(r.Context(), w, err)
		return
	}
	// A caller authenticating with HTTP Basic may be served from a client kept from an earlier
	// request (kept_clients.go): the token is then read on condition that the caller is still at
	// the kept version; when that fails, the request is answered from a fresh read.
	ctx := withClientMemo(r.Context())
	if _, _, basic := r.BasicAuth(); basic {
		ctx = withKeptClients(r.Context())
	}
	resp, err := p.NewIntrospectionRequest(ctx, r.WithContext(ctx), NewSession(""))
	if err != nil && p.store.answerAgain(ctx, err) {
		ctx = withClientMemo(r.Context())
		resp, err = p.NewIntrospectionRequest(ctx, r.WithContext(ctx), NewSession(""))
	}
	switch {
	case err == nil:
	case errors.Is(err, fosite.ErrInactiveToken):
		writeInactive(w)
		return
	case errors.Is(err, fosite.ErrRequestUnauthorized):
		p.WriteAccessError(ctx, w, nil, clientAuthError(w, r, err))
		return
	case errors.Is(err, fosite.ErrInvalidRequest):
		p.WriteAccessError(ctx, w, nil, err)
		return
	default:
		writeInactive(w)
		return
	}
	if !p.sameProject(ctx, r, resp.GetAccessRequester().GetClient()) {
		// A client sees only its own project's tokens: another project's are unknown to it.
		writeInactive(w)
		return
	}
	p.WriteIntrospectionResponse(ctx, w, resp)
}

// sameProject reports whether the client that authenticated r (HTTP Basic; fosite has checked
// it) belongs to the project of tokenClient.
func (p *Provider) sameProject(ctx context.Context, r *http.Request, tokenClient fosite.Client) bool {
	id, _, ok := r.BasicAuth()
	if !ok {
		return false
	}
	if unescaped, err := url.QueryUnescape(id); err == nil {
		id = unescaped
	}
	caller, err := p.store.GetClient(ctx, id)
	if err != nil {
		return false
	}
	a, b := ProjectOf(caller), ProjectOf(tokenClient)
	return a != "" && a == b
}

// writeInactive writes the one body an inactive token gets: {"active":false}.
func writeInactive(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Active bool `json:"active"`
	}{})
}

// Revoke serves POST /api/auth/oauth2/revoke (RFC 7009). The client authenticates as at the
// token endpoint. Revoking a refresh token revokes the access tokens of its grant too; an
// unknown or already revoked token is 200 with an empty body; a token of another client is
// 400 unauthorized_client and stays active.
func (p *Provider) Revoke(w http.ResponseWriter, r *http.Request) {
	r, ok := p.readClientRequest(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	// fosite's WriteRevocationResponse answers 200 to a token of another client
	// (unauthorized_client) and to a storage failure (temporarily_unavailable); both are
	// errors here, with their RFC 6749 status.
	if err := p.NewRevocationRequest(ctx, r); err != nil {
		p.WriteAccessError(ctx, w, nil, clientAuthError(w, r, err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// readClientRequest prepares a client-authenticated request (token, introspection, revocation):
// a per-request client memo in its context, its form parsed, and one client authentication
// method at most. On failure it has written the RFC 6749 error and reports false.
func (p *Provider) readClientRequest(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	ctx := withClientMemo(r.Context())
	r = r.WithContext(ctx)
	if err := parseForm(w, r); err != nil {
		p.WriteAccessError(ctx, w, nil, err)
		return r, false
	}
	if bothClientAuthMethods(r) {
		p.WriteAccessError(ctx, w, nil, fosite.ErrInvalidRequest.WithHint(
			"The client authenticated with both the Authorization header and client_secret in the body; use one."))
		return r, false
	}
	return r, true
}

// PushedAuthorize serves POST /api/auth/oauth2/par (RFC 9126): the client authenticates as at
// the token endpoint (a public client sends its client_id), its authorization request is
// checked as /authorize would (client, redirect URI, scopes, response type) and stored, and
// the answer is 201 {"request_uri", "expires_in"}. The request_uri is used once, by the same
// client, within expires_in (PARLifespan). PKCE and the other parameters /authorize requires
// are checked when the request_uri is used.
func (p *Provider) PushedAuthorize(w http.ResponseWriter, r *http.Request) {
	r, ok := p.readClientRequest(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	ar, err := p.NewPushedAuthorizeRequest(ctx, r)
	if err != nil {
		p.WritePushedAuthorizeError(ctx, w, ar, clientAuthError(w, r, err))
		return
	}
	resp, err := p.NewPushedAuthorizeResponse(ctx, ar, NewSession(""))
	if err != nil {
		p.WritePushedAuthorizeError(ctx, w, ar, err)
		return
	}
	p.WritePushedAuthorizeResponse(ctx, w, ar, resp)
}
