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

// RevokedGrants counts what RevokeUserGrants ended.
type RevokedGrants struct {
	RefreshTokens int64 // active refresh tokens marked inactive
	Codes         int64 // unredeemed authorization codes marked inactive
	AccessTokens  int64 // access tokens deleted
	Consents      int64 // consents deleted
}

// RevokeUserGrants ends every OAuth grant of user userID (the subject of the provider's tokens)
// as the provider's own revocation does: active refresh tokens and unredeemed authorization
// codes are marked inactive — kept, so that a later use is recognised and refused — access
// tokens are deleted, so introspection and userinfo refuse them, and every consent the user
// gave is deleted, so the next authorization asks again.
func (tx *Tx) RevokeUserGrants(ctx context.Context, userID string) (RevokedGrants, error) {
	const op = "revoke user grants"
	var r RevokedGrants
	var err error
	deactivate := `UPDATE oauth_tokens SET active = ? WHERE kind = ? AND subject = ? AND active = ?`
	if r.RefreshTokens, err = tx.execCount(ctx, op, deactivate, false, OAuthRefresh, userID, true); err != nil {
		return r, err
	}
	if r.Codes, err = tx.execCount(ctx, op, deactivate, false, OAuthCode, userID, true); err != nil {
		return r, err
	}
	if r.AccessTokens, err = tx.execCount(ctx, op, `DELETE FROM oauth_tokens WHERE kind = ? AND subject = ?`, OAuthAccess, userID); err != nil {
		return r, err
	}
	r.Consents, err = tx.execCount(ctx, op, `DELETE FROM oauth_consents WHERE user_id = ?`, userID)
	return r, err
}
