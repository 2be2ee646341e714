package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// APIKeyPublicIDLen is the length of an API key's public id, and
// APIKeySecretHashLen the length of the stored secret hash (HMAC-SHA256).
const (
	APIKeyPublicIDLen   = 12
	APIKeySecretHashLen = 32
)

// ServiceAccount is a machine caller of one project. Scopes are the
// control-plane permission strings (or "*") that every key of the account
// carries; the store does not interpret them. EnvironmentID, when set, pins
// the account to that environment of the project. DisabledAt is set while the
// account is disabled. Keys are the account's API keys, oldest first (never
// nil on reads).
type ServiceAccount struct {
	ID            string
	ProjectID     string
	Name          string
	Description   *string
	EnvironmentID *string
	Scopes        []string
	DisabledAt    *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Keys          []APIKey
}

// APIKey is an API key of a service account as the store reads it back: its
// public id and states, never secret material.
//
// SecretHash is input only: CreateServiceAccount and AddAPIKey store it (it
// must be HMAC-SHA256 of the key's secret, APIKeySecretHashLen bytes). No read
// fills it: ListServiceAccounts, ServiceAccount, SetServiceAccountDisabled and
// RevokeAPIKey leave it nil, and only APIKeyByPublicID returns a stored hash.
type APIKey struct {
	ID               string
	ServiceAccountID string
	PublicID         string
	SecretHash       []byte
	ExpiresAt        *time.Time
	RevokedAt        *time.Time
	LastUsedAt       *time.Time
	CreatedAt        time.Time
}

// APIKeyAuth is what authenticating an API key needs, read by
// APIKeyByPublicID in one query: the key's stored secret hash and states, its
// service account, and the tenancy above it. EnvironmentID is "" unless the
// account is pinned to an environment. APIKeyUsable judges it.
type APIKeyAuth struct {
	KeyID                string
	PublicID             string
	SecretHash           []byte
	ExpiresAt            *time.Time
	RevokedAt            *time.Time
	LastUsedAt           *time.Time
	AccountID            string
	AccountName          string
	ProjectID            string
	OrganizationID       string
	EnvironmentID        string
	Scopes               []string
	DisabledAt           *time.Time
	ProjectArchived      bool
	OrganizationArchived bool
}

