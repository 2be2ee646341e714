package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Passkeys on better-auth's passkey wire (identity.Passkeys): registration by a signed-in
// user, discoverable sign-in, and listing, renaming and removing a user's passkeys. A passkey
// sign-in records amr hwk or swk, plus mfa when the authenticator verified the user, which
// satisfies acr_values=urn:gatehouse:mfa and the organizations' requireTwoFactor.

// Errors of the passkey routes, with better-auth's codes and messages.
var (
	errPasskeyChallenge = authError(http.StatusBadRequest, kindClientError,
		"CHALLENGE_NOT_FOUND", "Challenge not found")
	errPasskeyRegistration = authError(http.StatusBadRequest, kindClientError,
		"FAILED_TO_VERIFY_REGISTRATION", "Failed to verify registration")
	errPasskeyRegistered = authError(http.StatusBadRequest, kindClientError,
		"PREVIOUSLY_REGISTERED", "Previously registered")
	errPasskeyUnknown = authError(http.StatusUnauthorized, kindUnauthorized,
		"PASSKEY_NOT_FOUND", "Passkey not found")
	errPasskeyAuthentication = authError(http.StatusBadRequest, kindClientError,
		"AUTHENTICATION_FAILED", "Authentication failed")
	errPasskeyNotFound = authError(http.StatusNotFound, kindNotFound,
		"PASSKEY_NOT_FOUND", "Passkey not found")
	errPasskeysUnavailable = authError(http.StatusBadRequest, kindClientError,
		"PASSKEYS_UNAVAILABLE", "Passkeys need a base URL with a domain name")
)

// passkeyError maps the ceremonies' errors to the routes' problems.
func passkeyError(err error) error {
	switch {
	case errors.Is(err, identity.ErrPasskeyChallenge):
		return errPasskeyChallenge
	case errors.Is(err, identity.ErrPasskeyRegistration):
		return errPasskeyRegistration
	case errors.Is(err, identity.ErrPasskeyRegistered):
		return errPasskeyRegistered
	case errors.Is(err, identity.ErrPasskeyNotFound):
		return errPasskeyUnknown
	case errors.Is(err, identity.ErrPasskeyAuthentication):
		return errPasskeyAuthentication
	case errors.Is(err, identity.ErrPasskeysUnavailable):
		return errPasskeysUnavailable
	}
	return err
}

// passkeyOptions is a ceremony's options JSON as the generated answer type.
func passkeyOptions(raw json.RawMessage) (gen.AuthPasskeyOptions, error) {
	var o gen.AuthPasskeyOptions
	err := json.Unmarshal(raw, &o)
	return o, err
}

// GeneratePasskeyRegistrationOptions starts registering a passkey for the caller.
func (s *Server) GeneratePasskeyRegistrationOptions(ctx context.Context, request gen.GeneratePasskeyRegistrationOptionsRequestObject) (gen.GeneratePasskeyRegistrationOptionsResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	existing, err := s.store.PasskeysOf(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	var attachment, name string
	if a := request.Params.AuthenticatorAttachment; a != nil {
		attachment = string(*a)
	}
	if n := request.Params.Name; n != nil {
		name = *n
	}
	raw, cookie, err := s.passkeys.BeginRegistration(ctx, p.User, existing, attachment, name)
	if err != nil {
		return nil, passkeyError(err)
	}
	opts, err := passkeyOptions(raw)
	if err != nil {
		return nil, err
	}
	setCookie(ctx, cookie)
	return gen.GeneratePasskeyRegistrationOptions200JSONResponse{Body: opts}, nil
}

// VerifyPasskeyRegistration finishes the caller's registration and stores the passkey.
func (s *Server) VerifyPasskeyRegistration(ctx context.Context, request gen.VerifyPasskeyRegistrationRequestObject) (gen.VerifyPasskeyRegistrationResponseObject, error) {
	noStore(ctx)
	p := PrincipalFrom(ctx)
	setCookie(ctx, s.passkeys.ExpiredCookie())
	response, err := json.Marshal(request.Body.Response)
	if err != nil {
		return nil, err
	}
	pk, err := s.passkeys.FinishRegistration(requestOf(ctx), p.User, response, request.Body.Name)
	if err != nil {
		return nil, passkeyError(err)
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if pk, err = tx.CreatePasskey(ctx, pk); errors.Is(err, store.ErrConflict) {
			return errPasskeyRegistered
		} else if err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.passkey_register", TargetType: "user", TargetID: p.ID(),
			Metadata: map[string]any{"passkeyId": pk.ID}})
	})
	if err != nil {
		return nil, err
	}
	return gen.VerifyPasskeyRegistration200JSONResponse(toAuthPasskey(pk)), nil
}

// GeneratePasskeyAuthenticationOptions starts a discoverable passkey sign-in.
func (s *Server) GeneratePasskeyAuthenticationOptions(ctx context.Context, _ gen.GeneratePasskeyAuthenticationOptionsRequestObject) (gen.GeneratePasskeyAuthenticationOptionsResponseObject, error) {
	noStore(ctx)
	raw, cookie, err := s.passkeys.BeginLogin(ctx)
	if err != nil {
		return nil, passkeyError(err)
	}
	opts, err := passkeyOptions(raw)
	if err != nil {
		return nil, err
	}
	setCookie(ctx, cookie)
	return gen.GeneratePasskeyAuthenticationOptions200JSONResponse{Body: opts}, nil
}

