package identity

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// API keys look like "svc_sk_<publicID>_<secret>":
//   - publicID: 12 base62 characters drawn from crypto/rand; it is stored in clear text and
//     names the key for the authentication lookup (api_keys.public_id is unique);
//   - secret: base64url without padding of 32 random bytes (43 characters, which may contain
//     '_' and '-'); only HMAC-SHA256(pepper, secret) is stored.
//
// Because the secret may contain '_', keys are parsed by fixed offsets, never by splitting.
const (
	apiKeyPrefix       = "svc_sk_"
	apiKeyPublicIDLen  = 12
	apiKeySecretBytes  = 32
	apiKeySecretLen    = 43 // base64.RawURLEncoding.EncodedLen(apiKeySecretBytes)
	apiKeySeparatorPos = len(apiKeyPrefix) + apiKeyPublicIDLen
	// APIKeyLen is the exact length of a well-formed API key: 7 + 12 + 1 + 43 = 63.
	APIKeyLen = apiKeySeparatorPos + 1 + apiKeySecretLen
)

// Character classes of the key alphabet, indexed by byte.
const (
	classBase62 = 1 << iota
	classBase64URL
	// classBase64Last marks base64url characters whose 6-bit value has its two low bits clear:
	// the only ones allowed last in a 43-character encoding of 32 bytes (258 bits encode 256;
	// the 2 spare bits must be zero, so every secret has exactly one spelling).
	classBase64Last
)

var apiKeyClass = func() (t [256]uint8) {
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := 0; i < len(base62); i++ {
		t[base62[i]] |= classBase62
	}
	for i := 0; i < len(b64); i++ {
		t[b64[i]] |= classBase64URL
		if i&3 == 0 {
			t[b64[i]] |= classBase64Last
		}
	}
	return t
}()

// NewAPIKey mints a key from crypto/rand. It returns the key's public id (12 base62
// characters), its secret (43 base64url characters encoding 32 random bytes) and the full key
// "svc_sk_<publicID>_<secret>" that is shown to the caller once. It fails only when crypto/rand
// does.
func NewAPIKey() (publicID, secret, full string, err error) {
	if publicID, err = RandomBase62(apiKeyPublicIDLen); err != nil {
		return "", "", "", fmt.Errorf("identity: new api key: %w", err)
	}
	var raw [apiKeySecretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", "", fmt.Errorf("identity: new api key: %w", err)
	}
	secret = base64.RawURLEncoding.EncodeToString(raw[:])
	return publicID, secret, apiKeyPrefix + publicID + "_" + secret, nil
}

// ParseAPIKey splits a key of the exact shape "svc_sk_<12 base62>_<43 base64url>" into its
// public id and secret, the secret being the canonical unpadded base64url spelling of 32 bytes.
// Anything else (another length, prefix or separator, a character outside its alphabet, non-zero
// trailing bits) is rejected with ok false. It reads only s: no allocation, no database, so a
// malformed key costs nothing.
func ParseAPIKey(s string) (publicID, secret string, ok bool) {
	if len(s) != APIKeyLen || s[:len(apiKeyPrefix)] != apiKeyPrefix || s[apiKeySeparatorPos] != '_' {
		return "", "", false
	}
	for i := len(apiKeyPrefix); i < apiKeySeparatorPos; i++ {
		if apiKeyClass[s[i]]&classBase62 == 0 {
			return "", "", false
		}
	}
	for i := apiKeySeparatorPos + 1; i < len(s)-1; i++ {
		if apiKeyClass[s[i]]&classBase64URL == 0 {
			return "", "", false
		}
	}
	if apiKeyClass[s[len(s)-1]]&classBase64Last == 0 {
		return "", "", false
	}
	return s[len(apiKeyPrefix):apiKeySeparatorPos], s[apiKeySeparatorPos+1:], true
}

// HashAPIKeySecret returns HMAC-SHA256(pepper, secret): what the store keeps of a key's
// secret. pepper is derived from the master key (DeriveKey(masterKey, "api-key")), so a copy of
// the database alone does not let anyone test guesses.
// Compare hashes with hmac.Equal (constant time), never with bytes.Equal.
func HashAPIKeySecret(pepper []byte, secret string) []byte {
	m := hmac.New(sha256.New, pepper)
	m.Write([]byte(secret))
	return m.Sum(nil)
}
