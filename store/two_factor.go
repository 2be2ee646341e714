package store

import (
	"context"
	"fmt"
	"time"
)

// Second factors: a user's TOTP secret (sealed by the caller), its single-use backup codes
// (stored as hashes the caller computes) and the tokens of the second sign-in step. The store
// never sees a code, a secret in the clear or a token.

// TwoFactorSecretAAD binds a sealed TOTP secret to its user.
func TwoFactorSecretAAD(userID string) []byte { return []byte("two-factor-secret:" + userID) }

// Two-factor token purposes.
const (
	// TwoFactorSignIn is a pending sign-in: the password was right, the second factor is due.
	TwoFactorSignIn = "sign-in"
	// TwoFactorTrustDevice is a device whose holder may skip the second step.
	TwoFactorTrustDevice = "trust-device"
)

// TwoFactor is a user's TOTP enrolment. Secret is sealed (TwoFactorSecretAAD). Verified is
// false until the first accepted code; only a verified factor is asked for at sign-in.
// LastStep is the highest time step accepted so far (UseTOTPStep).
type TwoFactor struct {
	ID        string
	UserID    string
	Secret    string
	Verified  bool
	LastStep  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

type twoFactorRow struct {
	ID        string  `db:"id"`
	UserID    string  `db:"user_id"`
	Secret    string  `db:"secret"`
	Verified  bool    `db:"verified"`
	LastStep  int64   `db:"last_step"`
	CreatedAt sqlTime `db:"created_at"`
	UpdatedAt sqlTime `db:"updated_at"`
}

// TwoFactorByUser returns userID's TOTP enrolment, verified or not, or ErrNotFound.
func (r reads) TwoFactorByUser(ctx context.Context, userID string) (TwoFactor, error) {
	var row twoFactorRow
	err := r.q.GetContext(ctx, &row, r.q.Rebind(`SELECT id, user_id, secret, verified, last_step,
		created_at, updated_at FROM two_factors WHERE user_id = ?`), userID)
	if err != nil {
		return TwoFactor{}, wrapError("two factor", err)
	}
	return TwoFactor{ID: row.ID, UserID: row.UserID, Secret: row.Secret, Verified: row.Verified,
		LastStep: row.LastStep, CreatedAt: time.Time(row.CreatedAt), UpdatedAt: time.Time(row.UpdatedAt)}, nil
}

// PutTwoFactor stores sealedSecret as userID's TOTP secret (a new enrolment, unverified, or a
// new secret for an existing one, whose verified flag stays as it was, as better-auth's enable
// does) and replaces the user's backup codes with codeHashes. It returns ErrInvalid for an
// empty secret and ErrNotFound when there is no user userID.
func (tx *Tx) PutTwoFactor(ctx context.Context, userID, sealedSecret string, codeHashes []string) error {
	const op = "put two factor"
	if sealedSecret == "" {
		return fmt.Errorf("store: %s: %w: empty secret", op, ErrInvalid)
	}
	now := sqlTime(tx.store.Now())
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE two_factors SET secret = ?, updated_at = ?
		WHERE user_id = ?`), sealedSecret, now, userID)
	if err != nil {
		return wrapError(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return wrapError(op, err)
	} else if n == 0 {
		_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO two_factors (id, user_id, secret,
			verified, last_step, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?)`),
			NewID("tfa"), userID, sealedSecret, false, now, now)
		if isMissingReference(err) {
			return fmt.Errorf("store: %s: user %s: %w", op, userID, ErrNotFound)
		}
		if err != nil {
			return wrapError(op, err)
		}
	}
	return tx.ReplaceBackupCodes(ctx, userID, codeHashes)
}