// CreateServiceAccount inserts sa and, when firstKey is not nil, its first
// API key. It fills in an empty sa.ID (NewID("sa")), sets sa.CreatedAt and
// sa.UpdatedAt to Store.Now, clears sa.DisabledAt (a new account is enabled)
// and sets sa.Keys to the new key (or to an empty slice). firstKey is
// completed as AddAPIKey completes a key.
//
// It returns ErrInvalid when ProjectID or Name is empty, Scopes is empty, the
// environment is not one of the project's or the key is malformed (see
// AddAPIKey), ErrNotFound when the project does not exist, and ErrConflict
// when the id or the key's public id is taken.
func (tx *Tx) CreateServiceAccount(ctx context.Context, sa *ServiceAccount, firstKey *APIKey) error {
	const op = "create service account"
	if sa.ProjectID == "" || sa.Name == "" || len(sa.Scopes) == 0 {
		return fmt.Errorf("store: %s: %w: project, name and at least one scope are required", op, ErrInvalid)
	}
	if firstKey != nil {
		if err := validKey(firstKey); err != nil {
			return fmt.Errorf("store: %s: %w", op, err)
		}
	}
	if sa.EnvironmentID != nil {
		var n int
		const query = `SELECT COUNT(*) FROM environments WHERE id = ? AND project_id = ?`
		if err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind(query), *sa.EnvironmentID, sa.ProjectID); err != nil {
			return wrapError(op, err)
		}
		if n == 0 {
			return fmt.Errorf("store: %s: %w: environment %q is not one of project %q", op, ErrInvalid, *sa.EnvironmentID, sa.ProjectID)
		}
	}
	scopes, err := json.Marshal(sa.Scopes)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if sa.ID == "" {
		sa.ID = NewID("sa")
	}
	now := tx.store.Now()
	sa.CreatedAt, sa.UpdatedAt, sa.DisabledAt = now, now, nil

	const insert = `INSERT INTO service_accounts (id, project_id, name, description, environment_id, scopes,
		created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), sa.ID, sa.ProjectID, sa.Name,
		sa.Description, sa.EnvironmentID, string(scopes), sqlTime(now), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}
	sa.Keys = []APIKey{}
	if firstKey != nil {
		if err := tx.insertAPIKey(ctx, op, sa.ID, firstKey, now); err != nil {
			return err
		}
		sa.Keys = append(sa.Keys, publicKey(*firstKey))
	}
	return nil
}

// AddAPIKey adds key k to service account accountID of project projectID. k
// must carry PublicID (APIKeyPublicIDLen characters) and SecretHash
// (APIKeySecretHashLen bytes); ExpiresAt is optional. It fills in an empty
// k.ID (NewID("key")), sets k.ServiceAccountID, k.CreatedAt to Store.Now and
// clears RevokedAt and LastUsedAt. A disabled account may receive keys.
//
// It returns ErrInvalid for a malformed key, ErrNotFound when the project has
// no such account, and ErrConflict when the id or public id is taken.
func (tx *Tx) AddAPIKey(ctx context.Context, projectID, accountID string, k *APIKey) error {
	const op = "add api key"
	if err := validKey(k); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	var n int
	const query = `SELECT COUNT(*) FROM service_accounts WHERE id = ? AND project_id = ?`
	if err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind(query), accountID, projectID); err != nil {
		return wrapError(op, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	return tx.insertAPIKey(ctx, op, accountID, k, tx.store.Now())
}

func validKey(k *APIKey) error {
	if len(k.PublicID) != APIKeyPublicIDLen || len(k.SecretHash) != APIKeySecretHashLen {
		return fmt.Errorf("%w: api key needs a %d-character public id and a %d-byte secret hash",
			ErrInvalid, APIKeyPublicIDLen, APIKeySecretHashLen)
	}
	return nil
}

func (tx *Tx) insertAPIKey(ctx context.Context, op, accountID string, k *APIKey, now time.Time) error {
	if k.ID == "" {
		k.ID = NewID("key")
	}
	k.ServiceAccountID, k.CreatedAt, k.RevokedAt, k.LastUsedAt = accountID, now, nil, nil
	if k.ExpiresAt != nil {
		t := k.ExpiresAt.UTC().Truncate(time.Microsecond)
		k.ExpiresAt = &t
	}
	const insert = `INSERT INTO api_keys (id, service_account_id, public_id, secret_hash, expires_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert),
		k.ID, accountID, k.PublicID, k.SecretHash, nullTime(k.ExpiresAt), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}
	return nil
}

// ListServiceAccounts returns the service accounts of project projectID with
// their keys, oldest first (by CreatedAt, then ID; keys likewise). No match is
// an empty slice, not ErrNotFound.
func (s *Store) ListServiceAccounts(ctx context.Context, projectID string) ([]ServiceAccount, error) {
	return listServiceAccounts(ctx, s.reader, "list service accounts", "a.project_id = ?", projectID)
}

// ServiceAccount returns service account id of project projectID with its
// keys. It returns ErrNotFound when the project has no such account.
func (s *Store) ServiceAccount(ctx context.Context, projectID, id string) (ServiceAccount, error) {
	return getServiceAccount(ctx, s.reader, "service account", projectID, id)
}

// SetServiceAccountDisabled disables (disabled true) or re-enables service
// account id of project projectID, bumps its UpdatedAt and returns it with
// its keys. Disabling keeps an earlier DisabledAt; enabling clears it.
//
// It returns ErrNotFound when the project has no such account.
func (tx *Tx) SetServiceAccountDisabled(ctx context.Context, projectID, id string, disabled bool) (ServiceAccount, error) {
	op, err := tx.setDisabled(ctx, "service_accounts", "service account", projectID, id, disabled)
	if err != nil {
		return ServiceAccount{}, err
	}
	return getServiceAccount(ctx, tx.tx, op, projectID, id)
}

