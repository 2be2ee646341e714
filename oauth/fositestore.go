package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/openid"
	"github.com/ory/fosite/handler/pkce"
	fositestorage "github.com/ory/fosite/storage"

	"github.com/gatehouse-dev/gatehouse/store"
)

// MaxRefreshGrantAge is the absolute lifetime of a refresh-token family: however often it is
// rotated (each rotation restarts the 30-day idle lifetime, RefreshTokenLifespan), a refresh
// token of a grant made longer ago than this is refused (invalid_grant). The grant time is
// Session.GrantedAt, carried unchanged through every rotation.
const MaxRefreshGrantAge = 90 * 24 * time.Hour

// PurgeGrace is how long a code or token row is kept after it expires: a used code or a
// rotated refresh token stays recognisable (its replay revokes its grant) for this long past
// its expiry, then it is deleted (a replay is refused either way).
const PurgeGrace = 24 * time.Hour

// purgePerWrite is how many long-expired rows each write removes on average (two per row
// written keeps up with any issuing rate). The purge runs on one write in purgeEvery, removing
// purgeEvery × purgePerWrite rows: the same bound for one statement instead of purgeEvery.
const (
	purgePerWrite = 2
	purgeEvery    = 8
)

// FositeStore is fosite's storage over package store: the client manager (OIDC clients) and
// every grant-state interface the composed handlers need, all in the oauth_tokens table.
//
// Contracts fosite relies on (STACK.md):
//   - a used authorization code is invalidated, never deleted: GetAuthorizeCodeSession then
//     returns fosite.ErrInvalidatedAuthorizeCode together with the original request, so that
//     a replay revokes the tokens of the first exchange;
//   - a rotated or revoked refresh token is kept inactive: GetRefreshTokenSession returns
//     fosite.ErrInactiveToken with its request, so that reuse revokes the family;
//   - the handlers' multi-step writes run in one transaction (storage.Transactional): BeginTX
//     puts a *store.Tx in the context and every method uses it while it is there.
//
// A client that is not usable (disabled, or its project or organization archived) does not
// exist for fosite: GetClient returns fosite.ErrNotFound (invalid_client), and so does every
// token read of its tokens (they introspect inactive and refresh no more).
type FositeStore struct {
	st    *store.Store
	clock func() time.Time
	// writes counts stored rows; the purge runs when it is a multiple of purgeEvery.
	writes atomic.Uint64
	// kept are the clients kept between client_credentials requests (kept_clients.go).
	kept *expirable.LRU[string, keptClient]
}

// NewFositeStore returns the storage over st.
func NewFositeStore(st *store.Store) *FositeStore {
	return &FositeStore{st: st, clock: time.Now, kept: newKeptClients()}
}

var (
	_ fosite.ClientManager               = (*FositeStore)(nil)
	_ oauth2.CoreStorage                 = (*FositeStore)(nil)
	_ oauth2.TokenRevocationStorage      = (*FositeStore)(nil)
	_ pkce.PKCERequestStorage            = (*FositeStore)(nil)
	_ openid.OpenIDConnectRequestStorage = (*FositeStore)(nil)
	_ fositestorage.Transactional        = (*FositeStore)(nil)
)

type txKey struct{}

func txFrom(ctx context.Context) *store.Tx {
	tx, _ := ctx.Value(txKey{}).(*store.Tx)
	return tx
}

// BeginTX opens a transaction and returns a context carrying it. Inside a context that already
// carries one it returns ctx unchanged (fosite never nests, but a caller might).
func (f *FositeStore) BeginTX(ctx context.Context) (context.Context, error) {
	if txFrom(ctx) != nil {
		return ctx, nil
	}
	tx, err := f.st.Begin(ctx)
	if err != nil {
		return ctx, fmt.Errorf("oauth: begin: %w", err)
	}
	return context.WithValue(ctx, txKey{}, tx), nil
}

// Commit commits the transaction ctx carries.
func (f *FositeStore) Commit(ctx context.Context) error {
	tx := txFrom(ctx)
	if tx == nil {
		return errors.New("oauth: commit: no transaction in the context")
	}
	return tx.Commit()
}

// Rollback rolls back the transaction ctx carries.
func (f *FositeStore) Rollback(ctx context.Context) error {
	tx := txFrom(ctx)
	if tx == nil {
		return errors.New("oauth: rollback: no transaction in the context")
	}
	return tx.Rollback()
}

// write runs fn in the context's transaction, or in a transaction of its own.
func (f *FositeStore) write(ctx context.Context, fn func(tx *store.Tx) error) error {
	if tx := txFrom(ctx); tx != nil {
		return fn(tx)
	}
	return f.st.InTx(ctx, fn)
}

