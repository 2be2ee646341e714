package server

import (
	"context"
	"errors"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// signUp creates u with the password and the credential account, its first session (none
// under RequireEmailVerification: token "") and the user.sign_up audit row, and queues the
// verification mail to callbackURL, in one transaction. A taken email is errUserExists; under
// RequireEmailVerification, which answers it as a new one (signUpRefused), after the same work:
// the password hashed, and in a committed transaction the lookup, a decoy verification token
// and a decoy message (never sent). The attempt is counted per client IP first (429 past the
// limit); one that fails for the server's sake (hashing at capacity, the database) is taken
// back, with its mail's send count.
func (s *Server) signUp(ctx context.Context, u *store.User, password string, remember bool, callbackURL *string) (store.Session, string, error) {
	attempts, err := s.hit(ctx, throttleKey{s.signUpThrottle, "ip:" + requestMetaFrom(ctx).IP})
	if err != nil {
		return store.Session{}, "", err
	}
	admission, err := s.admitMail(ctx, u.Email)
	if err == nil {
		var sess store.Session
		var token string
		var decoy bool
		if sess, token, decoy, err = s.createUser(ctx, u, password, remember, admission, callbackURL); err == nil {
			return sess, token, nil
		}
		if !decoy {
			s.undoMail(ctx, admission)
		}
	}
	if !errors.Is(err, errUserExists) {
		s.undo(ctx, attempts...)
	}
	return store.Session{}, "", err
}

// createUser is signUp's work after the throttles. decoy reports that the email was taken and
// a decoy token and message were committed instead (RequireEmailVerification), with
// errUserExists.
func (s *Server) createUser(ctx context.Context, u *store.User, password string, remember bool, admission identity.MailAdmission, callbackURL *string) (sess store.Session, token string, decoy bool, err error) {
	hash, err := s.hashLimiter.HashPassword(ctx, password)
	if err != nil {
		return store.Session{}, "", false, s.hashErr(err)
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		decoy = false
		if s.cfg.RequireEmailVerification {
			_, err := tx.UserByEmailTx(ctx, u.Email)
			if err == nil {
				decoy = true
				return s.sendVerificationLink(ctx, tx, admission, store.User{Email: u.Email, Name: u.Name}, callbackURL)
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if err := tx.CreateUser(ctx, u, hash); err != nil {
			return err
		}
		if err := s.sendVerificationLink(ctx, tx, admission, *u, callbackURL); err != nil {
			return err
		}
		var err error
		if !s.cfg.RequireEmailVerification {
			if sess, token, err = s.createSession(ctx, tx, u.ID, remember, nil); err != nil {
				return err
			}
		}
		// Nobody was signed in: the new user is the actor.
		actx := context.WithValue(ctx, principalKey{}, &Principal{Kind: PrincipalUser, User: *u})
		return audit(actx, tx, auditEvent{Action: "user.sign_up", TargetType: "user", TargetID: u.ID,
			Metadata: map[string]any{"provider": store.CredentialProvider}})
	})
	switch {
	case err == nil && decoy:
		return store.Session{}, "", true, errUserExists
	case errors.Is(err, store.ErrConflict):
		return store.Session{}, "", false, errUserExists
	}
	return sess, token, false, err
}