// RevokeAPIKey revokes key keyID of service account accountID of project
// projectID and returns it. Revoking is idempotent: an already revoked key
// keeps its first RevokedAt.
//
// It returns ErrNotFound unless the key belongs to that account of that
// project.
func (tx *Tx) RevokeAPIKey(ctx context.Context, projectID, accountID, keyID string) (APIKey, error) {
	const op = "revoke api key"
	const update = `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?)
		WHERE id = ? AND service_account_id = ?
		AND EXISTS (SELECT 1 FROM service_accounts a WHERE a.id = ? AND a.project_id = ?)`
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(update),
		sqlTime(tx.store.Now()), keyID, accountID, accountID, projectID)
	if err := oneRowAffected(op, res, err); err != nil {
		return APIKey{}, err
	}
	var r apiKeyRow
	query := "SELECT " + apiKeyColumns + " FROM api_keys k WHERE k.id = ?"
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), keyID); err != nil {
		return APIKey{}, wrapError(op, err)
	}
	return r.key(), nil
}

// apiKeyByPublicIDQuery is the authentication lookup: a point query on the
// unique index api_keys_public_id_idx, joined up through primary keys.
const apiKeyByPublicIDQuery = `SELECT k.id AS key_id, k.public_id, k.secret_hash,
		k.expires_at, k.revoked_at, k.last_used_at,
		a.id AS account_id, a.name AS account_name, a.project_id, p.organization_id,
		COALESCE(a.environment_id, '') AS environment_id, a.scopes, a.disabled_at,
		p.archived_at IS NOT NULL AS project_archived,
		o.archived_at IS NOT NULL AS organization_archived
	FROM api_keys k
	JOIN service_accounts a ON a.id = k.service_account_id
	JOIN projects p ON p.id = a.project_id
	JOIN organizations o ON o.id = p.organization_id
	WHERE k.public_id = ?`

// APIKeyByPublicID returns what authenticating the key with the given public
// id needs, with exactly one SQL query on the read path. It is on the path of
// every API-key request. It does not judge the key: revoked, expired and
// disabled keys, and keys of archived projects, are returned with their
// states (see APIKeyUsable). It returns ErrNotFound when no key has that
// public id.
func (s *Store) APIKeyByPublicID(ctx context.Context, publicID string) (APIKeyAuth, error) {
	const op = "api key by public id"
	var r apiKeyAuthRow
	stmt, err := s.readStatement(ctx, apiKeyByPublicIDQuery)
	if err != nil {
		return APIKeyAuth{}, wrapError(op, err)
	}
	// Scanned by position (apiKeyAuthRow.dest), not through sqlx's reflection: this read is on
	// the path of every API-key request.
	if err := stmt.QueryRowContext(ctx, publicID).Scan(r.dest()...); err != nil {
		return APIKeyAuth{}, wrapError(op, err)
	}
	return r.auth(op)
}

// dest is r's fields in the order of apiKeyByPublicIDQuery's columns, for Scan.
func (r *apiKeyAuthRow) dest() []any {
	return []any{&r.KeyID, &r.PublicID, &r.SecretHash, &r.ExpiresAt, &r.RevokedAt, &r.LastUsedAt,
		&r.AccountID, &r.AccountName, &r.ProjectID, &r.OrganizationID, &r.EnvironmentID, &r.Scopes,
		&r.DisabledAt, &r.ProjectArchived, &r.OrganizationArchived}
}

