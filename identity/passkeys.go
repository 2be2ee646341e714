package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Passkeys are WebAuthn credentials (github.com/go-webauthn/webauthn): registration by a
// signed-in user and discoverable sign-in. The relying party id is the base URL's host and the
// only accepted origin the base URL's origin. Each ceremony's state is kept in the store under
// the hash of a random token that the gatehouse.passkey cookie carries (signed with a key of
// its own); a verification takes it, right or wrong, so each challenge is used once, and it
// expires after PasskeyCeremonyLifetime.
type Passkeys struct {
	store     *store.Store
	wa        *webauthn.WebAuthn
	cookieKey []byte
	secure    bool
}

// PasskeyCeremonyLifetime is how long a challenge may be answered.
const PasskeyCeremonyLifetime = 5 * time.Minute

const passkeyCookieName = "gatehouse.passkey"

// Errors of the passkey ceremonies.
var (
	// ErrPasskeyChallenge: no ceremony under the cookie (none, a bad signature, used, expired,
	// another purpose or another user's).
	ErrPasskeyChallenge = errors.New("identity: no passkey challenge")
	// ErrPasskeyRegistration: the authenticator's answer does not verify.
	ErrPasskeyRegistration = errors.New("identity: passkey registration does not verify")
	// ErrPasskeyRegistered: the credential is registered already.
	ErrPasskeyRegistered = errors.New("identity: passkey registered already")
	// ErrPasskeyNotFound: the assertion names no registered credential.
	ErrPasskeyNotFound = errors.New("identity: passkey not found")
	// ErrPasskeyAuthentication: the assertion does not verify, or its counter did not advance.
	ErrPasskeyAuthentication = errors.New("identity: passkey authentication does not verify")
	// ErrPasskeysUnavailable: the base URL's host is an IP address, which WebAuthn does not
	// accept as a relying party id.
	ErrPasskeysUnavailable = errors.New("identity: passkeys need a base URL with a domain name")
)

// NewPasskeys returns the passkeys of st for the instance at baseURL (an origin), named rpName
// in authenticators' prompts; master derives the cookie key. secure (an https base URL) names
// the cookie __Host- and marks it Secure. A base URL whose host is an IP address (which WebAuthn
// refuses as a relying party id) gets passkeys whose ceremonies all fail with
// ErrPasskeysUnavailable.
func NewPasskeys(st *store.Store, master []byte, baseURL, rpName string) (*Passkeys, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("identity: passkeys: base URL %q has no host", baseURL)
	}
	p := &Passkeys{store: st, cookieKey: seal.DeriveKey(master, "passkey-cookie"), secure: u.Scheme == "https"}
	if net.ParseIP(u.Hostname()) != nil {
		return p, nil
	}
	wa, err := webauthn.New(&webauthn.Config{RPID: u.Hostname(), RPDisplayName: rpName,
		RPOrigins: []string{u.Scheme + "://" + u.Host}})
	if err != nil {
		return nil, fmt.Errorf("identity: passkeys: %w", err)
	}
	p.wa = wa
	return p, nil
}

// CookieName is the ceremony cookie's name.
func (p *Passkeys) CookieName() string {
	if p.secure {
		return hostCookiePrefix + passkeyCookieName
	}
	return passkeyCookieName
}

// ExpiredCookie deletes the ceremony cookie.
func (p *Passkeys) ExpiredCookie() *http.Cookie { return ExpiredCookie(p.CookieName(), p.secure) }

// HasCookie reports whether r carries a ceremony cookie, valid or not (the CSRF check treats
// such a request like a cookie-authenticated one).
func (p *Passkeys) HasCookie(r *http.Request) bool {
	_, err := r.Cookie(p.CookieName())
	return err == nil
}

// passkeyUser is a Gatehouse user as go-webauthn sees it: the user handle is the user id.
type passkeyUser struct {
	id, name, display string
	creds             []webauthn.Credential
}

func (u passkeyUser) WebAuthnID() []byte                         { return []byte(u.id) }
func (u passkeyUser) WebAuthnName() string                       { return u.name }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.display }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// credential is the go-webauthn view of a stored passkey.
func credential(pk store.Passkey) (webauthn.Credential, error) {
	id, err := base64.RawURLEncoding.DecodeString(pk.CredentialID)
	if err != nil {
		return webauthn.Credential{}, err
	}
	key, err := base64.StdEncoding.DecodeString(pk.PublicKey)
	if err != nil {
		return webauthn.Credential{}, err
	}
	c := webauthn.Credential{ID: id, PublicKey: key,
		Flags:         webauthn.CredentialFlags{BackupEligible: pk.BackupEligible, BackupState: pk.BackedUp},
		Authenticator: webauthn.Authenticator{SignCount: pk.Counter}}
	if aaguid, err := uuid.Parse(pk.AAGUID); err == nil {
		c.Authenticator.AAGUID = aaguid[:]
	}
	for _, t := range strings.Split(pk.Transports, ",") {
		if t != "" {
			c.Transport = append(c.Transport, protocol.AuthenticatorTransport(t))
		}
	}
	return c, nil
}

