package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// CredentialProvider is the accounts.provider_id of email+password sign-in
// (better-auth's "credential" account); its account_id is the user's ID.
const CredentialProvider = "credential"

// User is a person who signs in. Email is stored normalised (see
// NormalizeEmail) and unique. Image is a URL, nil when unset.
type User struct {
	ID            string
	Name          string
	Email         string
	EmailVerified bool
	Image         *string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// NormalizeEmail returns email trimmed of surrounding white space and in
// lower case: the form users.email holds. Every store method taking an email
// applies it, so lookups and the uniqueness check are case-insensitive.
func NormalizeEmail(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// userColumns lists users' columns in userRow order, qualified by the alias
// u; returningUserColumns lists them unqualified, as SQLite's RETURNING
// requires.
const (
	userColumns          = `u.id, u.name, u.email, u.email_verified, u.image, u.created_at, u.updated_at`
	returningUserColumns = `id, name, email, email_verified, image, created_at, updated_at`
)

// CreateUser inserts u and, when passwordHash is not empty, its credential
// account holding passwordHash (an empty passwordHash creates a user that can
// only sign in through another provider). It normalises u.Email, fills in an
// empty u.ID (NewID("usr")) and zero CreatedAt/UpdatedAt (Store.Now;
// UpdatedAt defaults to CreatedAt), and stores given times in UTC at
// microsecond precision, updating u to match what was stored.
//
// It returns ErrInvalid when the email is empty after normalising, and
// ErrConflict when the email (case-insensitively) or u.ID is taken. On
// PostgreSQL a failed statement aborts the transaction: return the error.
func (tx *Tx) CreateUser(ctx context.Context, u *User, passwordHash string) error {
	const op = "create user"
	email := NormalizeEmail(u.Email)
	if email == "" {
		return fmt.Errorf("store: %s: %w: empty email", op, ErrInvalid)
	}
	id := u.ID
	if id == "" {
		id = NewID("usr")
	}
	created, updated := tx.stamps(u.CreatedAt, u.UpdatedAt)

	const query = `INSERT INTO users (id, name, email, email_verified, image, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		id, u.Name, email, u.EmailVerified, u.Image, sqlTime(created), sqlTime(updated))
	if err != nil {
		return wrapError(op, err)
	}
	if passwordHash != "" {
		if err := tx.upsertCredential(ctx, id, passwordHash, created); err != nil {
			return wrapError(op, err)
		}
	}
	u.ID, u.Email, u.CreatedAt, u.UpdatedAt = id, email, created, updated
	return nil
}

// upsertCredential creates userID's credential account with hash, or replaces
// the hash of the existing one. The returned error is the driver's.
func (tx *Tx) upsertCredential(ctx context.Context, userID, hash string, now time.Time) error {
	const query = `INSERT INTO accounts (id, user_id, provider_id, account_id, password_hash, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (provider_id, account_id)
		DO UPDATE SET password_hash = excluded.password_hash, updated_at = excluded.updated_at`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		NewID("acc"), userID, CredentialProvider, userID, hash, sqlTime(now), sqlTime(now))
	return err
}

// UserByEmail returns the user with email (normalised first) and the password
// hash of its credential account, "" when it has none. It returns ErrNotFound
// when no user has that email.
func (s *Store) UserByEmail(ctx context.Context, email string) (User, string, error) {
	const query = `SELECT ` + userColumns + `, a.password_hash
		FROM users u
		LEFT JOIN accounts a ON a.provider_id = ? AND a.account_id = u.id AND a.user_id = u.id
		WHERE u.email = ?`
	var row struct {
		userRow
		PasswordHash sql.NullString `db:"password_hash"`
	}
	err := s.reader.GetContext(ctx, &row, s.reader.Rebind(query), CredentialProvider, NormalizeEmail(email))
	if err != nil {
		return User{}, "", wrapError("user by email", err)
	}
	return row.user(), row.PasswordHash.String, nil
}

// User returns the user with id. It returns ErrNotFound when there is none.
func (s *Store) User(ctx context.Context, id string) (User, error) {
	var row userRow
	err := s.reader.GetContext(ctx, &row, s.reader.Rebind(`SELECT `+userColumns+` FROM users u WHERE u.id = ?`), id)
	if err != nil {
		return User{}, wrapError("user", err)
	}
	return row.user(), nil
}

// UpdateUser changes the profile of user id and returns it as stored. A nil
// name leaves the name alone; a nil image leaves the image alone, a non-nil
// image pointing to nil clears it and one pointing to a string sets it.
// UpdatedAt becomes Store.Now when anything is changed; with name and image
// both nil, UpdateUser only reads the user. It returns ErrNotFound when there
// is no user id.
func (tx *Tx) UpdateUser(ctx context.Context, id string, name *string, image **string) (User, error) {
	const op = "update user"
	var row userRow
	if name == nil && image == nil {
		err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(`SELECT `+userColumns+` FROM users u WHERE u.id = ?`), id)
		if err != nil {
			return User{}, wrapError(op, err)
		}
		return row.user(), nil
	}
	sets := []string{"updated_at = ?"}
	args := []any{sqlTime(tx.store.Now())}
	if name != nil {
		sets = append(sets, "name = ?")
		args = append(args, *name)
	}
	if image != nil {
		sets = append(sets, "image = ?")
		args = append(args, *image)
	}
	args = append(args, id)
	// RETURNING: PostgreSQL and SQLite (3.35+) both have it.
	query := `UPDATE users SET ` + strings.Join(sets, ", ") + ` WHERE id = ? RETURNING ` + returningUserColumns
	if err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(query), args...); err != nil {
		return User{}, wrapError(op, err)
	}
	return row.user(), nil
}

// SetPassword stores hash as the password of user userID, creating the
// user's credential account when it has none. It returns ErrInvalid when hash
// is empty and ErrNotFound when there is no user userID.
func (tx *Tx) SetPassword(ctx context.Context, userID, hash string) error {
	const op = "set password"
	if hash == "" {
		return fmt.Errorf("store: %s: %w: empty hash", op, ErrInvalid)
	}
	if err := tx.upsertCredential(ctx, userID, hash, tx.store.Now()); err != nil {
		if isMissingReference(err) {
			return fmt.Errorf("store: %s: user %s: %w", op, userID, ErrNotFound)
		}
		return wrapError(op, err)
	}
	return nil
}

// PasswordHash returns the password hash of user userID, "" when the user has
// no credential account (signs in through another provider only). It returns
// ErrNotFound when there is no user userID.
func (s *Store) PasswordHash(ctx context.Context, userID string) (string, error) {
	const query = `SELECT a.password_hash
		FROM users u
		LEFT JOIN accounts a ON a.provider_id = ? AND a.account_id = u.id AND a.user_id = u.id
		WHERE u.id = ?`
	var hash sql.NullString
	if err := s.reader.GetContext(ctx, &hash, s.reader.Rebind(query), CredentialProvider, userID); err != nil {
		return "", wrapError("password hash", err)
	}
	return hash.String, nil
}

// DeleteUser deletes user id together with its accounts and sessions (ON
// DELETE CASCADE). It returns ErrNotFound when there is no user id.
func (tx *Tx) DeleteUser(ctx context.Context, id string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM users WHERE id = ?`), id)
	return oneRowAffected("delete user", res, err)
}

// userRow is a users row as scanned.
type userRow struct {
	ID            string         `db:"id"`
	Name          string         `db:"name"`
	Email         string         `db:"email"`
	EmailVerified bool           `db:"email_verified"`
	Image         sql.NullString `db:"image"`
	CreatedAt     sqlTime        `db:"created_at"`
	UpdatedAt     sqlTime        `db:"updated_at"`
}

func (r userRow) user() User {
	return User{
		ID:            r.ID,
		Name:          r.Name,
		Email:         r.Email,
		EmailVerified: r.EmailVerified,
		Image:         nullStringPtr(r.Image),
		CreatedAt:     time.Time(r.CreatedAt),
		UpdatedAt:     time.Time(r.UpdatedAt),
	}
}

// nullStringPtr turns a nullable column into nil or a pointer to its value.
func nullStringPtr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// oneRowAffected wraps the outcome of an UPDATE or DELETE that addresses one
// row: err wrapped as usual, no row affected as ErrNotFound.
func oneRowAffected(op string, res sql.Result, err error) error {
	if err != nil {
		return wrapError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrapError(op, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	return nil
}
