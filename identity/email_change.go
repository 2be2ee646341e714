package identity

import (
	"context"
	"errors"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Email change. A signed-in user asks to move the account to a new address; a link is mailed to
// the new address (a token of purpose store.EmailTokenChangeEmail, bound to the user, to the
// address the account has now and to the new one) and a notice to the current one. The address
// changes only when the link is used (ChangeEmail): single-use, stored hashed, valid for
// EmailChangeLinkLifetime. The request gives one answer and does the same work whether or not
// the new address is taken: for a taken one the token is a decoy (it belongs to nobody and never
// works) and the link's message is never sent.

// EmailChangeLinkLifetime is how long an email change link works (as a verification link).
const EmailChangeLinkLifetime = VerificationLinkLifetime

// Audit actions of an email change.
const (
	EmailChangeRequestAction = "user.email_change_requested"
	EmailChangeAction        = "user.email_changed"
)

// ErrEmailTaken: the new address of an email change belongs to another account now.
var ErrEmailTaken = errors.New("identity: email address taken")

// StoreEmailChangeToken stores token (made by NewEmailToken) in tx as the link that moves u
// from u.Email to newEmail, valid for EmailChangeLinkLifetime. A u without an ID stores a decoy
// that never works (the request for a taken address).
func StoreEmailChangeToken(ctx context.Context, tx *store.Tx, token string, u store.User, newEmail string) error {
	t := store.EmailToken{Purpose: store.EmailTokenChangeEmail, UserID: u.ID, Email: u.Email, NewEmail: newEmail,
		ExpiresAt: tx.Now().Add(EmailChangeLinkLifetime)}
	return tx.CreateEmailToken(ctx, HashToken(token), &t)
}

// EmailChange is what ChangeEmail did.
type EmailChange struct {
	// User is the user as changed: the new address, verified.
	User store.User
	// From is the address the user had ("" when Again).
	From string
	// Again: the link had been used already and the account has its new address (a mail
	// scanner opened it first, for instance). Nothing changed.
	Again bool
}

// ChangeEmail uses an email change token in tx and moves its user to the new address, marked
// verified (the link proved it), appending the EmailChangeAction audit row (record as the
// caller filled it in; the user is the actor and the target). Sessions, grants and sign-in
// methods stay: the change was asked for from a session of the account, and the link shows
// the new address is the asker's. The user's other change links stop working, and so do the
// verification and reset links of the old address (they are bound to it).
//
// A link used already while the account keeps the address it moved to is Again, not an error.
// Errors: ErrTokenInvalid (unknown, used, a decoy, or the account's address changed since the
// link was mailed), ErrTokenExpired, ErrEmailTaken (another account has the new address now;
// the token stays unused), or the store's. On an error the caller rolls back.
func ChangeEmail(ctx context.Context, tx *store.Tx, token string, record store.AuditEntry) (EmailChange, error) {
	t, u, err := UseEmailToken(ctx, tx, store.EmailTokenChangeEmail, token)
	if errors.Is(err, ErrTokenInvalid) && len(token) == emailTokenLength {
		if prior, perr := tx.EmailTokenByHash(ctx, store.EmailTokenChangeEmail, HashToken(token)); perr == nil && prior.UsedAt != nil && prior.UserID != "" {
			if u, uerr := tx.UserByID(ctx, prior.UserID); uerr == nil && u.EmailVerified && u.Email == prior.NewEmail {
				return EmailChange{User: u, Again: true}, nil
			}
		}
	}
	if err != nil {
		return EmailChange{}, err
	}
	if _, err := tx.UserByEmailTx(ctx, t.NewEmail); err == nil {
		return EmailChange{}, ErrEmailTaken
	} else if !errors.Is(err, store.ErrNotFound) {
		return EmailChange{}, err
	}
	changed, err := tx.ChangeEmail(ctx, u.ID, t.Email, t.NewEmail)
	switch {
	case errors.Is(err, store.ErrConflict): // taken by a concurrent sign-up or change
		return EmailChange{}, ErrEmailTaken
	case errors.Is(err, store.ErrNotFound): // moved by a concurrent change
		return EmailChange{}, ErrTokenInvalid
	}
	if err != nil {
		return EmailChange{}, err
	}
	if _, err := tx.UseUserEmailTokens(ctx, u.ID, store.EmailTokenChangeEmail, tx.Now()); err != nil {
		return EmailChange{}, err
	}
	record.ActorType, record.ActorID = store.ActorUser, u.ID
	record.Action, record.TargetType, record.TargetID = EmailChangeAction, "user", u.ID
	record.Metadata = map[string]any{"from": u.Email, "to": changed.Email}
	return EmailChange{User: changed, From: u.Email}, tx.AppendAudit(ctx, &record)
}