// ReplaceBackupCodes deletes userID's backup codes, used or not, and stores codeHashes.
func (tx *Tx) ReplaceBackupCodes(ctx context.Context, userID string, codeHashes []string) error {
	const op = "replace backup codes"
	if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM two_factor_backup_codes WHERE user_id = ?`), userID); err != nil {
		return wrapError(op, err)
	}
	now := sqlTime(tx.store.Now())
	insert := tx.tx.Rebind(`INSERT INTO two_factor_backup_codes (id, user_id, code_hash, created_at) VALUES (?, ?, ?, ?)`)
	for _, h := range codeHashes {
		if _, err := tx.tx.ExecContext(ctx, insert, NewID("bkc"), userID, h, now); err != nil {
			if isMissingReference(err) {
				return fmt.Errorf("store: %s: user %s: %w", op, userID, ErrNotFound)
			}
			return wrapError(op, err)
		}
	}
	return nil
}

// VerifyTwoFactor marks userID's TOTP enrolment verified (ErrNotFound without one).
func (tx *Tx) VerifyTwoFactor(ctx context.Context, userID string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE two_factors SET verified = ?, updated_at = ?
		WHERE user_id = ?`), true, sqlTime(tx.store.Now()), userID)
	return oneRowAffected("verify two factor", res, err)
}

// UseTOTPStep records that a code of time step step was accepted for userID. It returns
// ErrNotFound when a code of this step or a later one was accepted before (a replay; of
// concurrent uses of one code exactly one succeeds) or there is no enrolment.
func (tx *Tx) UseTOTPStep(ctx context.Context, userID string, step int64) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE two_factors SET last_step = ?, updated_at = ?
		WHERE user_id = ? AND last_step < ?`), step, sqlTime(tx.store.Now()), userID, step)
	return oneRowAffected("use totp step", res, err)
}

// UseBackupCode marks userID's unused backup code with codeHash used. It returns ErrNotFound
// when there is no such unused code: of concurrent uses of one code exactly one succeeds.
func (tx *Tx) UseBackupCode(ctx context.Context, userID, codeHash string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE two_factor_backup_codes SET used_at = ?
		WHERE user_id = ? AND code_hash = ? AND used_at IS NULL`), sqlTime(tx.store.Now()), userID, codeHash)
	return oneRowAffected("use backup code", res, err)
}

// TwoFactorRequiredOf reports whether userID is a member of an active organization that
// requires a second factor.
func (r reads) TwoFactorRequiredOf(ctx context.Context, userID string) (bool, error) {
	var n int
	err := r.q.GetContext(ctx, &n, r.q.Rebind(`SELECT COUNT(*) FROM members m
		JOIN organizations o ON o.id = m.organization_id
		WHERE m.user_id = ? AND o.require_two_factor = ? AND o.archived_at IS NULL`), userID, true)
	if err != nil {
		return false, wrapError("two factor required of", err)
	}
	return n > 0, nil
}

// UnusedBackupCodes counts userID's backup codes not used yet.
func (r reads) UnusedBackupCodes(ctx context.Context, userID string) (int, error) {
	var n int
	err := r.q.GetContext(ctx, &n, r.q.Rebind(`SELECT COUNT(*) FROM two_factor_backup_codes
		WHERE user_id = ? AND used_at IS NULL`), userID)
	if err != nil {
		return 0, wrapError("unused backup codes", err)
	}
	return n, nil
}

// DeleteTwoFactor removes userID's TOTP enrolment, backup codes and second-step tokens
// (pending sign-ins and trusted devices). It returns whether there was an enrolment.
func (tx *Tx) DeleteTwoFactor(ctx context.Context, userID string) (bool, error) {
	const op = "delete two factor"
	for _, q := range []string{`DELETE FROM two_factor_backup_codes WHERE user_id = ?`,
		`DELETE FROM two_factor_tokens WHERE user_id = ?`} {
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(q), userID); err != nil {
			return false, wrapError(op, err)
		}
	}
	n, err := tx.execCount(ctx, op, `DELETE FROM two_factors WHERE user_id = ?`, userID)
	return n > 0, err
}