// apiKeyAuthRow is the row of apiKeyByPublicIDQuery (and the key part of
// apiKeyDecisionQuery's rows).
type apiKeyAuthRow struct {
	KeyID                string   `db:"key_id"`
	PublicID             string   `db:"public_id"`
	SecretHash           []byte   `db:"secret_hash"`
	ExpiresAt            *sqlTime `db:"expires_at"`
	RevokedAt            *sqlTime `db:"revoked_at"`
	LastUsedAt           *sqlTime `db:"last_used_at"`
	AccountID            string   `db:"account_id"`
	AccountName          string   `db:"account_name"`
	ProjectID            string   `db:"project_id"`
	OrganizationID       string   `db:"organization_id"`
	EnvironmentID        string   `db:"environment_id"`
	Scopes               string   `db:"scopes"`
	DisabledAt           *sqlTime `db:"disabled_at"`
	ProjectArchived      bool     `db:"project_archived"`
	OrganizationArchived bool     `db:"organization_archived"`
}

func (r apiKeyAuthRow) auth(op string) (APIKeyAuth, error) {
	out := APIKeyAuth{
		KeyID:                r.KeyID,
		PublicID:             r.PublicID,
		SecretHash:           r.SecretHash,
		ExpiresAt:            timePtr(r.ExpiresAt),
		RevokedAt:            timePtr(r.RevokedAt),
		LastUsedAt:           timePtr(r.LastUsedAt),
		AccountID:            r.AccountID,
		AccountName:          r.AccountName,
		ProjectID:            r.ProjectID,
		OrganizationID:       r.OrganizationID,
		EnvironmentID:        r.EnvironmentID,
		DisabledAt:           timePtr(r.DisabledAt),
		ProjectArchived:      r.ProjectArchived,
		OrganizationArchived: r.OrganizationArchived,
	}
	if err := json.Unmarshal([]byte(r.Scopes), &out.Scopes); err != nil {
		return APIKeyAuth{}, fmt.Errorf("store: %s: key %s: scopes: %w", op, r.KeyID, err)
	}
	return out, nil
}

// TouchAPIKey records that key keyID was used at at: LastUsedAt becomes at
// unless it is later already (it never moves back). It is a write; the server
// calls it at most once a minute per key, off the request path. It returns
// ErrNotFound when there is no such key.
func (s *Store) TouchAPIKey(ctx context.Context, keyID string, at time.Time) error {
	const op = "touch api key"
	at = at.UTC().Truncate(time.Microsecond)
	return s.InTx(ctx, func(tx *Tx) error {
		const update = `UPDATE api_keys SET last_used_at = CASE
				WHEN last_used_at IS NULL OR last_used_at < ? THEN ? ELSE last_used_at END
			WHERE id = ?`
		res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(update), sqlTime(at), sqlTime(at), keyID)
		return oneRowAffected(op, res, err)
	})
}

// apiKeyColumns are the columns apiKeyRow scans, qualified with the alias k.
const apiKeyColumns = `k.id, k.service_account_id, k.public_id, k.expires_at, k.revoked_at,
	k.last_used_at, k.created_at`

// apiKeyRow is an api_keys row as listed: no secret hash.
type apiKeyRow struct {
	ID               string   `db:"id"`
	ServiceAccountID string   `db:"service_account_id"`
	PublicID         string   `db:"public_id"`
	ExpiresAt        *sqlTime `db:"expires_at"`
	RevokedAt        *sqlTime `db:"revoked_at"`
	LastUsedAt       *sqlTime `db:"last_used_at"`
	CreatedAt        sqlTime  `db:"created_at"`
}

func (r apiKeyRow) key() APIKey {
	return APIKey{
		ID:               r.ID,
		ServiceAccountID: r.ServiceAccountID,
		PublicID:         r.PublicID,
		ExpiresAt:        timePtr(r.ExpiresAt),
		RevokedAt:        timePtr(r.RevokedAt),
		LastUsedAt:       timePtr(r.LastUsedAt),
		CreatedAt:        time.Time(r.CreatedAt),
	}
}

// publicKey returns k without its secret hash.
func publicKey(k APIKey) APIKey {
	k.SecretHash = nil
	return k
}

// nullTime is the query argument of a nullable timestamp.
func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return sqlTime(*t)
}

