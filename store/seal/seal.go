// Package seal encrypts secrets at rest (config secrets today; processor credentials and
// signing keys later) with AES-256-GCM under a Keyring of master keys.
//
// # Format
//
// A sealed value is one ASCII string, safe in a TEXT column:
//
//	"v1." + keyID + "." + base64url(nonce || ciphertext || tag)
//
// where:
//   - "v1" is the format version; any other prefix is refused.
//   - keyID is 8 lower-case hex digits: the first 4 bytes of SHA-256 of the sealing key, which
//     is DeriveKey(master, "seal") — never the master key itself, so the master key used
//     for cookies and other purposes is not what encrypts secrets. The id tells Open which key
//     of the ring to use and lets NeedsRewrap find values sealed under an older key.
//   - nonce is 12 fresh random bytes per Seal; the tag is GCM's 16 bytes.
//   - base64url is RFC 4648 §5 without padding, in canonical form only (a string that decodes
//     to the same bytes but is spelled differently is refused).
//
// The GCM additional data is the header "v1.<keyID>." followed by the caller's aad, which binds
// the ciphertext to its row (for example "config:<environmentID>:<key>"): a value copied into
// another row, or re-labelled with another key id, does not open.
//
// Open never returns partial plaintext: every failure (bad format, unknown key id, wrong aad,
// any altered byte) is ErrOpen, and it never panics on any input.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Version is the prefix of every value this package seals.
const Version = "v1"

// Sizes of the format's parts.
const (
	// KeyIDLen is the length of a key id in hex digits.
	KeyIDLen = 8
	// NonceSize is the GCM nonce length in bytes.
	NonceSize = 12
	// Overhead is what sealing adds to the plaintext before base64: nonce and tag.
	Overhead = NonceSize + 16
	// MinMasterKeyLen is the shortest master key NewKeyring accepts, in bytes.
	MinMasterKeyLen = 32
)

// derivePurpose names the sealing key derived from a master key (see DeriveKey).
const derivePurpose = "seal"

// ErrOpen is returned by Open for every value it cannot open: malformed, sealed under a key
// the ring does not hold, bound to other additional data, or altered. It says nothing more,
// on purpose.
var ErrOpen = errors.New("seal: cannot open sealed value")

// b64 is the canonical unpadded base64url encoding.
var b64 = base64.RawURLEncoding.Strict()

// Keyring seals under one current key and opens under the current key or any older one. It is
// safe for concurrent use; build it with NewKeyring.
type Keyring struct {
	currentID string
	keys      map[string]ringKey
}

// ringKey is one sealing key of a ring.
type ringKey struct {
	key  []byte // DeriveKey(master, "seal")
	aead cipher.AEAD
}

// NewKeyring builds a ring from the current master key and optional older master keys, which
// are used for opening only (values sealed before a rotation). Each master key must be at
// least MinMasterKeyLen bytes; a key given twice is kept once. It fails when two different
// keys would share a key id (a 1 in 2^32 accident: generate another key).
func NewKeyring(current []byte, old ...[]byte) (*Keyring, error) {
	k := &Keyring{keys: map[string]ringKey{}}
	id, err := k.add(current)
	if err != nil {
		return nil, fmt.Errorf("seal: current key: %w", err)
	}
	k.currentID = id
	for i, m := range old {
		if _, err := k.add(m); err != nil {
			return nil, fmt.Errorf("seal: old key %d: %w", i+1, err)
		}
	}
	return k, nil
}