// read returns one row, inside the context's transaction when there is one. For a request that
// authenticated its client from the kept ones, or read and kept it (keptCaller: introspection),
// the same statement confirms that client at its version, and the row's own client usable.
func (f *FositeStore) read(ctx context.Context, kind, signature string) (store.OAuthToken, error) {
	if tx := txFrom(ctx); tx != nil {
		return tx.OAuthToken(ctx, kind, signature)
	}
	if id, version, ok := keptCaller(ctx); ok {
		return f.st.OAuthTokenConfirmed(ctx, kind, signature, id, version)
	}
	return f.st.OAuthToken(ctx, kind, signature)
}

// ---- Clients ----

// Client is an OIDC client as fosite sees it.
type Client struct {
	fosite.DefaultClient
	// ProjectID is the project the client belongs to.
	ProjectID string
	// IDTokenAlg is the client's id_token_signed_response_alg ("": the current key's).
	IDTokenAlg string
}

// IDTokenSignedResponseAlg is the algorithm the client's ID tokens must be signed with, or ""
// for any (idTokenStrategy).
func (c *Client) IDTokenSignedResponseAlg() string { return c.IDTokenAlg }

var _ fosite.ResponseModeClient = (*Client)(nil)

// GetResponseModes lists the response modes an authorization request may name: query, the
// one discovery advertises. fosite refuses any response_mode sent to a client that does not
// list it, even the default; fragment and form_post stay unsupported_response_mode.
func (c *Client) GetResponseModes() []fosite.ResponseModeType {
	return []fosite.ResponseModeType{fosite.ResponseModeQuery}
}

// clientMemo remembers the clients one protocol request has looked up, so that an
// introspection whose caller is also the token's client reads it once. It lives in the
// request's context (withClientMemo) and dies with the request: a client disabled meanwhile is
// seen by the next request.
type clientMemo struct {
	mu      sync.Mutex
	clients map[string]fosite.Client
	// keep is set for a request that may use the clients kept between requests
	// (withKeptClients, kept_clients.go).
	keep *clientKeeping
}

type clientMemoKey struct{}

// withClientMemo returns ctx with an empty per-request client memo.
func withClientMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, clientMemoKey{}, &clientMemo{clients: map[string]fosite.Client{}})
}

// GetClient returns client id when it exists and is usable; otherwise fosite.ErrNotFound.
// Public clients (native, spa) are fosite public clients with the response type "code" only;
// a client's audience is its own id. A private_key_jwt client is a *KeyClient (a
// fosite.OpenIDConnectClient, which turns on fosite's client assertion checks); every other
// client is a *Client, which fosite lets authenticate with client_secret_basic or
// client_secret_post alike.
func (f *FositeStore) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	memo, _ := ctx.Value(clientMemoKey{}).(*clientMemo)
	if memo != nil {
		memo.mu.Lock()
		c, ok := memo.clients[id]
		memo.mu.Unlock()
		if ok {
			return c, nil
		}
	}
	if c, ok := f.takeKeptClient(memo, id); ok {
		memo.remember(id, c)
		return c, nil
	}
	c, version, err := f.lookupClient(ctx, id)
	if err != nil {
		return nil, err
	}
	if memo != nil {
		memo.remember(id, c)
		f.keepClient(memo, id, c, version)
	}
	return c, nil
}

// remember memoises client id for the rest of the request.
func (m *clientMemo) remember(id string, c fosite.Client) {
	m.mu.Lock()
	m.clients[id] = c
	m.mu.Unlock()
}

// lookupClient reads client id, returning it with the version of its row.
func (f *FositeStore) lookupClient(ctx context.Context, id string) (fosite.Client, int64, error) {
	c, err := f.st.OIDCClientByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, fosite.ErrNotFound.WithDebug("unknown client")
	}
	if err != nil {
		return nil, 0, fmt.Errorf("oauth: get client: %w", err)
	}
	if !c.Usable() {
		return nil, 0, fosite.ErrNotFound.WithDebug("the client is disabled")
	}
	client := &Client{ProjectID: c.ProjectID, IDTokenAlg: c.IDTokenAlg, DefaultClient: fosite.DefaultClient{
		ID: c.ID, Secret: c.SecretHash, RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes,
		ResponseTypes: []string{"code"}, Scopes: c.Scopes, Audience: []string{c.ID}, Public: c.Public(),
	}}
	if c.TokenEndpointAuthMethod != store.OIDCAuthPrivateKeyJWT {
		return client, c.Version, nil
	}
	keys, alg, err := ParseClientJWKS([]byte(c.JWKS))
	if err != nil {
		return nil, 0, fmt.Errorf("oauth: get client %s: %w", c.ID, err)
	}
	return &KeyClient{Client: client, Keys: keys, Alg: alg}, c.Version, nil
}

