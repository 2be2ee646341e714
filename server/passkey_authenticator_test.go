package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
)

// softAuthenticator is a test's own WebAuthn authenticator (a P-256 key, "none" attestation,
// CTAP2 authenticator data), written from the WebAuthn Level 3 specification: what a browser
// hands navigator.credentials.create/get's caller. Its fields are the knobs tests turn to make
// answers the relying party must refuse.
type softAuthenticator struct {
	key            *ecdsa.PrivateKey
	credID         []byte
	userHandle     []byte
	origin         string // the clientDataJSON origin
	rpID           string // hashed into the authenticator data
	counter        uint32 // the next signature counter is counter+1 (see assert)
	backupEligible bool
	userVerified   bool
}

func newSoftAuthenticator(t *testing.T) *softAuthenticator {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	return &softAuthenticator{key: key, credID: id, origin: testBaseURL, rpID: "gatehouse.test", userVerified: true}
}

var b64url = base64.RawURLEncoding

// authData is rpIdHash || flags || signCount, then the attested credential data when attested.
func (a *softAuthenticator) authData(t *testing.T, counter uint32, attested bool) []byte {
	t.Helper()
	h := sha256.Sum256([]byte(a.rpID))
	flags := byte(0x01) // UP
	if a.userVerified {
		flags |= 0x04
	}
	if a.backupEligible {
		flags |= 0x08 | 0x10 // BE, BS
	}
	if attested {
		flags |= 0x40
	}
	out := append([]byte{}, h[:]...)
	out = append(out, flags)
	out = binary.BigEndian.AppendUint32(out, counter)
	if attested {
		out = append(out, make([]byte, 16)...) // AAGUID: zero, as "none" attestation has it
		out = binary.BigEndian.AppendUint16(out, uint16(len(a.credID)))
		out = append(out, a.credID...)
		pad := func(b *big.Int) []byte { return b.FillBytes(make([]byte, 32)) }
		cose, err := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: pad(a.key.X), -3: pad(a.key.Y)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cose...)
	}
	return out
}

func (a *softAuthenticator) clientData(t *testing.T, typ, challenge string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": a.origin, "crossOrigin": false})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// register answers creation options (generate-register-options' body) with a
// RegistrationResponseJSON.
func (a *softAuthenticator) register(t *testing.T, options map[string]any) map[string]any {
	t.Helper()
	challenge, _ := options["challenge"].(string)
	user, _ := options["user"].(map[string]any)
	uid, _ := user["id"].(string)
	handle, err := b64url.DecodeString(uid)
	if err != nil {
		t.Fatalf("user.id %q: %v", uid, err)
	}
	a.userHandle = handle
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{},
		"authData": a.authData(t, a.counter, true)})
	if err != nil {
		t.Fatal(err)
	}
	id := b64url.EncodeToString(a.credID)
	return map[string]any{"id": id, "rawId": id, "type": "public-key", "clientExtensionResults": map[string]any{},
		"authenticatorAttachment": "platform",
		"response": map[string]any{"clientDataJSON": b64url.EncodeToString(a.clientData(t, "webauthn.create", challenge)),
			"attestationObject": b64url.EncodeToString(att), "transports": []string{"internal"}}}
}

// assert answers request options (generate-authenticate-options' body) with an
// AuthenticationResponseJSON signed with signature counter counter.
func (a *softAuthenticator) assertWith(t *testing.T, options map[string]any, counter uint32) map[string]any {
	t.Helper()
	challenge, _ := options["challenge"].(string)
	ad := a.authData(t, counter, false)
	cd := a.clientData(t, "webauthn.get", challenge)
	h := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), h[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	id := b64url.EncodeToString(a.credID)
	return map[string]any{"id": id, "rawId": id, "type": "public-key", "clientExtensionResults": map[string]any{},
		"authenticatorAttachment": "platform",
		"response": map[string]any{"clientDataJSON": b64url.EncodeToString(cd), "authenticatorData": b64url.EncodeToString(ad),
			"signature": b64url.EncodeToString(sig), "userHandle": b64url.EncodeToString(a.userHandle)}}
}

// assert is assertWith the next counter, which it then records.
func (a *softAuthenticator) assert(t *testing.T, options map[string]any) map[string]any {
	t.Helper()
	a.counter++
	return a.assertWith(t, options, a.counter)
}
