package identity

import (
	"context"
	"crypto/hmac"

	"github.com/gatehouse-dev/gatehouse/store"
)

// EmailClaimAction is the audit action of a claim that took an account over.
const EmailClaimAction = "user.email_claim"

// EmailClaim is what ClaimEmail did. Claimed is false when the account's email was verified
// already: then nothing was removed and nothing was audited.
type EmailClaim struct {
	Claimed         bool
	PasswordRemoved bool
	// PasswordKept: the proof vouched for the password, which stays (VerifyEmail).
	PasswordKept bool
	// TwoFactorRemoved: the second factor (TOTP, backup codes, trusted devices) went with the
	// password.
	TwoFactorRemoved     bool
	ProviderLinksRemoved int64
	SessionsEnded        int64
	Grants               store.OAuthGrantRevocation
}

// ClaimEmail is the one rule for an account whose email address was never verified, applied
// when someone proves they own that address. Anyone can sign up with any address, so such an
// account may belong to someone other than the address's owner (pre-account hijacking: sign
// up with the victim's address and wait for the victim to sign in with a provider that
// verifies it). Proof of ownership therefore takes the account over instead of sharing it:
// in tx, ClaimEmail marks the email verified and, when it was not verified before, removes
// every way anyone else had into the account —
//
//   - the password (the credential account), the second factor set up with it, and every
//     linked provider account,
//   - every session,
//   - every OAuth grant: refresh tokens and unredeemed codes revoked, access tokens deleted,
//     consents deleted (store.Tx.RevokeUserOAuthGrants),
//
// and appends one audit row: record, as the caller filled in who and from where (actor,
// request id, IP, user agent), with action EmailClaimAction, the user as target, and
// metadata naming proof and counting what was removed. Organization memberships, and
// everything else the account owns, stay: it is the owner's account now.
//
// The caller then adds the proven way in (links the provider account that vouched for the
// address, or sets the password a reset link allowed) and starts the owner's session, in the
// same transaction. A verified account is left as it is (only the verified flag is
// confirmed): linking to it keeps its password and sessions. proof names how ownership was
// shown: a social provider id ("github", "google"), ProofVerificationLink (VerifyEmail, which
// keeps the password the link was mailed for) or ProofPasswordReset (the reset then sets the
// new password).
func ClaimEmail(ctx context.Context, tx *store.Tx, userID, proof string, record store.AuditEntry) (EmailClaim, error) {
	return claimEmail(ctx, tx, userID, proof, "", record)
}

// claimEmail is ClaimEmail. A proof that also vouches for the account's password (a
// verification link mailed for the account as it was signed up: see VerifyEmail) passes
// vouched, the credential fingerprint of that password; the password then stays when it is
// still the same one (and the audit row says so), and everything else goes as ClaimEmail says.
func claimEmail(ctx context.Context, tx *store.Tx, userID, proof, vouched string, record store.AuditEntry) (EmailClaim, error) {
	var c EmailClaim
	var err error
	if c.Claimed, err = tx.VerifyEmail(ctx, userID); err != nil || !c.Claimed {
		return EmailClaim{}, err
	}
	keep := false
	if vouched != "" {
		hash, err := tx.PasswordHashTx(ctx, userID)
		if err != nil {
			return c, err
		}
		keep = hash != "" && hmac.Equal([]byte(credentialFingerprint(hash)), []byte(vouched))
	}
	if keep {
		c.PasswordKept = true
		c.ProviderLinksRemoved, err = tx.RemoveProviderLinks(ctx, userID)
	} else {
		c.PasswordRemoved, c.ProviderLinksRemoved, err = tx.RemoveSignInMethods(ctx, userID)
		if err == nil {
			// A second factor set up with the removed password goes with it.
			c.TwoFactorRemoved, err = tx.DeleteTwoFactor(ctx, userID)
		}
	}
	if err != nil {
		return c, err
	}
	if c.SessionsEnded, err = tx.DeleteOtherSessions(ctx, userID, ""); err != nil {
		return c, err
	}
	if c.Grants, err = tx.RevokeUserOAuthGrants(ctx, userID, false); err != nil {
		return c, err
	}
	record.Action, record.TargetType, record.TargetID = EmailClaimAction, "user", userID
	record.Metadata = map[string]any{
		"proof":                proof,
		"passwordRemoved":      c.PasswordRemoved,
		"providerLinksRemoved": c.ProviderLinksRemoved,
		"sessionsEnded":        c.SessionsEnded,
		"refreshTokensRevoked": c.Grants.RefreshTokens,
		"consentsRevoked":      c.Grants.Consents,
	}
	if vouched != "" {
		record.Metadata["passwordKept"] = c.PasswordKept
	}
	if c.TwoFactorRemoved {
		record.Metadata["twoFactorRemoved"] = true
	}
	return c, tx.AppendAudit(ctx, &record)
}