// TwoFactorToken is a stored second-step token (without the token).
type TwoFactorToken struct {
	Purpose    string
	UserID     string
	RememberMe bool
	// Attempts counts the wrong codes tried against a pending sign-in.
	Attempts  int
	ExpiresAt time.Time
	CreatedAt time.Time
}

type twoFactorTokenRow struct {
	Purpose    string  `db:"purpose"`
	UserID     string  `db:"user_id"`
	RememberMe bool    `db:"remember_me"`
	Attempts   int     `db:"attempts"`
	ExpiresAt  sqlTime `db:"expires_at"`
	CreatedAt  sqlTime `db:"created_at"`
}

// CreateTwoFactorToken stores t under tokenHash (the hex SHA-256 of the token), created now,
// and deletes a few expired tokens. It returns ErrInvalid for an unknown purpose or an empty
// hash, ErrNotFound when there is no user t.UserID.
func (tx *Tx) CreateTwoFactorToken(ctx context.Context, tokenHash string, t TwoFactorToken) error {
	const op = "create two factor token"
	if tokenHash == "" || (t.Purpose != TwoFactorSignIn && t.Purpose != TwoFactorTrustDevice) {
		return fmt.Errorf("store: %s: %w: token hash and a known purpose are required", op, ErrInvalid)
	}
	now := tx.store.Now()
	if err := tx.sweep(ctx, "two_factor_tokens", "token_hash", now); err != nil {
		return wrapError(op, err)
	}
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO two_factor_tokens (token_hash, purpose,
		user_id, remember_me, attempts, expires_at, created_at) VALUES (?, ?, ?, ?, 0, ?, ?)`),
		tokenHash, t.Purpose, t.UserID, t.RememberMe, sqlTime(t.ExpiresAt), sqlTime(now))
	if isMissingReference(err) {
		return fmt.Errorf("store: %s: user %s: %w", op, t.UserID, ErrNotFound)
	}
	if err != nil {
		return wrapError(op, err)
	}
	return nil
}

// TwoFactorTokenByHash returns the unexpired token of purpose under tokenHash, or ErrNotFound.
func (r reads) TwoFactorTokenByHash(ctx context.Context, purpose, tokenHash string) (TwoFactorToken, error) {
	var row twoFactorTokenRow
	err := r.q.GetContext(ctx, &row, r.q.Rebind(`SELECT purpose, user_id, remember_me, attempts, expires_at,
		created_at FROM two_factor_tokens WHERE token_hash = ? AND purpose = ? AND expires_at > ?`),
		tokenHash, purpose, sqlTime(r.store.Now()))
	if err != nil {
		return TwoFactorToken{}, wrapError("two factor token", err)
	}
	return TwoFactorToken{Purpose: row.Purpose, UserID: row.UserID, RememberMe: row.RememberMe,
		Attempts: row.Attempts, ExpiresAt: time.Time(row.ExpiresAt), CreatedAt: time.Time(row.CreatedAt)}, nil
}

// CountTwoFactorAttempt counts one wrong code against the pending sign-in under tokenHash and
// returns the new count; ErrNotFound when the token is gone.
func (tx *Tx) CountTwoFactorAttempt(ctx context.Context, tokenHash string) (int, error) {
	var n int
	err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind(`UPDATE two_factor_tokens SET attempts = attempts + 1
		WHERE token_hash = ? AND purpose = ? RETURNING attempts`), tokenHash, TwoFactorSignIn)
	if err != nil {
		return 0, wrapError("count two factor attempt", err)
	}
	return n, nil
}

// DeleteTwoFactorToken deletes the token of purpose under tokenHash, expired or not. It returns
// ErrNotFound when there is none: of concurrent uses of one token exactly one deletes it.
func (tx *Tx) DeleteTwoFactorToken(ctx context.Context, purpose, tokenHash string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM two_factor_tokens WHERE token_hash = ? AND purpose = ?`),
		tokenHash, purpose)
	return oneRowAffected("delete two factor token", res, err)
}