// BeginRegistration starts registering a passkey for user, whose existing passkeys are
// excluded; attachment ("platform", "cross-platform" or "") narrows the authenticators and
// name is the account name shown (default the email). It returns the creation options JSON
// and the ceremony cookie.
func (p *Passkeys) BeginRegistration(ctx context.Context, user store.User, existing []store.Passkey, attachment, name string) (json.RawMessage, *http.Cookie, error) {
	if p.wa == nil {
		return nil, nil, ErrPasskeysUnavailable
	}
	if name == "" {
		name = user.Email
	}
	display := user.Name
	if display == "" {
		display = user.Email
	}
	var exclude []protocol.CredentialDescriptor
	for _, pk := range existing {
		c, err := credential(pk)
		if err != nil {
			return nil, nil, fmt.Errorf("identity: passkey %s: %w", pk.ID, err)
		}
		exclude = append(exclude, c.Descriptor())
	}
	creation, session, err := p.wa.BeginRegistration(passkeyUser{id: user.ID, name: name, display: display},
		webauthn.WithExclusions(exclude),
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			AuthenticatorAttachment: protocol.AuthenticatorAttachment(attachment),
			ResidentKey:             protocol.ResidentKeyRequirementPreferred,
			UserVerification:        protocol.VerificationPreferred}),
		webauthn.WithConveyancePreference(protocol.PreferNoAttestation))
	if err != nil {
		return nil, nil, fmt.Errorf("identity: begin passkey registration: %w", err)
	}
	return p.begin(ctx, store.PasskeyRegister, user.ID, creation.Response, session)
}

// BeginLogin starts a discoverable passkey sign-in (no allowed credentials, as conditional UI
// needs). It returns the request options JSON and the ceremony cookie.
func (p *Passkeys) BeginLogin(ctx context.Context) (json.RawMessage, *http.Cookie, error) {
	if p.wa == nil {
		return nil, nil, ErrPasskeysUnavailable
	}
	assertion, session, err := p.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationPreferred))
	if err != nil {
		return nil, nil, fmt.Errorf("identity: begin passkey login: %w", err)
	}
	return p.begin(ctx, store.PasskeyAuthenticate, "", assertion.Response, session)
}

