package identity

import (
	"context"
	"errors"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Email links. A verification or password-reset mail carries a single-use token: 43 random
// base62 characters (about 256 bits), of which the store keeps only the SHA-256 (HashToken),
// looked up by that hash, so neither a database dump nor a timing difference gives a usable
// token away. A token is bound to its purpose, to its user and to the address it was mailed
// to (it stops working if the user's address changes), and expires: a verification link after
// VerificationLinkLifetime, a reset link after ResetLinkLifetime. Using one marks it used in
// the caller's transaction, so of concurrent uses exactly one succeeds.

// Link lifetimes.
const (
	VerificationLinkLifetime = 24 * time.Hour
	ResetLinkLifetime        = time.Hour
)

// Proofs of an email claim by a mailed link (see ClaimEmail).
const (
	ProofVerificationLink = "verification-link"
	ProofPasswordReset    = "password-reset"
)

// emailTokenLength is the length of an email token.
const emailTokenLength = 43

// Errors of the email links.
var (
	// ErrTokenInvalid: no such token for the purpose, used already, or mailed to an address the
	// user no longer has.
	ErrTokenInvalid = errors.New("identity: invalid token")
	// ErrTokenExpired: the token's lifetime has passed.
	ErrTokenExpired = errors.New("identity: token expired")
)

// credentialFingerprint is what a verification token records of the password it vouches for:
// the SHA-256 of the password hash.
func credentialFingerprint(passwordHash string) string { return HashToken(passwordHash) }

// IssueEmailToken creates a token of purpose (store.EmailTokenVerifyEmail or
// store.EmailTokenResetPassword) for u at u.Email in tx, valid for lifetime from the store's
// clock, and returns it: the only copy, for the mailed link. A verification token records the
// account's password (as its fingerprint) at this moment: the password the link vouches for.
func IssueEmailToken(ctx context.Context, tx *store.Tx, purpose string, u store.User, lifetime time.Duration) (string, error) {
	token, err := NewEmailToken()
	if err != nil {
		return "", err
	}
	return token, StoreEmailToken(ctx, tx, purpose, token, u, lifetime)
}

// NewEmailToken returns a new random email token (to store with StoreEmailToken). Callers that
// must do the same work whether or not there is a user to mail (request-password-reset) make
// the token and its message first, and store them only when there is.
func NewEmailToken() (string, error) { return RandomBase62(emailTokenLength) }

// StoreEmailToken stores token (made by NewEmailToken) as IssueEmailToken does. A u without an
// ID stores a decoy for u.Email, which belongs to nobody and never works: a request for an
// address without an account stores one, so that it does the same work as one with an account.
func StoreEmailToken(ctx context.Context, tx *store.Tx, purpose, token string, u store.User, lifetime time.Duration) error {
	t := store.EmailToken{Purpose: purpose, UserID: u.ID, Email: u.Email, ExpiresAt: tx.Now().Add(lifetime)}
	if purpose == store.EmailTokenVerifyEmail {
		// A decoy reads too (and finds nothing), as a real token does.
		hash, err := tx.PasswordHashTx(ctx, u.ID)
		if err != nil && (u.ID != "" || !errors.Is(err, store.ErrNotFound)) {
			return err
		}
		if hash != "" {
			t.Credential = credentialFingerprint(hash)
		}
	}
	return tx.CreateEmailToken(ctx, HashToken(token), &t)
}

// UseEmailToken uses token of purpose in tx and returns it with its user as they are now:
// ErrTokenInvalid when it is unknown, used or no longer matches the user's address,
// ErrTokenExpired when its time has passed (then the caller rolls back: it stays unused but
// cannot work). A malformed token is refused without touching the database.
func UseEmailToken(ctx context.Context, tx *store.Tx, purpose, token string) (store.EmailToken, store.User, error) {
	if len(token) != emailTokenLength {
		return store.EmailToken{}, store.User{}, ErrTokenInvalid
	}
	now := tx.Now()
	t, err := tx.UseEmailToken(ctx, purpose, HashToken(token), now)
	if errors.Is(err, store.ErrNotFound) {
		return store.EmailToken{}, store.User{}, ErrTokenInvalid
	}
	if err != nil {
		return store.EmailToken{}, store.User{}, err
	}
	if t.UserID == "" {
		return store.EmailToken{}, store.User{}, ErrTokenInvalid
	}
	if !now.Before(t.ExpiresAt) {
		return store.EmailToken{}, store.User{}, ErrTokenExpired
	}
	u, err := tx.UserByID(ctx, t.UserID)
	if err != nil {
		return store.EmailToken{}, store.User{}, err
	}
	if u.Email != t.Email {
		return store.EmailToken{}, store.User{}, ErrTokenInvalid
	}
	return t, u, nil
}

// CheckEmailToken reports whether token of purpose would work now, without using it (the
// reset link's first stop, which only forwards it): nil, ErrTokenInvalid or ErrTokenExpired.
func CheckEmailToken(ctx context.Context, st *store.Store, purpose, token string) error {
	if len(token) != emailTokenLength {
		return ErrTokenInvalid
	}
	t, err := st.EmailTokenByHash(ctx, purpose, HashToken(token))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrTokenInvalid
	case err != nil:
		return err
	case t.UsedAt != nil || t.UserID == "":
		return ErrTokenInvalid
	case !st.Now().Before(t.ExpiresAt):
		return ErrTokenExpired
	}
	u, err := st.User(ctx, t.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.Email != t.Email) {
		return ErrTokenInvalid
	}
	return err
}