// serviceAccountColumns are the columns serviceAccountRow scans, qualified
// with the alias a.
const serviceAccountColumns = `a.id, a.project_id, a.name, a.description, a.environment_id, a.scopes,
	a.disabled_at, a.created_at, a.updated_at`

type serviceAccountRow struct {
	ID            string   `db:"id"`
	ProjectID     string   `db:"project_id"`
	Name          string   `db:"name"`
	Description   *string  `db:"description"`
	EnvironmentID *string  `db:"environment_id"`
	Scopes        string   `db:"scopes"`
	DisabledAt    *sqlTime `db:"disabled_at"`
	CreatedAt     sqlTime  `db:"created_at"`
	UpdatedAt     sqlTime  `db:"updated_at"`
}

func (r serviceAccountRow) account() (ServiceAccount, error) {
	sa := ServiceAccount{
		ID:            r.ID,
		ProjectID:     r.ProjectID,
		Name:          r.Name,
		Description:   r.Description,
		EnvironmentID: r.EnvironmentID,
		DisabledAt:    timePtr(r.DisabledAt),
		CreatedAt:     time.Time(r.CreatedAt),
		UpdatedAt:     time.Time(r.UpdatedAt),
		Keys:          []APIKey{},
	}
	if err := json.Unmarshal([]byte(r.Scopes), &sa.Scopes); err != nil {
		return ServiceAccount{}, fmt.Errorf("service account %s: scopes: %w", r.ID, err)
	}
	return sa, nil
}

func getServiceAccount(ctx context.Context, q querier, op, projectID, id string) (ServiceAccount, error) {
	out, err := listServiceAccounts(ctx, q, op, "a.project_id = ? AND a.id = ?", projectID, id)
	if err != nil {
		return ServiceAccount{}, err
	}
	if len(out) == 0 {
		return ServiceAccount{}, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	return out[0], nil
}

// listServiceAccounts reads the accounts matching where (over the alias a)
// and then their keys: two queries whatever the number of accounts.
func listServiceAccounts(ctx context.Context, q querier, op, where string, args ...any) ([]ServiceAccount, error) {
	var rows []serviceAccountRow
	query := "SELECT " + serviceAccountColumns + " FROM service_accounts a WHERE " + where + " ORDER BY a.created_at, a.id"
	if err := q.SelectContext(ctx, &rows, q.Rebind(query), args...); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]ServiceAccount, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	index := make(map[string]int, len(rows))
	for i, r := range rows {
		sa, err := r.account()
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
		out[i], index[r.ID] = sa, i
	}
	var keys []apiKeyRow
	query = "SELECT " + apiKeyColumns + ` FROM api_keys k JOIN service_accounts a ON a.id = k.service_account_id
		WHERE ` + where + " ORDER BY k.created_at, k.id"
	if err := q.SelectContext(ctx, &keys, q.Rebind(query), args...); err != nil {
		return nil, wrapError(op, err)
	}
	for _, k := range keys {
		if i, ok := index[k.ServiceAccountID]; ok {
			out[i].Keys = append(out[i].Keys, k.key())
		}
	}
	return out, nil
}

// setDisabled disables (disabled true) or re-enables row id of project projectID in table (a
// constant of this package, never input) and bumps its updated_at. Disabling keeps an earlier
// disabled_at; enabling clears it. It returns the operation name for the caller's read-back
// and ErrNotFound when the project has no such row.
func (tx *Tx) setDisabled(ctx context.Context, table, noun, projectID, id string, disabled bool) (string, error) {
	op, set := "enable "+noun, "disabled_at = NULL, updated_at = ?"
	now := sqlTime(tx.store.Now())
	args := []any{now}
	if disabled {
		op, set = "disable "+noun, "disabled_at = COALESCE(disabled_at, ?), updated_at = ?"
		args = append(args, now)
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("UPDATE "+table+" SET "+set+" WHERE id = ? AND project_id = ?"),
		append(args, id, projectID)...)
	return op, oneRowAffected(op, res, err)
}
