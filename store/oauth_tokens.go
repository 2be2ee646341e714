package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Kinds of OAuthToken rows: what fosite stores for the OAuth 2.1 / OpenID Connect provider.
const (
	OAuthCode    = "code"    // an authorization code
	OAuthPKCE    = "pkce"    // the PKCE request of an authorization code
	OAuthOIDC    = "oidc"    // the OpenID Connect request of an authorization code
	OAuthAccess  = "access"  // an access token
	OAuthRefresh = "refresh" // a refresh token
)

// OAuthToken is one stored code or token of the OAuth provider, keyed by (Kind, Signature).
// RequestID names the grant it belongs to (shared by a code, the tokens it gave and their
// rotations). The store does not interpret Scopes, GrantedScopes, RequestedAudience,
// GrantedAudience (JSON arrays), Form (url-encoded) or Session (JSON): package oauth encodes
// them. Active is false for a used code and a rotated or revoked refresh token.
// AccessSignature is the access token issued with a refresh token ("" otherwise).
//
// ClientVersion, when not 0, makes the write conditional, in the same statement: the row is
// written only if client ClientID is still at that version (OIDCClientAuth.Version: any change
// to the client's row moves it) and usable (not disabled, its project and organization not
// archived); otherwise nothing is written and ErrClientChanged is returned. It lets a client
// read on an earlier request authenticate this one (oauth/kept_clients.go).
type OAuthToken struct {
	Kind              string
	Signature         string
	RequestID         string
	ClientID          string
	Subject           string
	Active            bool
	Scopes            string
	GrantedScopes     string
	RequestedAudience string
	GrantedAudience   string
	Form              string
	Session           []byte
	AccessSignature   string
	RequestedAt       time.Time
	ExpiresAt         time.Time
	ClientVersion     int64
}

func validOAuthKind(kind string) bool {
	switch kind {
	case OAuthCode, OAuthPKCE, OAuthOIDC, OAuthAccess, OAuthRefresh:
		return true
	}
	return false
}

// Begin opens a transaction on the writer connection and returns it; the caller must end it
// with Commit or Rollback. It exists for callers that cannot run their work inside a closure
// (fosite's storage.Transactional); everything else uses InTx. The rules of InTx apply: on
// SQLite the transaction holds the only writer connection until it ends, so never call InTx or
// Begin while holding one.
func (s *Store) Begin(ctx context.Context) (*Tx, error) {
	sqlTx, err := s.writer.BeginTxx(ctx, nil)
	if err != nil {
		return nil, wrapError("begin", err)
	}
	return &Tx{reads: reads{q: sqlTx, store: s}, tx: sqlTx, store: s}, nil
}

// Commit commits a transaction opened by Begin. A commit that breaks a uniqueness constraint
// wraps ErrConflict.
func (tx *Tx) Commit() error {
	if err := tx.tx.Commit(); err != nil {
		return wrapError("commit", err)
	}
	tx.prepareLater(context.Background())
	return nil
}

// Rollback rolls back a transaction opened by Begin. Rolling back a transaction that has
// already ended is not an error.
func (tx *Tx) Rollback() error {
	if err := tx.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return wrapError("rollback", err)
	}
	return nil
}

// CreateOAuthToken inserts t. RequestedAt and ExpiresAt are stored in UTC at microsecond
// precision. It returns ErrInvalid for an unknown Kind or an empty Signature, RequestID or
// ClientID, ErrConflict when (Kind, Signature) exists, and ErrClientChanged when t.ClientVersion
// is set and the client is no longer at it.
func (tx *Tx) CreateOAuthToken(ctx context.Context, t OAuthToken) error {
	query, args, err := oauthTokenInsertArgs(t)
	if err != nil {
		return err
	}
	res, err := tx.exec(ctx, query, args...)
	return oauthTokenInserted(t, res, err)
}

// oauthTokenInserted is the outcome of an insert of t: the statement's error wrapped, or
// ErrClientChanged for a conditional insert (ClientVersion) that wrote nothing.
func oauthTokenInserted(t OAuthToken, res sql.Result, err error) error {
	if err != nil {
		return wrapError("create oauth token", err)
	}
	if t.ClientVersion == 0 {
		return nil
	}
	if n, err := res.RowsAffected(); err != nil {
		return wrapError("create oauth token", err)
	} else if n == 0 {
		return fmt.Errorf("store: create oauth token: %w", ErrClientChanged)
	}
	return nil
}

