package store

import (
	"context"
	"fmt"
)

// ChangeEmail moves user id from the address from to the address email (both normalised) and
// marks it verified: the last step of an email change, whose link proved that the user owns
// the new address. It returns the user as stored, ErrInvalid when email is empty, ErrNotFound
// when there is no user id with the address from (a concurrent change moved it first) and
// ErrConflict when another user has the address (on PostgreSQL the failed
// statement aborts the transaction: return the error).
func (tx *Tx) ChangeEmail(ctx context.Context, id, from, email string) (User, error) {
	const op = "change email"
	email = NormalizeEmail(email)
	if email == "" {
		return User{}, fmt.Errorf("store: %s: %w: empty email", op, ErrInvalid)
	}
	var row userRow
	err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(`UPDATE users SET email = ?, email_verified = ?, updated_at = ?
		WHERE id = ? AND email = ? RETURNING `+returningUserColumns), email, true, sqlTime(tx.store.Now()), id, NormalizeEmail(from))
	if err != nil {
		return User{}, wrapError(op, err)
	}
	return row.user(), nil
}