// ---- Rows ----

// secretFormKeys are removed from a request form before it is stored.
var secretFormKeys = []string{"client_secret", "code", "code_verifier", "refresh_token", "password",
	"client_assertion", "token"}

func (f *FositeStore) create(ctx context.Context, kind, signature, accessSignature string, r fosite.Requester) error {
	if s, ok := r.GetSession().(*Session); ok && s.GrantedAt.IsZero() {
		// The first token of a grant: the absolute refresh lifetime counts from now on.
		s.GrantedAt = r.GetRequestedAt()
		if s.GrantedAt.IsZero() {
			s.GrantedAt = f.clock()
		}
	}
	session, err := json.Marshal(r.GetSession())
	if err != nil {
		return fmt.Errorf("oauth: store %s: session: %w", kind, err)
	}
	form := url.Values{}
	for k, v := range r.GetRequestForm() {
		form[k] = v
	}
	for _, k := range secretFormKeys {
		form.Del(k)
	}
	granted := r.GetGrantedScopes()
	if s, ok := r.GetSession().(*Session); ok && kind == store.OAuthRefresh && s.refreshGrantScopes != nil {
		// A refresh narrowed by its scope parameter: the new refresh token keeps the grant's
		// whole scope (RFC 6749 section 6), the access token has the narrower one.
		granted = s.refreshGrantScopes
	}
	var lists [4]string
	for i, l := range [][]string{r.GetRequestedScopes(), granted, r.GetRequestedAudience(), r.GetGrantedAudience()} {
		if l == nil {
			l = []string{}
		}
		b, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("oauth: store %s: %w", kind, err)
		}
		lists[i] = string(b)
	}
	expires := r.GetSession().GetExpiresAt(tokenTypeOf(kind))
	if expires.IsZero() {
		expires = r.GetRequestedAt().Add(MaxRefreshGrantAge)
	}
	row := store.OAuthToken{
		Kind: kind, Signature: signature, RequestID: r.GetID(), ClientID: r.GetClient().GetID(),
		Subject: r.GetSession().GetSubject(), Active: true, Scopes: lists[0], GrantedScopes: lists[1],
		RequestedAudience: lists[2], GrantedAudience: lists[3], Form: form.Encode(), Session: session,
		AccessSignature: accessSignature, RequestedAt: r.GetRequestedAt(), ExpiresAt: expires,
		ClientVersion: keptClientVersion(ctx, r.GetClient().GetID()),
	}
	// Amortised purge: every purgeEvery-th stored row (the first included) removes up to
	// purgeEvery × purgePerWrite rows that expired more than PurgeGrace ago, so the table
	// stays bounded by what is live (plus the grace) without a background job, at the cost
	// of one statement in a transaction already open, on each replica by what it writes.
	var purge store.TokenPurge
	if (f.writes.Add(1)-1)%purgeEvery == 0 {
		purge = store.TokenPurge{ExpiredBefore: f.clock().Add(-PurgeGrace), Limit: purgeEvery * purgePerWrite}
	}
	tx := txFrom(ctx)
	if tx == nil {
		// A row of its own (a client_credentials access token): stored with the rows of
		// concurrent requests (store.StoreOAuthToken, group commit: one transaction on SQLite,
		// one statement on PostgreSQL), acknowledged once it has committed.
		return f.st.StoreOAuthToken(ctx, row, purge)
	}
	if err := tx.CreateOAuthToken(ctx, row); err != nil || purge.Limit == 0 {
		return err
	}
	_, err = tx.DeleteExpiredOAuthTokens(ctx, purge.ExpiredBefore, purge.Limit)
	return err
}

func tokenTypeOf(kind string) fosite.TokenType {
	switch kind {
	case store.OAuthAccess:
		return fosite.AccessToken
	case store.OAuthRefresh:
		return fosite.RefreshToken
	default:
		return fosite.AuthorizeCode
	}
}

