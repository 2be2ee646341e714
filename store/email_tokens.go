package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Email tokens: the single-use tokens of the links Gatehouse mails (identity.IssueEmailToken).
// The store keeps only the SHA-256 of a token, looked up by that hash.

// Email token purposes.
const (
	EmailTokenVerifyEmail   = "verify-email"
	EmailTokenResetPassword = "reset-password"
	// EmailTokenChangeEmail is mailed to the new address of an email change: using it moves the
	// user from Email to NewEmail.
	EmailTokenChangeEmail = "change-email"
)

// EmailToken is a stored email token (without the token).
type EmailToken struct {
	ID      string
	Purpose string
	// UserID is the token's user; "" for a decoy, which never works.
	UserID string
	// Email is the address the link was sent to; for EmailTokenChangeEmail, the address the
	// user had when asking for the change (the link was sent to NewEmail).
	Email string
	// NewEmail is, for EmailTokenChangeEmail, the address the change moves the user to.
	NewEmail string
	// Credential is, for a verification token, the SHA-256 of the password hash the account had
	// when the link was issued ("" when it had none).
	Credential string
	ExpiresAt  time.Time
	UsedAt     *time.Time
	CreatedAt  time.Time
}

type emailTokenRow struct {
	ID         string         `db:"id"`
	Purpose    string         `db:"purpose"`
	UserID     sql.NullString `db:"user_id"`
	Email      string         `db:"email"`
	Credential string         `db:"credential"`
	NewEmail   string         `db:"new_email"`
	ExpiresAt  sqlTime        `db:"expires_at"`
	UsedAt     *sqlTime       `db:"used_at"`
	CreatedAt  sqlTime        `db:"created_at"`
}

const emailTokenColumns = `id, purpose, user_id, email, credential, new_email, expires_at, used_at, created_at`

func (r emailTokenRow) token() EmailToken {
	t := EmailToken{ID: r.ID, Purpose: r.Purpose, UserID: r.UserID.String, Email: r.Email, Credential: r.Credential, NewEmail: r.NewEmail,
		ExpiresAt: time.Time(r.ExpiresAt), CreatedAt: time.Time(r.CreatedAt)}
	if r.UsedAt != nil {
		u := time.Time(*r.UsedAt)
		t.UsedAt = &u
	}
	return t
}

// CreateEmailToken stores t under tokenHash (the hex SHA-256 of the token), filling in t.ID and
// t.CreatedAt, and deletes a few expired tokens. t.Purpose must be one of the purposes,
// tokenHash and t.Email not empty, t.NewEmail not empty exactly for EmailTokenChangeEmail
// (ErrInvalid), t.UserID a user (ErrNotFound otherwise) or ""
// for a decoy that belongs to nobody.
func (tx *Tx) CreateEmailToken(ctx context.Context, tokenHash string, t *EmailToken) error {
	const op = "create email token"
	known := t.Purpose == EmailTokenVerifyEmail || t.Purpose == EmailTokenResetPassword || t.Purpose == EmailTokenChangeEmail
	if tokenHash == "" || t.Email == "" || !known || (t.Purpose == EmailTokenChangeEmail) != (t.NewEmail != "") {
		return fmt.Errorf("store: %s: %w: token hash, email and a known purpose are required (a new email exactly for a change)", op, ErrInvalid)
	}
	now := tx.store.Now()
	if err := tx.sweep(ctx, "email_tokens", "id", now); err != nil {
		return wrapError(op, err)
	}
	t.ID, t.CreatedAt, t.UsedAt = NewID("etk"), now, nil
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO email_tokens (id, token_hash, purpose, user_id,
		email, credential, new_email, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.ID, tokenHash, t.Purpose, sql.NullString{String: t.UserID, Valid: t.UserID != ""}, NormalizeEmail(t.Email), t.Credential,
		NormalizeEmail(t.NewEmail), sqlTime(t.ExpiresAt), sqlTime(now))
	if isMissingReference(err) {
		return fmt.Errorf("store: %s: user %s: %w", op, t.UserID, ErrNotFound)
	}
	if err != nil {
		return wrapError(op, err)
	}
	return nil
}

// UseEmailToken marks the unused token of purpose stored under tokenHash used at now and
// returns it (expired or not: the caller judges ExpiresAt). It returns ErrNotFound when there
// is no such unused token: of concurrent uses of one token exactly one succeeds.
func (tx *Tx) UseEmailToken(ctx context.Context, purpose, tokenHash string, now time.Time) (EmailToken, error) {
	var r emailTokenRow
	err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(`UPDATE email_tokens SET used_at = ?
		WHERE token_hash = ? AND purpose = ? AND used_at IS NULL RETURNING `+emailTokenColumns),
		sqlTime(now), tokenHash, purpose)
	if err != nil {
		return EmailToken{}, wrapError("use email token", err)
	}
	return r.token(), nil
}

// EmailTokenByHash returns the token of purpose stored under tokenHash, used or not, or
// ErrNotFound.
func (r reads) EmailTokenByHash(ctx context.Context, purpose, tokenHash string) (EmailToken, error) {
	var row emailTokenRow
	err := r.q.GetContext(ctx, &row, r.q.Rebind(`SELECT `+emailTokenColumns+` FROM email_tokens
		WHERE token_hash = ? AND purpose = ?`), tokenHash, purpose)
	if err != nil {
		return EmailToken{}, wrapError("email token", err)
	}
	return row.token(), nil
}

// UseUserEmailTokens marks every unused token of purpose of user userID used at now (a reset
// that succeeded makes the other reset links of the user void) and returns how many.
func (tx *Tx) UseUserEmailTokens(ctx context.Context, userID, purpose string, now time.Time) (int64, error) {
	return tx.execCount(ctx, "use user email tokens", `UPDATE email_tokens SET used_at = ?
		WHERE user_id = ? AND purpose = ? AND used_at IS NULL`, sqlTime(now), userID, purpose)
}

// Now is the store's clock (Store.Now), for code that works in a transaction.
func (tx *Tx) Now() time.Time { return tx.store.Now() }

// PasswordHashTx is PasswordHash inside tx: the password hash of user userID, "" when it has
// no credential account, ErrNotFound when there is no such user.
func (tx *Tx) PasswordHashTx(ctx context.Context, userID string) (string, error) {
	var hash sql.NullString
	err := tx.tx.GetContext(ctx, &hash, tx.tx.Rebind(`SELECT a.password_hash FROM users u
		LEFT JOIN accounts a ON a.provider_id = ? AND a.account_id = u.id AND a.user_id = u.id
		WHERE u.id = ?`), CredentialProvider, userID)
	if err != nil {
		return "", wrapError("password hash", err)
	}
	return hash.String, nil
}