// VerifyPasskeyAuthentication verifies a passkey assertion, records the passkey's counter and
// backup state and starts a session. With the cookie of a pending password sign-in of the
// passkey's user, the passkey is that sign-in's second factor (completeWithPasskey); a pending
// sign-in of someone else is left alone.
func (s *Server) VerifyPasskeyAuthentication(ctx context.Context, request gen.VerifyPasskeyAuthenticationRequestObject) (gen.VerifyPasskeyAuthenticationResponseObject, error) {
	noStore(ctx)
	setCookie(ctx, s.passkeys.ExpiredCookie())
	response, err := json.Marshal(request.Body.Response)
	if err != nil {
		return nil, err
	}
	a, err := s.passkeys.FinishLogin(requestOf(ctx), response)
	if err != nil {
		return nil, passkeyError(err)
	}
	user, err := s.store.User(ctx, a.Passkey.UserID)
	if err != nil {
		return nil, err
	}
	if err := s.requireVerifiedEmail(ctx, user, nil); err != nil {
		return nil, err
	}
	pendingHash, pending, err := s.twoFactors.PendingSignIn(requestOf(ctx))
	if err != nil && !errors.Is(err, identity.ErrNoPendingSignIn) {
		return nil, err
	}
	secondStep := pendingHash != "" && pending.UserID == user.ID
	remember, amr := rememberMe(request.Body.RememberMe), a.AMR
	if secondStep {
		// A password and a passkey: two factors, whether or not the authenticator verified
		// the user.
		remember, amr = pending.RememberMe, []string{"pwd", a.AMR[0], "mfa"}
	}
	var sess store.Session
	var token string
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.RecordPasskeyUse(ctx, a.Passkey.ID, a.Counter, a.BackedUp); errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			return errPasskeyAuthentication // a concurrent use, or the passkey was removed meanwhile
		} else if err != nil {
			return err
		}
		if secondStep {
			if err := tx.DeleteTwoFactorToken(ctx, store.TwoFactorSignIn, pendingHash); errors.Is(err, store.ErrNotFound) {
				return errInvalidTwoFactorCookie // completed by a concurrent request meanwhile
			} else if err != nil {
				return err
			}
		}
		var err error
		sess, token, err = s.createSession(ctx, tx, user.ID, remember, nil, amr)
		return err
	})
	if err != nil {
		return nil, err
	}
	if secondStep {
		setCookie(ctx, s.twoFactors.ExpiredTwoFactorCookie())
	}
	s.setSessionCookie(ctx, token, sess.RememberMe)
	authUser, err := s.authUser(ctx, user)
	if err != nil {
		return nil, err
	}
	return gen.VerifyPasskeyAuthentication200JSONResponse{Body: gen.AuthSessionWithUser{
		Session: toAuthSession(sess, token), User: authUser}}, nil
}

// ListPasskeys lists the caller's passkeys.
func (s *Server) ListPasskeys(ctx context.Context, _ gen.ListPasskeysRequestObject) (gen.ListPasskeysResponseObject, error) {
	noStore(ctx)
	pks, err := s.store.PasskeysOf(ctx, PrincipalFrom(ctx).ID())
	if err != nil {
		return nil, err
	}
	out := make(gen.ListPasskeys200JSONResponse, 0, len(pks))
	for _, pk := range pks {
		out = append(out, toAuthPasskey(pk))
	}
	return out, nil
}

// DeletePasskey removes one of the caller's passkeys.
func (s *Server) DeletePasskey(ctx context.Context, request gen.DeletePasskeyRequestObject) (gen.DeletePasskeyResponseObject, error) {
	p := PrincipalFrom(ctx)
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.DeletePasskey(ctx, p.ID(), request.Body.Id); errors.Is(err, store.ErrNotFound) {
			return errPasskeyNotFound
		} else if err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "user.passkey_remove", TargetType: "user", TargetID: p.ID(),
			Metadata: map[string]any{"passkeyId": request.Body.Id}})
	})
	if err != nil {
		return nil, err
	}
	return gen.DeletePasskey200JSONResponse{Status: true}, nil
}

// UpdatePasskey renames one of the caller's passkeys.
func (s *Server) UpdatePasskey(ctx context.Context, request gen.UpdatePasskeyRequestObject) (gen.UpdatePasskeyResponseObject, error) {
	p := PrincipalFrom(ctx)
	var pk store.Passkey
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if pk, err = tx.RenamePasskey(ctx, p.ID(), request.Body.Id, request.Body.Name); errors.Is(err, store.ErrNotFound) {
			return errPasskeyNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return gen.UpdatePasskey200JSONResponse{Passkey: toAuthPasskey(pk)}, nil
}

// toAuthPasskey is a passkey in better-auth's wire form.
func toAuthPasskey(pk store.Passkey) gen.AuthPasskey {
	name := nullable.NewNullNullable[string]()
	if pk.Name != nil {
		name = nullable.NewNullableWithValue(*pk.Name)
	}
	return gen.AuthPasskey{Id: pk.ID, Name: name, UserId: pk.UserID, CredentialID: pk.CredentialID,
		PublicKey: pk.PublicKey, Counter: int(pk.Counter), DeviceType: gen.AuthPasskeyDeviceType(pk.DeviceType),
		BackedUp: pk.BackedUp, Transports: pk.Transports, Aaguid: pk.AAGUID, CreatedAt: pk.CreatedAt.UTC()}
}