func (p *Passkeys) begin(ctx context.Context, purpose, userID string, options any, session *webauthn.SessionData) (json.RawMessage, *http.Cookie, error) {
	opts, err := json.Marshal(options)
	if err != nil {
		return nil, nil, err
	}
	state, err := json.Marshal(session)
	if err != nil {
		return nil, nil, err
	}
	token, err := NewSessionToken()
	if err != nil {
		return nil, nil, err
	}
	err = p.store.InTx(ctx, func(tx *store.Tx) error {
		return tx.CreatePasskeyChallenge(ctx, HashToken(token), store.PasskeyChallenge{Purpose: purpose,
			UserID: userID, Session: string(state), ExpiresAt: p.store.Now().Add(PasskeyCeremonyLifetime)})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("identity: %s challenge: %w", purpose, err)
	}
	return opts, SessionCookie(p.CookieName(), CookieValue(p.cookieKey, token), PasskeyCeremonyLifetime, p.secure), nil
}

// take takes the ceremony of purpose under r's cookie, in a transaction of its own, so that
// it is spent whatever the verification's outcome.
func (p *Passkeys) take(r *http.Request, purpose string) (store.PasskeyChallenge, webauthn.SessionData, error) {
	if p.wa == nil {
		return store.PasskeyChallenge{}, webauthn.SessionData{}, ErrPasskeysUnavailable
	}
	ck, err := r.Cookie(p.CookieName())
	if err != nil || ck.Value == "" {
		return store.PasskeyChallenge{}, webauthn.SessionData{}, ErrPasskeyChallenge
	}
	token, ok := VerifySignedToken(p.cookieKey, ck.Value)
	if !ok {
		return store.PasskeyChallenge{}, webauthn.SessionData{}, ErrPasskeyChallenge
	}
	var c store.PasskeyChallenge
	err = p.store.InTx(r.Context(), func(tx *store.Tx) error {
		var err error
		c, err = tx.TakePasskeyChallenge(r.Context(), purpose, HashToken(token))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.PasskeyChallenge{}, webauthn.SessionData{}, ErrPasskeyChallenge
	}
	if err != nil {
		return store.PasskeyChallenge{}, webauthn.SessionData{}, err
	}
	var session webauthn.SessionData
	if err := json.Unmarshal([]byte(c.Session), &session); err != nil {
		return store.PasskeyChallenge{}, webauthn.SessionData{}, fmt.Errorf("identity: passkey ceremony state: %w", err)
	}
	return c, session, nil
}

// FinishRegistration takes the registration ceremony of r's cookie, which user must have
// started, verifies the authenticator's answer (RegistrationResponseJSON) and returns the
// passkey to store, named name. It does not store it.
func (p *Passkeys) FinishRegistration(r *http.Request, user store.User, response []byte, name *string) (store.Passkey, error) {
	c, session, err := p.take(r, store.PasskeyRegister)
	if err != nil {
		return store.Passkey{}, err
	}
	if c.UserID != user.ID {
		return store.Passkey{}, ErrPasskeyChallenge
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return store.Passkey{}, fmt.Errorf("%w: %v", ErrPasskeyRegistration, err)
	}
	cred, err := p.wa.CreateCredential(passkeyUser{id: user.ID}, session, parsed)
	if err != nil {
		return store.Passkey{}, fmt.Errorf("%w: %v", ErrPasskeyRegistration, err)
	}
	pk := store.Passkey{UserID: user.ID, Name: name,
		CredentialID: base64.RawURLEncoding.EncodeToString(cred.ID),
		PublicKey:    base64.StdEncoding.EncodeToString(cred.PublicKey),
		Counter:      cred.Authenticator.SignCount, DeviceType: "singleDevice",
		BackupEligible: cred.Flags.BackupEligible, BackedUp: cred.Flags.BackupState}
	if cred.Flags.BackupEligible {
		pk.DeviceType = "multiDevice"
	}
	if aaguid, err := uuid.FromBytes(cred.Authenticator.AAGUID); err == nil {
		pk.AAGUID = aaguid.String()
	}
	var transports []string
	for _, t := range cred.Transport {
		transports = append(transports, string(t))
	}
	pk.Transports = strings.Join(transports, ",")
	return pk, nil
}

// Assertion is a verified passkey sign-in: the passkey used, its new counter and backup
// state (to record with store.Tx.RecordPasskeyUse), and the RFC 8176 amr of the sign-in.
type Assertion struct {
	Passkey  store.Passkey
	Counter  uint32
	BackedUp bool
	AMR      []string
}

// FinishLogin takes the sign-in ceremony of r's cookie and verifies the assertion
// (AuthenticationResponseJSON) against the stored passkey it names: origin, relying party,
// challenge, signature, user handle, a counter that advances and the backup-eligible flag of
// the registration. The amr is "hwk" for a device-bound passkey, "swk" for a backup-eligible
// (synced) one, and "mfa" follows when the authenticator verified the user (possession plus
// a PIN or biometric).
func (p *Passkeys) FinishLogin(r *http.Request, response []byte) (Assertion, error) {
	_, session, err := p.take(r, store.PasskeyAuthenticate)
	if err != nil {
		return Assertion{}, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		return Assertion{}, fmt.Errorf("%w: %v", ErrPasskeyAuthentication, err)
	}
	pk, err := p.store.PasskeyByCredentialID(r.Context(), base64.RawURLEncoding.EncodeToString(parsed.RawID))
	if errors.Is(err, store.ErrNotFound) {
		return Assertion{}, ErrPasskeyNotFound
	}
	if err != nil {
		return Assertion{}, err
	}
	stored, err := credential(pk)
	if err != nil {
		return Assertion{}, fmt.Errorf("identity: passkey %s: %w", pk.ID, err)
	}
	handler := func(_, _ []byte) (webauthn.User, error) {
		return passkeyUser{id: pk.UserID, creds: []webauthn.Credential{stored}}, nil
	}
	_, cred, err := p.wa.ValidatePasskeyLogin(handler, session, parsed)
	if err != nil {
		return Assertion{}, fmt.Errorf("%w: %v", ErrPasskeyAuthentication, err)
	}
	if cred.Authenticator.CloneWarning {
		return Assertion{}, fmt.Errorf("%w: the signature counter did not advance", ErrPasskeyAuthentication)
	}
	a := Assertion{Passkey: pk, Counter: cred.Authenticator.SignCount, BackedUp: cred.Flags.BackupState,
		AMR: []string{"hwk"}}
	if pk.BackupEligible {
		a.AMR = []string{"swk"}
	}
	if parsed.Response.AuthenticatorData.Flags.HasUserVerified() {
		a.AMR = append(a.AMR, "mfa")
	}
	return a, nil
}