// EmailVerification is what VerifyEmail did.
type EmailVerification struct {
	// User is the token's user, verified now.
	User store.User
	// Claim is the email claim: Claimed when the address was not verified before.
	Claim EmailClaim
	// Again: the token had been used already and the address is verified (a link opened a
	// second time, after a mail scanner opened it first, for instance). Nothing changed.
	Again bool
}

// VerifyEmail uses a verification token in tx and applies the email rule. Opening the link
// proves that its opener owns the address, so when the address was not verified the account is
// claimed (ClaimEmail, proof ProofVerificationLink, audited with record): every session and
// OAuth grant ends and provider links go. The password stays when it is the one the account
// had when the link was mailed — the link confirms that sign-up, and its mail says to ignore
// it otherwise — and goes when it was set since. The caller starts a session for the opener's
// browser when it was signed in to this account, and never otherwise.
//
// A token that was used already while the address stays verified is Again, not an error.
// Errors: ErrTokenInvalid, ErrTokenExpired, or the store's.
func VerifyEmail(ctx context.Context, tx *store.Tx, token string, record store.AuditEntry) (EmailVerification, error) {
	t, u, err := UseEmailToken(ctx, tx, store.EmailTokenVerifyEmail, token)
	if errors.Is(err, ErrTokenInvalid) && len(token) == emailTokenLength {
		if prior, perr := tx.EmailTokenByHash(ctx, store.EmailTokenVerifyEmail, HashToken(token)); perr == nil && prior.UsedAt != nil {
			if u, uerr := tx.UserByID(ctx, prior.UserID); uerr == nil && u.EmailVerified && u.Email == prior.Email {
				return EmailVerification{User: u, Again: true}, nil
			}
		}
	}
	if err != nil {
		return EmailVerification{}, err
	}
	record.ActorType, record.ActorID = store.ActorUser, u.ID
	claim, err := claimEmail(ctx, tx, u.ID, ProofVerificationLink, t.Credential, record)
	if err != nil {
		return EmailVerification{}, err
	}
	if _, err := tx.UseUserEmailTokens(ctx, u.ID, store.EmailTokenVerifyEmail, tx.Now()); err != nil {
		return EmailVerification{}, err
	}
	u.EmailVerified = true
	return EmailVerification{User: u, Claim: claim}, nil
}

// PasswordResetAction is the audit action of a password reset.
const PasswordResetAction = "user.password_reset"

// PasswordReset is what ResetPassword did.
type PasswordReset struct {
	User store.User
	// Claim is the email claim of a never-verified address (Claimed), which ended the
	// sessions and grants itself.
	Claim EmailClaim
	// SessionsEnded and Grants are what the reset ended besides.
	SessionsEnded int64
	Grants        store.OAuthGrantRevocation
}

// ResetPassword uses a reset token in tx and makes newHash the user's password. A reset is
// what a user does when the password is lost or stolen, so it ends everything issued on the
// strength of the old one: every session, and the OAuth grants (refresh tokens revoked, access
// tokens deleted, unredeemed codes used up; consents stay). The user's other reset links stop
// working. When the address was never verified, the reset proves that its requester owns it,
// so the account is claimed first (ClaimEmail, proof ProofPasswordReset: provider links and
// consents go too), and the new password is the proven way in. It appends the
// PasswordResetAction audit row (record as the caller filled it in; the user is the actor and
// the target). Errors: ErrTokenInvalid, ErrTokenExpired, or the store's.
func ResetPassword(ctx context.Context, tx *store.Tx, token, newHash string, record store.AuditEntry) (PasswordReset, error) {
	_, u, err := UseEmailToken(ctx, tx, store.EmailTokenResetPassword, token)
	if err != nil {
		return PasswordReset{}, err
	}
	record.ActorType, record.ActorID = store.ActorUser, u.ID
	r := PasswordReset{User: u}
	if r.Claim, err = ClaimEmail(ctx, tx, u.ID, ProofPasswordReset, record); err != nil {
		return r, err
	}
	r.User.EmailVerified = true
	if err := tx.SetPassword(ctx, u.ID, newHash); err != nil {
		return r, err
	}
	if r.SessionsEnded, err = tx.DeleteOtherSessions(ctx, u.ID, ""); err != nil {
		return r, err
	}
	if r.Grants, err = tx.RevokeUserOAuthGrants(ctx, u.ID, true); err != nil {
		return r, err
	}
	if _, err := tx.UseUserEmailTokens(ctx, u.ID, store.EmailTokenResetPassword, tx.Now()); err != nil {
		return r, err
	}
	record.Action, record.TargetType, record.TargetID = PasswordResetAction, "user", u.ID
	record.Metadata = map[string]any{
		"claimed":              r.Claim.Claimed,
		"sessionsEnded":        r.SessionsEnded + r.Claim.SessionsEnded,
		"refreshTokensRevoked": r.Grants.RefreshTokens + r.Claim.Grants.RefreshTokens,
		"accessTokensRevoked":  r.Grants.AccessTokens + r.Claim.Grants.AccessTokens,
	}
	return r, tx.AppendAudit(ctx, &record)
}
