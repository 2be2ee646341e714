package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// OIDC client types. A web client is confidential (it holds a secret); native
// and spa clients are public (no secret, PKCE only).
const (
	OIDCClientWeb    = "web"
	OIDCClientNative = "native"
	OIDCClientSPA    = "spa"
)

// OIDCAuthPrivateKeyJWT is the token endpoint authentication method of a web
// client that signs client assertions with a key of its JWKS (RFC 7523).
const OIDCAuthPrivateKeyJWT = "private_key_jwt"

// OIDCClientSecretHashLen is the length of a stored client secret hash
// (HMAC-SHA256).
const OIDCClientSecretHashLen = 32

// ErrNoClientSecret is returned when a secret is set on a public client. It
// wraps ErrInvalid.
var ErrNoClientSecret = fmt.Errorf("%w: public clients have no client secret", ErrInvalid)

// ErrKeyClientSecret is returned when a secret is set on a private_key_jwt
// client. It wraps ErrInvalid.
var ErrKeyClientSecret = fmt.Errorf("%w: private_key_jwt clients have no client secret", ErrInvalid)

// OIDCClient is an OAuth 2.1 / OpenID Connect client of one project. ID is
// its OAuth client_id. RedirectURIs, PostLogoutRedirectURIs, GrantTypes and
// Scopes keep the order they were registered in (never nil on reads); the
// store does not interpret them. DisabledAt is set while the client is
// disabled.
//
// SecretHash is HMAC-SHA256 of a web client's secret (OIDCClientSecretHashLen
// bytes) and nil for a public client. It is input to CreateOIDCClient; of the
// reads only OIDCClientByID returns it, every other read leaves it nil.
type OIDCClient struct {
	ID                     string
	ProjectID              string
	Name                   string
	Type                   string
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	GrantTypes             []string
	Scopes                 []string
	SkipConsent            bool
	SecretHash             []byte
	// TokenEndpointAuthMethod is "" for the methods the type implies (a secret for web, none
	// for public clients) or OIDCAuthPrivateKeyJWT for a web client that authenticates with
	// a JWT signed by one of the keys of JWKS.
	TokenEndpointAuthMethod string
	// JWKS is the JSON Web Key Set (public keys) of a private_key_jwt client, "" otherwise.
	JWKS string
	// RequirePAR refuses the client's authorization requests that were not pushed (RFC 9126).
	RequirePAR bool
	// IDTokenAlg is the client's id_token_signed_response_alg: one of SigningAlgorithms, or ""
	// for the algorithm of whichever key signs now.
	IDTokenAlg string
	DisabledAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Public reports whether c is a public client (native or spa): no secret.
func (c OIDCClient) Public() bool { return c.Type != OIDCClientWeb }

// OIDCClientAuth is what authenticating a client at the protocol routes needs,
// read by OIDCClientByID in one query: the client with its SecretHash, and the
// tenancy above it.
type OIDCClientAuth struct {
	OIDCClient
	OrganizationID       string
	ProjectArchived      bool
	OrganizationArchived bool
	// Version is the client row's version, which any change to the row moves (a trigger,
	// migration 38): a token row written with it (OAuthToken.ClientVersion) is written only
	// while the client is as read here.
	Version int64
}

// Usable reports whether the client may take part in a protocol exchange: not
// disabled, and neither its project nor its organization archived. (Whether
// its secret matches is the caller's check.)
func (a OIDCClientAuth) Usable() bool {
	return a.DisabledAt == nil && !a.ProjectArchived && !a.OrganizationArchived
}

// CreateOIDCClient inserts c. It fills in an empty c.ID (NewID("cli")), nil
// PostLogoutRedirectURIs as empty, sets c.CreatedAt and c.UpdatedAt to
// Store.Now and clears c.DisabledAt (a new client is enabled). c.SecretHash is
// stored, then cleared from c.
//
// It returns ErrInvalid when ProjectID or Name is empty, Type is not one of
// web, native and spa, RedirectURIs, GrantTypes or Scopes is empty, a web
// client lacks a OIDCClientSecretHashLen-byte SecretHash, a public client
// carries one (ErrNoClientSecret) or asks for SkipConsent; ErrNotFound when
// the project does not exist; ErrConflict when the id is taken.
func (tx *Tx) CreateOIDCClient(ctx context.Context, c *OIDCClient) error {
	const op = "create oidc client"
	if err := validOIDCClient(c); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if c.PostLogoutRedirectURIs == nil {
		c.PostLogoutRedirectURIs = []string{}
	}
	var lists [4]string
	for i, l := range [][]string{c.RedirectURIs, c.PostLogoutRedirectURIs, c.GrantTypes, c.Scopes} {
		b, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("store: %s: %w", op, err)
		}
		lists[i] = string(b)
	}
	if c.ID == "" {
		c.ID = NewID("cli")
	}
	now := tx.store.Now()
	c.CreatedAt, c.UpdatedAt, c.DisabledAt = now, now, nil
	var hash any
	if c.SecretHash != nil {
		hash = c.SecretHash
	}
	var jwks any
	if c.JWKS != "" {
		jwks = c.JWKS
	}
	const insert = `INSERT INTO oidc_clients (id, project_id, name, type, redirect_uris,
		post_logout_redirect_uris, grant_types, scopes, skip_consent, secret_hash,
		token_endpoint_auth_method, jwks, require_par, id_token_signed_response_alg, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), c.ID, c.ProjectID, c.Name, c.Type,
		lists[0], lists[1], lists[2], lists[3], c.SkipConsent, hash,
		c.TokenEndpointAuthMethod, jwks, c.RequirePAR, c.IDTokenAlg, sqlTime(now), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}
	c.SecretHash = nil
	return nil
}

func validOIDCClient(c *OIDCClient) error {
	switch {
	case c.ProjectID == "" || c.Name == "":
		return fmt.Errorf("%w: project and name are required", ErrInvalid)
	case c.Type != OIDCClientWeb && c.Type != OIDCClientNative && c.Type != OIDCClientSPA:
		return fmt.Errorf("%w: unknown client type %q", ErrInvalid, c.Type)
	case len(c.RedirectURIs) == 0 || len(c.GrantTypes) == 0 || len(c.Scopes) == 0:
		return fmt.Errorf("%w: at least one redirect uri, grant type and scope are required", ErrInvalid)
	case c.Public() && c.SecretHash != nil:
		return ErrNoClientSecret
	case c.Public() && c.SkipConsent:
		return fmt.Errorf("%w: public clients may not skip consent", ErrInvalid)
	case !c.Public() && len(c.SecretHash) != OIDCClientSecretHashLen:
		return fmt.Errorf("%w: a web client needs a %d-byte secret hash", ErrInvalid, OIDCClientSecretHashLen)
	case c.TokenEndpointAuthMethod != "" && c.TokenEndpointAuthMethod != OIDCAuthPrivateKeyJWT:
		return fmt.Errorf("%w: unknown token endpoint auth method %q", ErrInvalid, c.TokenEndpointAuthMethod)
	case (c.TokenEndpointAuthMethod == OIDCAuthPrivateKeyJWT) != (c.JWKS != ""):
		return fmt.Errorf("%w: a private_key_jwt client, and only it, has a jwks", ErrInvalid)
	case c.TokenEndpointAuthMethod == OIDCAuthPrivateKeyJWT && c.Public():
		return fmt.Errorf("%w: private_key_jwt is for web clients", ErrInvalid)
	case c.IDTokenAlg != "" && !slices.Contains(SigningAlgorithms, c.IDTokenAlg):
		return fmt.Errorf("%w: unknown id token signing algorithm %q", ErrInvalid, c.IDTokenAlg)
	}
	return nil
}

// ListOIDCClients returns the OIDC clients of project projectID, oldest first
// (by CreatedAt, then ID), without secret hashes. No match is an empty slice,
// not ErrNotFound.
func (s *Store) ListOIDCClients(ctx context.Context, projectID string) ([]OIDCClient, error) {
	const op = "list oidc clients"
	var rows []oidcClientRow
	query := "SELECT " + oidcClientColumns + " FROM oidc_clients c WHERE c.project_id = ? ORDER BY c.created_at, c.id"
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), projectID); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]OIDCClient, len(rows))
	for i, r := range rows {
		c, err := r.client()
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		out[i] = c
	}
	return out, nil
}

// OIDCClient returns client id of project projectID without its secret hash.
// It returns ErrNotFound when the project has no such client.
func (s *Store) OIDCClient(ctx context.Context, projectID, id string) (OIDCClient, error) {
	return getOIDCClient(ctx, s.reader, "oidc client", projectID, id)
}

// SetOIDCClientDisabled disables (disabled true) or re-enables client id of
// project projectID, bumps its UpdatedAt and returns it. Disabling keeps an
// earlier DisabledAt; enabling clears it.
//
// It returns ErrNotFound when the project has no such client.
func (tx *Tx) SetOIDCClientDisabled(ctx context.Context, projectID, id string, disabled bool) (OIDCClient, error) {
	op, err := tx.setDisabled(ctx, "oidc_clients", "oidc client", projectID, id, disabled)
	if err != nil {
		return OIDCClient{}, err
	}
	return getOIDCClient(ctx, tx.tx, op, projectID, id)
}

// SetOIDCClientSecretHash replaces the secret hash of web client id of project
// projectID with hash (OIDCClientSecretHashLen bytes), bumps its UpdatedAt and
// returns it (without the hash). The previous secret stops matching at once.
// A disabled client may be given a new secret and stays disabled.
//
// It returns ErrInvalid for a malformed hash, ErrNotFound when the project has
// no such client and ErrNoClientSecret when the client is public.
func (tx *Tx) SetOIDCClientSecretHash(ctx context.Context, projectID, id string, hash []byte) (OIDCClient, error) {
	const op = "rotate oidc client secret"
	if len(hash) != OIDCClientSecretHashLen {
		return OIDCClient{}, fmt.Errorf("store: %s: %w: the secret hash must be %d bytes", op, ErrInvalid, OIDCClientSecretHashLen)
	}
	c, err := getOIDCClient(ctx, tx.tx, op, projectID, id)
	if err != nil {
		return OIDCClient{}, err
	}
	if c.Public() {
		return OIDCClient{}, fmt.Errorf("store: %s: %w", op, ErrNoClientSecret)
	}
	if c.TokenEndpointAuthMethod == OIDCAuthPrivateKeyJWT {
		return OIDCClient{}, fmt.Errorf("store: %s: %w", op, ErrKeyClientSecret)
	}
	const update = `UPDATE oidc_clients SET secret_hash = ?, updated_at = ? WHERE id = ? AND project_id = ?`
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(update), hash, sqlTime(tx.store.Now()), id, projectID)
	if err := oneRowAffected(op, res, err); err != nil {
		return OIDCClient{}, err
	}
	return getOIDCClient(ctx, tx.tx, op, projectID, id)
}

// oidcClientByIDQuery is the protocol routes' client lookup: a point query on
// the primary key, joined up through primary keys.
const oidcClientByIDQuery = "SELECT " + oidcClientColumns + `, c.secret_hash, c.version, p.organization_id,
		p.archived_at IS NOT NULL AS project_archived,
		o.archived_at IS NOT NULL AS organization_archived
	FROM oidc_clients c
	JOIN projects p ON p.id = c.project_id
	JOIN organizations o ON o.id = p.organization_id
	WHERE c.id = ?`

// OIDCClientByID returns client clientID (its OAuth client_id) with its
// secret hash and tenancy, whichever project it belongs to, in one SQL query:
// the lookup the OAuth provider makes for every client authentication. It
// does not judge the client: disabled clients and clients of archived
// projects are returned with their states (see OIDCClientAuth.Usable). It
// returns ErrNotFound when there is no such client, without a query for an id
// that is not ValidText (protocol requests carry client ids unvalidated).
func (s *Store) OIDCClientByID(ctx context.Context, clientID string) (OIDCClientAuth, error) {
	const op = "oidc client by id"
	if !ValidText(clientID) {
		return OIDCClientAuth{}, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	var r struct {
		oidcClientRow
		SecretHash           []byte `db:"secret_hash"`
		Version              int64  `db:"version"`
		OrganizationID       string `db:"organization_id"`
		ProjectArchived      bool   `db:"project_archived"`
		OrganizationArchived bool   `db:"organization_archived"`
	}
	stmt, err := s.readStatement(ctx, oidcClientByIDQuery)
	if err != nil {
		return OIDCClientAuth{}, wrapError(op, err)
	}
	if err := stmt.GetContext(ctx, &r, clientID); err != nil {
		return OIDCClientAuth{}, wrapError(op, err)
	}
	c, err := r.client()
	if err != nil {
		return OIDCClientAuth{}, fmt.Errorf("store: %s: %w", op, err)
	}
	if len(r.SecretHash) > 0 {
		c.SecretHash = r.SecretHash
	}
	return OIDCClientAuth{OIDCClient: c, OrganizationID: r.OrganizationID,
		ProjectArchived: r.ProjectArchived, OrganizationArchived: r.OrganizationArchived, Version: r.Version}, nil
}

// oidcClientColumns are the columns oidcClientRow scans, qualified with the
// alias c: everything but the secret hash.
const oidcClientColumns = `c.id, c.project_id, c.name, c.type, c.redirect_uris, c.post_logout_redirect_uris,
	c.grant_types, c.scopes, c.skip_consent, c.token_endpoint_auth_method, c.jwks, c.require_par,
	c.id_token_signed_response_alg, c.disabled_at, c.created_at, c.updated_at`

type oidcClientRow struct {
	ID                      string         `db:"id"`
	ProjectID               string         `db:"project_id"`
	Name                    string         `db:"name"`
	Type                    string         `db:"type"`
	RedirectURIs            string         `db:"redirect_uris"`
	PostLogoutRedirectURIs  string         `db:"post_logout_redirect_uris"`
	GrantTypes              string         `db:"grant_types"`
	Scopes                  string         `db:"scopes"`
	SkipConsent             bool           `db:"skip_consent"`
	TokenEndpointAuthMethod string         `db:"token_endpoint_auth_method"`
	JWKS                    sql.NullString `db:"jwks"`
	RequirePAR              bool           `db:"require_par"`
	IDTokenAlg              string         `db:"id_token_signed_response_alg"`
	DisabledAt              *sqlTime       `db:"disabled_at"`
	CreatedAt               sqlTime        `db:"created_at"`
	UpdatedAt               sqlTime        `db:"updated_at"`
}

func (r oidcClientRow) client() (OIDCClient, error) {
	c := OIDCClient{
		ID: r.ID, ProjectID: r.ProjectID, Name: r.Name, Type: r.Type, SkipConsent: r.SkipConsent,
		TokenEndpointAuthMethod: r.TokenEndpointAuthMethod, JWKS: r.JWKS.String, RequirePAR: r.RequirePAR,
		IDTokenAlg: r.IDTokenAlg, DisabledAt: timePtr(r.DisabledAt), CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt),
	}
	for _, l := range []struct {
		name, raw string
		dst       *[]string
	}{
		{"redirect uris", r.RedirectURIs, &c.RedirectURIs},
		{"post-logout redirect uris", r.PostLogoutRedirectURIs, &c.PostLogoutRedirectURIs},
		{"grant types", r.GrantTypes, &c.GrantTypes},
		{"scopes", r.Scopes, &c.Scopes},
	} {
		if err := json.Unmarshal([]byte(l.raw), l.dst); err != nil {
			return OIDCClient{}, fmt.Errorf("oidc client %s: %s: %w", r.ID, l.name, err)
		}
		if *l.dst == nil {
			*l.dst = []string{}
		}
	}
	return c, nil
}

func getOIDCClient(ctx context.Context, q querier, op, projectID, id string) (OIDCClient, error) {
	var r oidcClientRow
	query := "SELECT " + oidcClientColumns + " FROM oidc_clients c WHERE c.project_id = ? AND c.id = ?"
	if err := q.GetContext(ctx, &r, q.Rebind(query), projectID, id); err != nil {
		return OIDCClient{}, wrapError(op, err)
	}
	c, err := r.client()
	if err != nil {
		return OIDCClient{}, fmt.Errorf("store: %s: %w", op, err)
	}
	return c, nil
}

// UpdateOIDCClient changes client id of project projectID in one transaction:
// it reads the client (without its secret hash), lets change edit it, and
// writes back Name, RedirectURIs, PostLogoutRedirectURIs, GrantTypes, Scopes,
// SkipConsent, JWKS and RequirePAR, bumping UpdatedAt. Type,
// TokenEndpointAuthMethod, the secret and DisabledAt are not written (change
// may not alter them). An error from change is returned as is and nothing is
// written. The client as stored is returned.
//
// It returns ErrNotFound when the project has no such client, and ErrInvalid
// when the result breaks a rule of CreateOIDCClient (empty name or lists, a
// public client skipping consent, a jwks on a client without private_key_jwt
// or none on one with it).
func (tx *Tx) UpdateOIDCClient(ctx context.Context, projectID, id string, change func(*OIDCClient) error) (OIDCClient, error) {
	const op = "update oidc client"
	c, err := getOIDCClient(ctx, tx.tx, op, projectID, id)
	if err != nil {
		return OIDCClient{}, err
	}
	before := c
	if err := change(&c); err != nil {
		return OIDCClient{}, err
	}
	switch {
	case c.Type != before.Type || c.TokenEndpointAuthMethod != before.TokenEndpointAuthMethod:
		return OIDCClient{}, fmt.Errorf("store: %s: %w: type and authentication method are fixed", op, ErrInvalid)
	case c.Name == "" || len(c.RedirectURIs) == 0 || len(c.GrantTypes) == 0 || len(c.Scopes) == 0:
		return OIDCClient{}, fmt.Errorf("store: %s: %w: name, a redirect uri, a grant type and a scope are required", op, ErrInvalid)
	case c.Public() && c.SkipConsent:
		return OIDCClient{}, fmt.Errorf("store: %s: %w: public clients may not skip consent", op, ErrInvalid)
	case (c.TokenEndpointAuthMethod == OIDCAuthPrivateKeyJWT) != (c.JWKS != ""):
		return OIDCClient{}, fmt.Errorf("store: %s: %w: a private_key_jwt client, and only it, has a jwks", op, ErrInvalid)
	}
	if c.PostLogoutRedirectURIs == nil {
		c.PostLogoutRedirectURIs = []string{}
	}
	var lists [4]string
	for i, l := range [][]string{c.RedirectURIs, c.PostLogoutRedirectURIs, c.GrantTypes, c.Scopes} {
		b, err := json.Marshal(l)
		if err != nil {
			return OIDCClient{}, fmt.Errorf("store: %s: %w", op, err)
		}
		lists[i] = string(b)
	}
	var jwks any
	if c.JWKS != "" {
		jwks = c.JWKS
	}
	const update = `UPDATE oidc_clients SET name = ?, redirect_uris = ?, post_logout_redirect_uris = ?,
		grant_types = ?, scopes = ?, skip_consent = ?, jwks = ?, require_par = ?, id_token_signed_response_alg = ?,
		updated_at = ? WHERE id = ? AND project_id = ?`
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(update), c.Name, lists[0], lists[1], lists[2], lists[3],
		c.SkipConsent, jwks, c.RequirePAR, c.IDTokenAlg, sqlTime(tx.store.Now()), id, projectID)
	if err := oneRowAffected(op, res, err); err != nil {
		return OIDCClient{}, err
	}
	return getOIDCClient(ctx, tx.tx, op, projectID, id)
}
