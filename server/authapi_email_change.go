package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Email change, wire-compatible with better-auth's changeEmail with verification:
// POST /api/auth/change-email mails a link to the new address and a notice to the current one;
// the link is GET /api/auth/verify-email?token=…[&callbackURL=…], which moves the account
// (identity.ChangeEmail).

// Errors of an email change.
var (
	errEmailIsTheSame = authError(http.StatusBadRequest, kindClientError, "EMAIL_IS_THE_SAME", "Email is the same")
	// errEmailTaken: the link's new address belongs to another account now.
	errEmailTaken = authError(http.StatusConflict, kindConflict,
		"USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL", "User already exists. Use another email.")
)

// ChangeEmail asks to move the caller's account to newEmail. It does the same work and gives
// the same answer whether or not the address is taken: both send-limit admissions, a token,
// both messages rendered, and in one transaction the lookup, a stored token, the two messages
// queued and the audit row. For a taken address the token is a decoy and the link's message is
// marked Discard (never sent); the notice to the current address goes either way, so the
// caller's own mailbox tells nothing either.
func (s *Server) ChangeEmail(ctx context.Context, request gen.ChangeEmailRequestObject) (gen.ChangeEmailResponseObject, error) {
	noStore(ctx)
	b := request.Body
	if err := s.checkCallbackURL(b.CallbackURL); err != nil {
		return nil, err
	}
	user := PrincipalFrom(ctx).User
	newEmail := store.NormalizeEmail(string(b.NewEmail))
	if newEmail == user.Email {
		return nil, errEmailIsTheSame
	}
	toNew, err := s.admitMail(ctx, newEmail)
	if err != nil {
		return nil, err
	}
	toOld, err := s.admitMail(ctx, user.Email)
	if err != nil {
		s.undoMail(ctx, toNew)
		return nil, err
	}
	token, err := identity.NewEmailToken()
	if err != nil {
		return nil, err
	}
	q := url.Values{"token": {token}}
	if b.CallbackURL != nil {
		q.Set("callbackURL", *b.CallbackURL)
	}
	link, linkErr := s.mailer.Compose.ChangeEmail(newEmail, user.Name, s.cfg.BaseURL+"/api/auth/verify-email?"+q.Encode(),
		identity.EmailChangeLinkLifetime)
	notice, noticeErr := s.mailer.Compose.EmailChangeNotice(user.Email, user.Name, newEmail)
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.UserByEmailTx(ctx, newEmail)
		taken := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		owner := user
		if taken {
			owner = store.User{Email: user.Email} // no ID: the token is a decoy
		}
		if err := identity.StoreEmailChangeToken(ctx, tx, token, owner, newEmail); err != nil {
			return err
		}
		link.Discard = taken
		if err := s.sendMail(ctx, tx, toNew, link, linkErr); err != nil {
			return err
		}
		if err := s.sendMail(ctx, tx, toOld, notice, noticeErr); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: identity.EmailChangeRequestAction, TargetType: "user", TargetID: user.ID,
			Metadata: map[string]any{"to": newEmail}})
	})
	if err != nil {
		s.undoMail(ctx, toNew)
		s.undoMail(ctx, toOld)
		return nil, err
	}
	return gen.ChangeEmail200JSONResponse{Status: true}, nil
}

// changeEmailLink is verify-email for a token that is not a verification token (invalid is
// that error): an email change's link (identity.ChangeEmail). It returns the change, or invalid
// when the token is no change link either.
func (s *Server) changeEmailLink(ctx context.Context, tx *store.Tx, token string, invalid error) (*identity.EmailChange, error) {
	c, err := identity.ChangeEmail(ctx, tx, token, auditEntry(ctx, auditEvent{}))
	if errors.Is(err, identity.ErrTokenInvalid) {
		return nil, invalid
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}