// get reads row (kind, signature) and rebuilds its request, decoding the stored session into
// session (a fresh Session when nil). A missing row, or one whose client is gone or unusable,
// is fosite.ErrNotFound. It does not judge the active flag: the caller does.
func (f *FositeStore) get(ctx context.Context, kind, signature string, session fosite.Session) (*fosite.Request, store.OAuthToken, error) {
	row, err := f.read(ctx, kind, signature)
	if errors.Is(err, store.ErrNotFound) {
		return nil, row, fosite.ErrNotFound
	}
	if err != nil {
		return nil, row, fmt.Errorf("oauth: read %s: %w", kind, err)
	}
	client, err := f.GetClient(ctx, row.ClientID)
	if err != nil {
		return nil, row, err
	}
	if session == nil {
		session = NewSession("")
	}
	if err := json.Unmarshal(row.Session, session); err != nil {
		return nil, row, fmt.Errorf("oauth: read %s: session: %w", kind, err)
	}
	form, err := url.ParseQuery(row.Form)
	if err != nil {
		return nil, row, fmt.Errorf("oauth: read %s: form: %w", kind, err)
	}
	req := &fosite.Request{
		ID: row.RequestID, RequestedAt: row.RequestedAt, Client: client, Form: form, Session: session,
	}
	for _, l := range []struct {
		raw string
		dst *fosite.Arguments
	}{
		{row.Scopes, &req.RequestedScope}, {row.GrantedScopes, &req.GrantedScope},
		{row.RequestedAudience, &req.RequestedAudience}, {row.GrantedAudience, &req.GrantedAudience},
	} {
		if err := json.Unmarshal([]byte(l.raw), l.dst); err != nil {
			return nil, row, fmt.Errorf("oauth: read %s: %w", kind, err)
		}
	}
	return req, row, nil
}

// deleteRow deletes a row; deleting a missing row is not an error (as in fosite's MemoryStore):
// when concurrent redemptions of one code all read its PKCE request, the losers' deletes find
// nothing, and they must fail at the code's invalidation (invalid_grant), not here (a 500).
func (f *FositeStore) deleteRow(ctx context.Context, kind, signature string) error {
	err := f.write(ctx, func(tx *store.Tx) error { return tx.DeleteOAuthToken(ctx, kind, signature) })
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// ---- Authorization codes ----

// CreateAuthorizeCodeSession stores an authorization code.
func (f *FositeStore) CreateAuthorizeCodeSession(ctx context.Context, code string, r fosite.Requester) error {
	return f.create(ctx, store.OAuthCode, code, "", r)
}

// GetAuthorizeCodeSession returns the request of a code; for a used code it returns the
// request together with fosite.ErrInvalidatedAuthorizeCode.
func (f *FositeStore) GetAuthorizeCodeSession(ctx context.Context, code string, session fosite.Session) (fosite.Requester, error) {
	req, row, err := f.get(ctx, store.OAuthCode, code, session)
	if err != nil {
		return nil, err
	}
	if !row.Active {
		return req, fosite.ErrInvalidatedAuthorizeCode
	}
	return req, nil
}

// InvalidateAuthorizeCodeSession marks a code used, keeping it. When the code was already used
// (a concurrent redemption won) it returns fosite.ErrInvalidatedAuthorizeCode, which fails
// this exchange: of concurrent redemptions exactly one succeeds.
func (f *FositeStore) InvalidateAuthorizeCodeSession(ctx context.Context, code string) error {
	return f.write(ctx, func(tx *store.Tx) error {
		changed, err := tx.DeactivateOAuthToken(ctx, store.OAuthCode, code)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fosite.ErrNotFound
		case err != nil:
			return err
		case !changed:
			return fosite.ErrInvalidatedAuthorizeCode
		}
		return nil
	})
}

// ---- PKCE and OpenID Connect requests (keyed by the code's signature) ----

// CreatePKCERequestSession stores the PKCE request of a code.
func (f *FositeStore) CreatePKCERequestSession(ctx context.Context, signature string, r fosite.Requester) error {
	return f.create(ctx, store.OAuthPKCE, signature, "", r)
}