// add derives the sealing key of master and registers it under its id.
func (k *Keyring) add(master []byte) (string, error) {
	if len(master) < MinMasterKeyLen {
		return "", fmt.Errorf("want at least %d bytes, have %d", MinMasterKeyLen, len(master))
	}
	key := DeriveKey(master, derivePurpose)
	sum := sha256.Sum256(key)
	id := hex.EncodeToString(sum[:KeyIDLen/2])
	block, err := aes.NewCipher(key) // 32 bytes: AES-256
	if err != nil {
		return "", err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	if have, dup := k.keys[id]; dup {
		// The same master key twice derives the same id: keep one. Two different keys with
		// one id could not be told apart by Open.
		if subtle.ConstantTimeCompare(have.key, key) != 1 {
			return "", errors.New("key id collides with another key of the ring")
		}
		return id, nil
	}
	k.keys[id] = ringKey{key: key, aead: aead}
	return id, nil
}

// KeyID returns the id of the current key: the id that Seal writes.
func (k *Keyring) KeyID() string { return k.currentID }

// Seal encrypts plaintext under the current key with a fresh random nonce, binding it to aad,
// and returns the sealed string (see the package documentation). It fails only when the
// system's random source does.
func (k *Keyring) Seal(plaintext, aad []byte) (string, error) {
	header := header(k.currentID)
	buf := make([]byte, NonceSize, Overhead+len(plaintext))
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("seal: nonce: %w", err)
	}
	buf = k.keys[k.currentID].aead.Seal(buf, buf[:NonceSize], plaintext, additionalData(header, aad))
	return header + b64.EncodeToString(buf), nil
}

// Open decrypts a value made by Seal under any key of the ring with the same aad. Every
// failure is ErrOpen, with no plaintext.
func (k *Keyring) Open(sealed string, aad []byte) ([]byte, error) {
	id, body, ok := parse(sealed)
	if !ok {
		return nil, ErrOpen
	}
	rk, ok := k.keys[id]
	if !ok {
		return nil, ErrOpen
	}
	raw, err := b64.DecodeString(body)
	if err != nil || len(raw) < Overhead || b64.EncodeToString(raw) != body {
		return nil, ErrOpen
	}
	plaintext, err := rk.aead.Open(nil, raw[:NonceSize], raw[NonceSize:], additionalData(header(id), aad))
	if err != nil {
		return nil, ErrOpen
	}
	if plaintext == nil {
		plaintext = []byte{}
	}
	return plaintext, nil
}

// NeedsRewrap reports whether sealed is not under the current key: sealed under an older key,
// or not a well-formed sealed value at all. It does not decrypt.
func (k *Keyring) NeedsRewrap(sealed string) bool {
	id, _, ok := parse(sealed)
	return !ok || id != k.currentID
}

// Rewrap opens sealed with aad and seals the plaintext again under the current key. It
// returns the value unchanged (and false) when it is under the current key already, and
// ErrOpen when it cannot be opened.
func (k *Keyring) Rewrap(sealed string, aad []byte) (string, bool, error) {
	if !k.NeedsRewrap(sealed) {
		return sealed, false, nil
	}
	plaintext, err := k.Open(sealed, aad)
	if err != nil {
		return "", false, err
	}
	out, err := k.Seal(plaintext, aad)
	clear(plaintext)
	if err != nil {
		return "", false, err
	}
	return out, true, nil
}

// KeyIDOf returns the key id written in a sealed value's header, and false when the value is
// not in this package's format. It does not check that the value opens.
func KeyIDOf(sealed string) (string, bool) {
	id, _, ok := parse(sealed)
	return id, ok
}

// header is the prefix of a value sealed under key id.
func header(id string) string { return Version + "." + id + "." }

// additionalData is the GCM additional data: the header, then the caller's aad.
func additionalData(header string, aad []byte) []byte {
	out := make([]byte, 0, len(header)+len(aad))
	return append(append(out, header...), aad...)
}

// parse splits a sealed value into its key id and base64 body.
func parse(sealed string) (id, body string, ok bool) {
	rest, found := strings.CutPrefix(sealed, Version+".")
	if !found || len(rest) < KeyIDLen+1 || rest[KeyIDLen] != '.' {
		return "", "", false
	}
	id, body = rest[:KeyIDLen], rest[KeyIDLen+1:]
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", "", false
		}
	}
	return id, body, true
}
