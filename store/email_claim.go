package store

import "context"

// The pieces of an email claim (identity.ClaimEmail): when the owner of an address proves it
// for an account whose email was never verified, everything anyone else could use to get into
// that account goes, in the claim's transaction.

// VerifyEmail sets email_verified of user id and reports whether this call changed it: false
// when it was verified already (or there is no such user). Of concurrent calls for one user
// exactly one reports true, so exactly one claim removes the account's other ways in.
func (tx *Tx) VerifyEmail(ctx context.Context, id string) (bool, error) {
	n, err := tx.execCount(ctx, "verify email",
		`UPDATE users SET email_verified = ?, updated_at = ? WHERE id = ? AND email_verified = ?`,
		true, sqlTime(tx.store.Now()), id, false)
	return n == 1, err
}

// RemoveSignInMethods deletes every account (way of signing in) of user userID: its
// credential account, which holds the password, and every linked social provider account. It
// reports whether there was a password and how many provider accounts it unlinked.
func (tx *Tx) RemoveSignInMethods(ctx context.Context, userID string) (password bool, providerLinks int64, err error) {
	const op = "remove sign-in methods"
	n, err := tx.execCount(ctx, op, `DELETE FROM accounts WHERE user_id = ? AND provider_id = ?`, userID, CredentialProvider)
	if err != nil {
		return false, 0, err
	}
	providerLinks, err = tx.execCount(ctx, op, `DELETE FROM accounts WHERE user_id = ?`, userID)
	return n > 0, providerLinks, err
}

// RemoveProviderLinks deletes the social provider accounts linked to user userID, keeping its
// credential account (password), and reports how many it unlinked: an email claim whose proof
// vouched for the password (identity.VerifyEmail) removes only these.
func (tx *Tx) RemoveProviderLinks(ctx context.Context, userID string) (int64, error) {
	return tx.execCount(ctx, "remove provider links",
		`DELETE FROM accounts WHERE user_id = ? AND provider_id <> ?`, userID, CredentialProvider)
}