// GetPKCERequestSession returns the PKCE request of a code.
func (f *FositeStore) GetPKCERequestSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := f.get(ctx, store.OAuthPKCE, signature, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeletePKCERequestSession deletes the PKCE request of a code.
func (f *FositeStore) DeletePKCERequestSession(ctx context.Context, signature string) error {
	return f.deleteRow(ctx, store.OAuthPKCE, signature)
}

// CreateOpenIDConnectSession stores the OpenID Connect request of a code.
func (f *FositeStore) CreateOpenIDConnectSession(ctx context.Context, code string, r fosite.Requester) error {
	return f.create(ctx, store.OAuthOIDC, code, "", r)
}

// GetOpenIDConnectSession returns the OpenID Connect request of a code, decoding its session
// into r's; openid.ErrNoSessionFound when there is none.
func (f *FositeStore) GetOpenIDConnectSession(ctx context.Context, code string, r fosite.Requester) (fosite.Requester, error) {
	req, _, err := f.get(ctx, store.OAuthOIDC, code, r.GetSession())
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeleteOpenIDConnectSession deletes the OpenID Connect request of a code.
func (f *FositeStore) DeleteOpenIDConnectSession(ctx context.Context, code string) error {
	return f.deleteRow(ctx, store.OAuthOIDC, code)
}

// ---- Access tokens ----

// CreateAccessTokenSession stores an access token (its JWT signature).
func (f *FositeStore) CreateAccessTokenSession(ctx context.Context, signature string, r fosite.Requester) error {
	return f.create(ctx, store.OAuthAccess, signature, "", r)
}

// GetAccessTokenSession returns the request of an access token; fosite.ErrNotFound when it
// was revoked or its client is no longer usable.
func (f *FositeStore) GetAccessTokenSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, row, err := f.get(ctx, store.OAuthAccess, signature, session)
	if err != nil {
		return nil, err
	}
	if !row.Active {
		return nil, fosite.ErrNotFound
	}
	return req, nil
}

// DeleteAccessTokenSession deletes an access token.
func (f *FositeStore) DeleteAccessTokenSession(ctx context.Context, signature string) error {
	return f.deleteRow(ctx, store.OAuthAccess, signature)
}

// RevokeAccessToken deletes every access token of grant requestID.
func (f *FositeStore) RevokeAccessToken(ctx context.Context, requestID string) error {
	return f.write(ctx, func(tx *store.Tx) error {
		_, err := tx.DeleteOAuthTokensByRequest(ctx, store.OAuthAccess, requestID)
		return err
	})
}

// ---- Refresh tokens ----

// CreateRefreshTokenSession stores a refresh token and the access token issued with it.
func (f *FositeStore) CreateRefreshTokenSession(ctx context.Context, signature, accessSignature string, r fosite.Requester) error {
	return f.create(ctx, store.OAuthRefresh, signature, accessSignature, r)
}

// GetRefreshTokenSession returns the request of a refresh token. A rotated or revoked one
// comes back with fosite.ErrInactiveToken (reuse: fosite revokes the family); one whose grant
// is older than MaxRefreshGrantAge is fosite.ErrNotFound (invalid_grant).
func (f *FositeStore) GetRefreshTokenSession(ctx context.Context, signature string, session fosite.Session) (fosite.Requester, error) {
	req, row, err := f.get(ctx, store.OAuthRefresh, signature, session)
	if err != nil {
		return nil, err
	}
	if !row.Active {
		return req, fosite.ErrInactiveToken
	}
	if s, ok := req.GetSession().(*Session); ok && !s.GrantedAt.IsZero() && f.clock().Sub(s.GrantedAt) > MaxRefreshGrantAge {
		return nil, fosite.ErrNotFound.WithDebug("the refresh grant is older than its absolute lifetime")
	}
	return req, nil
}

// DeleteRefreshTokenSession deletes a refresh token.
func (f *FositeStore) DeleteRefreshTokenSession(ctx context.Context, signature string) error {
	return f.deleteRow(ctx, store.OAuthRefresh, signature)
}

// RevokeRefreshToken marks every refresh token of grant requestID inactive (kept, so that a
// later use is recognised as reuse).
func (f *FositeStore) RevokeRefreshToken(ctx context.Context, requestID string) error {
	return f.write(ctx, func(tx *store.Tx) error {
		_, err := tx.DeactivateOAuthTokensByRequest(ctx, store.OAuthRefresh, requestID)
		return err
	})
}

// RotateRefreshToken retires refresh token signature of grant requestID when it is used:
// marks it (and any other refresh token of the grant) inactive and deletes the grant's access
// tokens; fosite then stores the new pair in the same transaction. When signature was already
// inactive (a concurrent refresh with the same token won) it returns fosite.ErrInactiveToken.
func (f *FositeStore) RotateRefreshToken(ctx context.Context, requestID, signature string) error {
	return f.write(ctx, func(tx *store.Tx) error {
		changed, err := tx.DeactivateOAuthToken(ctx, store.OAuthRefresh, signature)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fosite.ErrNotFound
		case err != nil:
			return err
		case !changed:
			return fosite.ErrInactiveToken
		}
		if _, err := tx.DeactivateOAuthTokensByRequest(ctx, store.OAuthRefresh, requestID); err != nil {
			return err
		}
		_, err = tx.DeleteOAuthTokensByRequest(ctx, store.OAuthAccess, requestID)
		return err
	})
}