// oauthTokenInsert inserts one OAuthToken row, its arguments from oauthTokenInsertArgs.
const oauthTokenInsert = `INSERT INTO oauth_tokens (kind, signature, request_id, client_id, subject, active,
		scopes, granted_scopes, requested_audience, granted_audience, form, session, access_signature,
		requested_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// oauthClientUsable is the condition a conditional token row is written under, completed by the
// client's id and version: its client is at the version read and usable (not disabled, its
// project and organization not archived), read through primary keys as OIDCClientByID reads
// them. oauthTokenInsertConfirmed and postgresTokenTake both use it.
const oauthClientUsable = `SELECT 1 FROM oidc_clients c
		JOIN projects p ON p.id = c.project_id
		JOIN organizations o ON o.id = p.organization_id
		WHERE c.disabled_at IS NULL AND p.archived_at IS NULL AND o.archived_at IS NULL`

// oauthTokenInsertConfirmed inserts one OAuthToken row if its client (the 16th argument) is
// still at version (the 17th) and usable (oauthClientUsable).
const oauthTokenInsertConfirmed = `INSERT INTO oauth_tokens (kind, signature, request_id, client_id, subject, active,
		scopes, granted_scopes, requested_audience, granted_audience, form, session, access_signature,
		requested_at, expires_at) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
	WHERE EXISTS (` + oauthClientUsable + ` AND c.id = ? AND c.version = ?)`

// validOAuthToken is CreateOAuthToken's check of t: ErrInvalid without a known kind, a
// signature, a request id and a client id.
func validOAuthToken(t OAuthToken) error {
	if !validOAuthKind(t.Kind) || t.Signature == "" || t.RequestID == "" || t.ClientID == "" {
		return fmt.Errorf("store: create oauth token: %w: kind, signature, request id and client id are required", ErrInvalid)
	}
	return nil
}

// storedValues returns what is stored of t's session and times: an empty session for none, the
// times in UTC to the microsecond (the resolution both databases keep).
func (t OAuthToken) storedValues() (session []byte, requestedAt, expiresAt sqlTime) {
	if session = t.Session; session == nil {
		session = []byte{}
	}
	return session, sqlTime(t.RequestedAt.UTC().Truncate(time.Microsecond)),
		sqlTime(t.ExpiresAt.UTC().Truncate(time.Microsecond))
}

// oauthTokenInsertArgs checks t (validOAuthToken) and returns the statement that inserts it
// (conditional when t.ClientVersion is set) with its arguments.
func oauthTokenInsertArgs(t OAuthToken) (string, []any, error) {
	if err := validOAuthToken(t); err != nil {
		return "", nil, err
	}
	session, requestedAt, expiresAt := t.storedValues()
	args := []any{t.Kind, t.Signature, t.RequestID, t.ClientID,
		t.Subject, t.Active, t.Scopes, t.GrantedScopes, t.RequestedAudience, t.GrantedAudience, t.Form,
		session, t.AccessSignature, requestedAt, expiresAt}
	if t.ClientVersion == 0 {
		return oauthTokenInsert, args, nil
	}
	return oauthTokenInsertConfirmed, append(args, t.ClientID, t.ClientVersion), nil
}

const oauthTokenColumns = `kind, signature, request_id, client_id, subject, active, scopes, granted_scopes,
	requested_audience, granted_audience, form, session, access_signature, requested_at, expires_at`

type oauthTokenRow struct {
	Kind              string  `db:"kind"`
	Signature         string  `db:"signature"`
	RequestID         string  `db:"request_id"`
	ClientID          string  `db:"client_id"`
	Subject           string  `db:"subject"`
	Active            bool    `db:"active"`
	Scopes            string  `db:"scopes"`
	GrantedScopes     string  `db:"granted_scopes"`
	RequestedAudience string  `db:"requested_audience"`
	GrantedAudience   string  `db:"granted_audience"`
	Form              string  `db:"form"`
	Session           []byte  `db:"session"`
	AccessSignature   string  `db:"access_signature"`
	RequestedAt       sqlTime `db:"requested_at"`
	ExpiresAt         sqlTime `db:"expires_at"`
}

// OAuthToken returns the row (kind, signature), active or not. On a Store it reads a prepared
// statement on the read pool; on a Tx it reads inside the transaction. It returns ErrNotFound
// when there is no such row.
func (r reads) OAuthToken(ctx context.Context, kind, signature string) (OAuthToken, error) {
	const op = "oauth token"
	const query = "SELECT " + oauthTokenColumns + " FROM oauth_tokens WHERE kind = ? AND signature = ?"
	var row oauthTokenRow
	var err error
	if _, inTx := r.q.(*sqlx.Tx); inTx || r.store == nil {
		err = r.q.GetContext(ctx, &row, r.q.Rebind(query), kind, signature)
	} else {
		stmt, perr := r.store.readStatement(ctx, query)
		if perr != nil {
			return OAuthToken{}, wrapError(op, perr)
		}
		err = stmt.GetContext(ctx, &row, kind, signature)
	}
	if err != nil {
		return OAuthToken{}, wrapError(op, err)
	}
	return row.token(), nil
}

// oauthTokenConfirmedQuery reads a row (kind, signature) only while the client of the request
// (its id and version) and the row's own client are usable (oauthClientUsable).
const oauthTokenConfirmedQuery = "SELECT " + oauthTokenColumns + ` FROM oauth_tokens t
	WHERE t.kind = ? AND t.signature = ?
	AND EXISTS (` + oauthClientUsable + ` AND c.id = ? AND c.version = ?)
	AND EXISTS (` + oauthClientUsable + ` AND c.id = t.client_id)`

// OAuthTokenConfirmed returns the row (kind, signature), active or not, like OAuthToken, in the
// same statement confirming that client clientID is still at version and usable (not disabled,
// its project and organization not archived) and that the row's own client is usable. It
// returns ErrNotFound when there is no such row or either confirmation fails: a request served
// from a kept copy of clientID (oauth's kept clients) then answers again from a fresh read.
func (s *Store) OAuthTokenConfirmed(ctx context.Context, kind, signature, clientID string, version int64) (OAuthToken, error) {
	const op = "oauth token"
	stmt, err := s.readStatement(ctx, oauthTokenConfirmedQuery)
	if err != nil {
		return OAuthToken{}, wrapError(op, err)
	}
	var row oauthTokenRow
	if err := stmt.GetContext(ctx, &row, kind, signature, clientID, version); err != nil {
		return OAuthToken{}, wrapError(op, err)
	}
	return row.token(), nil
}

// token is the OAuthToken of a row.
func (row oauthTokenRow) token() OAuthToken {
	return OAuthToken{
		Kind: row.Kind, Signature: row.Signature, RequestID: row.RequestID, ClientID: row.ClientID,
		Subject: row.Subject, Active: row.Active, Scopes: row.Scopes, GrantedScopes: row.GrantedScopes,
		RequestedAudience: row.RequestedAudience, GrantedAudience: row.GrantedAudience, Form: row.Form,
		Session: row.Session, AccessSignature: row.AccessSignature,
		RequestedAt: time.Time(row.RequestedAt), ExpiresAt: time.Time(row.ExpiresAt),
	}
}

// DeleteOAuthToken deletes the row (kind, signature). It returns ErrNotFound when there is no
// such row.
func (tx *Tx) DeleteOAuthToken(ctx context.Context, kind, signature string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM oauth_tokens WHERE kind = ? AND signature = ?"),
		kind, signature)
	return oneRowAffected("delete oauth token", res, err)
}

// DeactivateOAuthToken marks the row (kind, signature) inactive, keeping it. It reports
// whether this call changed it: false when it was already inactive, which is how two
// concurrent redemptions of one code (or rotations of one refresh token) tell the winner from
// the loser. It returns ErrNotFound when there is no such row.
func (tx *Tx) DeactivateOAuthToken(ctx context.Context, kind, signature string) (bool, error) {
	const op = "deactivate oauth token"
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(
		"UPDATE oauth_tokens SET active = ? WHERE kind = ? AND signature = ? AND active = ?"),
		false, kind, signature, true)
	if err != nil {
		return false, wrapError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrapError(op, err)
	}
	if n == 1 {
		return true, nil
	}
	if _, err := tx.OAuthToken(ctx, kind, signature); err != nil {
		return false, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	return false, nil
}

// DeactivateOAuthTokensByRequest marks every row of kind of grant requestID inactive and
// returns how many it changed. No match is 0, not an error.
func (tx *Tx) DeactivateOAuthTokensByRequest(ctx context.Context, kind, requestID string) (int64, error) {
	return tx.execCount(ctx, "deactivate oauth tokens",
		"UPDATE oauth_tokens SET active = ? WHERE kind = ? AND request_id = ? AND active = ?",
		false, kind, requestID, true)
}

// DeleteOAuthTokensByRequest deletes every row of kind of grant requestID and returns how
// many it deleted. No match is 0, not an error.
func (tx *Tx) DeleteOAuthTokensByRequest(ctx context.Context, kind, requestID string) (int64, error) {
	return tx.execCount(ctx, "delete oauth tokens",
		"DELETE FROM oauth_tokens WHERE kind = ? AND request_id = ?", kind, requestID)
}

// execCount runs query (with ? placeholders) in tx and returns how many rows it affected;
// errors are wrapped with op.
func (tx *Tx) execCount(ctx context.Context, op, query string, args ...any) (int64, error) {
	res, err := tx.exec(ctx, query, args...)
	if err != nil {
		return 0, wrapError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrapError(op, err)
	}
	return n, nil
}

// DeleteExpiredOAuthTokens deletes at most limit rows (of any kind) whose ExpiresAt is before
// before, and returns how many it deleted. Callers pass a time well in the past (a used code
// or a rotated refresh token is kept so that its replay is recognised; once it has expired a
// replay is refused anyway) and call again while it returns limit.
func (tx *Tx) DeleteExpiredOAuthTokens(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("store: delete expired oauth tokens: %w: limit must be positive", ErrInvalid)
	}
	return tx.execCount(ctx, "delete expired oauth tokens",
		`DELETE FROM oauth_tokens WHERE (kind, signature) IN
			(SELECT kind, signature FROM oauth_tokens WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`,
		sqlTime(before.UTC().Truncate(time.Microsecond)), limit)
}

// OAuthGrantRevocation counts what RevokeUserOAuthGrants changed.
type OAuthGrantRevocation struct {
	// RefreshTokens is how many active refresh tokens were made inactive.
	RefreshTokens int64
	// AccessTokens is how many access tokens were deleted.
	AccessTokens int64
	// Codes is how many unused authorization codes were marked used.
	Codes int64
	// Consents is how many consents were deleted (0 when they were kept).
	Consents int64
}

// RevokeUserOAuthGrants ends every OAuth grant user userID holds, with every client, in tx:
//
//   - its active refresh tokens become inactive, kept rather than deleted, so that a later use
//     is recognised as reuse and refused (invalid_grant);
//   - its access tokens are deleted: they introspect inactive and userinfo refuses them,
//     although their JWTs have not expired;
//   - its unused authorization codes are marked used: a redemption fails (invalid_grant);
//   - unless keepConsents, its consents are deleted, so the next authorization asks again
//     (skipConsent clients never ask); with keepConsents they stay and the user can sign in
//     to the same clients without being asked.
//
// Rows of other users are untouched, and so are client-credentials tokens (their subject is a
// client id, never a user id). It is for the events that must end what a user authorized
// before them (a password change that ends the other sessions, an account taken over by
// another sign-in); deleting the user is DeleteSubject. An unknown user, or one without
// grants, changes nothing and is not an error. It returns ErrInvalid for an empty userID.
func (tx *Tx) RevokeUserOAuthGrants(ctx context.Context, userID string, keepConsents bool) (OAuthGrantRevocation, error) {
	const op = "revoke user oauth grants"
	var r OAuthGrantRevocation
	if userID == "" {
		return r, fmt.Errorf("store: %s: %w: a user id is required", op, ErrInvalid)
	}
	var err error
	if r.RefreshTokens, err = tx.execCount(ctx, op,
		"UPDATE oauth_tokens SET active = ? WHERE subject = ? AND kind = ? AND active = ?",
		false, userID, OAuthRefresh, true); err != nil {
		return r, err
	}
	if r.AccessTokens, err = tx.execCount(ctx, op,
		"DELETE FROM oauth_tokens WHERE subject = ? AND kind = ?", userID, OAuthAccess); err != nil {
		return r, err
	}
	if r.Codes, err = tx.execCount(ctx, op,
		"UPDATE oauth_tokens SET active = ? WHERE subject = ? AND kind = ? AND active = ?",
		false, userID, OAuthCode, true); err != nil {
		return r, err
	}
	if !keepConsents {
		if r.Consents, err = tx.execCount(ctx, op, "DELETE FROM oauth_consents WHERE user_id = ?", userID); err != nil {
			return r, err
		}
	}
	return r, nil
}
