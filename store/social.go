package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Social sign-in: the single-use flow states and the linked provider accounts
// (rows of accounts whose provider_id is a social provider).

// CreateSocialState records a started social sign-in of provider whose state
// hashes (SHA-256) to the stored id, until expiresAt, and sweeps a few expired
// states.
func (s *Store) CreateSocialState(ctx context.Context, state, provider string, expiresAt time.Time) error {
	const op = "create social state"
	return s.InTx(ctx, func(tx *Tx) error {
		if err := tx.sweep(ctx, "social_states", "id", tx.store.Now()); err != nil {
			return wrapError(op, err)
		}
		const insert = `INSERT INTO social_states (id, provider, expires_at) VALUES (?, ?, ?)`
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), sha256Hex(state), provider, sqlTime(expiresAt)); err != nil {
			return wrapError(op, err)
		}
		return nil
	})
}

// ConsumeSocialState deletes the state of a social sign-in of provider. It
// returns ErrNotFound when there is none (never started, already consumed, or
// of another provider) or it has expired: of concurrent callbacks with one
// state exactly one succeeds.
func (s *Store) ConsumeSocialState(ctx context.Context, state, provider string) error {
	const op = "consume social state"
	const del = `DELETE FROM social_states WHERE id = ? AND provider = ? AND expires_at > ?`
	res, err := s.writer.ExecContext(ctx, s.writer.Rebind(del), sha256Hex(state), provider, sqlTime(s.Now()))
	return oneRowAffected(op, res, err)
}

// LinkedAccount is a row of accounts: how a user signs in. ProviderID is
// CredentialProvider (email and password; AccountID is the user id) or a social
// provider ("github", "google"; AccountID is the provider's user id). Scopes
// are the scopes the provider granted (none for credentials).
type LinkedAccount struct {
	ID         string
	UserID     string
	ProviderID string
	AccountID  string
	Scopes     []string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

type linkedAccountRow struct {
	ID         string  `db:"id"`
	UserID     string  `db:"user_id"`
	ProviderID string  `db:"provider_id"`
	AccountID  string  `db:"account_id"`
	Scope      string  `db:"scope"`
	CreatedAt  sqlTime `db:"created_at"`
	UpdatedAt  sqlTime `db:"updated_at"`
}

func (r linkedAccountRow) account() LinkedAccount {
	scopes := []string{}
	for _, sc := range strings.Split(r.Scope, ",") {
		if sc = strings.TrimSpace(sc); sc != "" {
			scopes = append(scopes, sc)
		}
	}
	return LinkedAccount{ID: r.ID, UserID: r.UserID, ProviderID: r.ProviderID, AccountID: r.AccountID,
		Scopes: scopes, CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt)}
}

const linkedAccountColumns = `id, user_id, provider_id, account_id, scope, created_at, updated_at`

// LinkedAccounts returns the accounts of user userID, oldest first. No match is
// an empty slice.
func (s *Store) LinkedAccounts(ctx context.Context, userID string) ([]LinkedAccount, error) {
	var rows []linkedAccountRow
	q := `SELECT ` + linkedAccountColumns + ` FROM accounts WHERE user_id = ? ORDER BY created_at, id`
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(q), userID); err != nil {
		return nil, wrapError("linked accounts", err)
	}
	out := make([]LinkedAccount, len(rows))
	for i, r := range rows {
		out[i] = r.account()
	}
	return out, nil
}

// AccountByProvider returns the account of provider providerID with the
// provider's user id accountID, in the transaction. It returns ErrNotFound
// when there is none.
func (tx *Tx) AccountByProvider(ctx context.Context, providerID, accountID string) (LinkedAccount, error) {
	var r linkedAccountRow
	q := `SELECT ` + linkedAccountColumns + ` FROM accounts WHERE provider_id = ? AND account_id = ?`
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(q), providerID, accountID); err != nil {
		return LinkedAccount{}, wrapError("account by provider", err)
	}
	return r.account(), nil
}

// UserByEmailTx returns the user with email (normalised first), in the
// transaction. It returns ErrNotFound when there is none.
func (tx *Tx) UserByEmailTx(ctx context.Context, email string) (User, error) {
	var r userRow
	q := `SELECT ` + userColumns + ` FROM users u WHERE u.email = ?`
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(q), NormalizeEmail(email)); err != nil {
		return User{}, wrapError("user by email", err)
	}
	return r.user(), nil
}

// LinkAccount links the account accountID of social provider providerID to
// user userID with the granted scopes and returns it. It returns ErrInvalid
// for the credential provider or empty ids, ErrConflict when that provider
// account is linked already, ErrNotFound when the user does not exist.
func (tx *Tx) LinkAccount(ctx context.Context, userID, providerID, accountID string, scopes []string) (LinkedAccount, error) {
	const op = "link account"
	if providerID == "" || providerID == CredentialProvider || accountID == "" || userID == "" {
		return LinkedAccount{}, fmt.Errorf("store: %s: %w: a social provider, its account id and a user are required", op, ErrInvalid)
	}
	now := tx.store.Now()
	a := LinkedAccount{ID: NewID("acc"), UserID: userID, ProviderID: providerID, AccountID: accountID,
		Scopes: append([]string{}, scopes...), CreatedAt: now, UpdatedAt: now}
	const insert = `INSERT INTO accounts (id, user_id, provider_id, account_id, scope, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), a.ID, userID, providerID, accountID,
		strings.Join(scopes, ","), sqlTime(now), sqlTime(now)); err != nil {
		return LinkedAccount{}, wrapWriteError(op, err)
	}
	return a, nil
}

// MarkEmailVerified sets email_verified of user id (a provider vouched for the
// address). It returns ErrNotFound when there is no such user.
func (tx *Tx) MarkEmailVerified(ctx context.Context, id string) error {
	const update = `UPDATE users SET email_verified = ?, updated_at = ? WHERE id = ? AND email_verified = ?`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(update), true, sqlTime(tx.store.Now()), id, false)
	if err != nil {
		return wrapError("mark email verified", err)
	}
	return nil
}

// UserByID returns user id, in the transaction. It returns ErrNotFound when
// there is none.
func (tx *Tx) UserByID(ctx context.Context, id string) (User, error) {
	var r userRow
	q := `SELECT ` + userColumns + ` FROM users u WHERE u.id = ?`
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(q), id); err != nil {
		return User{}, wrapError("user by id", err)
	}
	return r.user(), nil
}
