package server

import (
	"context"
	"errors"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Sign-up with email and password: better-auth's JSON, or the hosted sign-up page's form post
// (hostedpages.go).

// SignUpEmail creates a user with a password and signs them in.
func (s *Server) SignUpEmail(ctx context.Context, request gen.SignUpEmailRequestObject) (gen.SignUpEmailResponseObject, error) {
	body, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	noStore(ctx)
	// A browser's form post (the hosted sign-up page) is answered with 303 redirects: on to
	// "check your inbox" or the callbackURL, or back to the page with the refusal.
	browser := request.FormdataBody != nil && wantsPage(ctx)
	refused := func(err error) (gen.SignUpEmailResponseObject, error) {
		if res, ok := signUpPageRefused(err, body); browser && ok {
			return res, nil
		}
		return nil, err
	}
	if err := s.checkEmailSignUp(ctx, body.CallbackURL, string(body.Email)); err != nil {
		return refused(err)
	}
	u := store.User{Name: body.Name, Email: store.NormalizeEmail(string(body.Email))}
	if img, err := body.Image.Get(); err == nil {
		u.Image = &img
	}
	sess, token, err := s.signUp(ctx, &u, body.Password, rememberMe(body.RememberMe), body.CallbackURL)
	if err != nil {
		res, err := s.signUpRefused(ctx, u, err)
		if err != nil {
			return refused(err)
		}
		if browser { // a taken address under RequireEmailVerification: as a new one
			return signUpPageDone(false, body.CallbackURL), nil
		}
		return res, nil
	}
	if token != "" {
		s.setSessionCookie(ctx, token, sess.RememberMe)
	}
	if browser {
		return signUpPageDone(token != "", body.CallbackURL), nil
	}
	if token == "" { // RequireEmailVerification: signed in only once verified
		return gen.SignUpEmail200JSONResponse{Body: gen.AuthSignUpResponse{Token: nullable.NewNullNullable[string](), User: toAuthUser(u, false)}}, nil
	}
	return gen.SignUpEmail200JSONResponse{Body: gen.AuthSignUpResponse{
		Token: nullable.NewNullableWithValue(token), User: toAuthUser(u, false)}}, nil
}

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
			if sess, token, err = s.createSession(ctx, tx, u.ID, remember, nil, amrPassword); err != nil {
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
