package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// OIDC client secrets are high-entropy: base64url without padding of 32 random bytes (43
// characters). Only HMAC-SHA256(pepper, secret) is stored, the pepper being
// DeriveKey(masterKey, "oidc-client-secret"). A guess therefore costs one HMAC to check, not a
// bcrypt run (fosite's default bcrypt cost 12 takes about 280 ms per token request here), and
// with 256 bits of entropy a fast hash loses nothing against offline guessing.
const (
	clientSecretBytes = 32
	// ClientSecretLen is the length of a client secret: base64.RawURLEncoding.EncodedLen(32).
	ClientSecretLen = 43
)

// NewClientSecret returns a fresh client secret: 43 base64url characters encoding 32 bytes
// from crypto/rand. It fails only when crypto/rand does.
func NewClientSecret() (string, error) {
	var raw [clientSecretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("oauth: new client secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// HashClientSecret returns HMAC-SHA256(pepper, secret): what the store keeps of a client
// secret (32 bytes). pepper is DeriveKey(masterKey, "oidc-client-secret"), so a copy of the
// database alone does not let anyone test guesses.
func HashClientSecret(pepper []byte, secret string) []byte {
	m := hmac.New(sha256.New, pepper)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// ClientSecretMatches reports whether secret is the one whose HashClientSecret under pepper is
// hash, comparing in constant time. An empty hash (a public client) never matches, whatever
// the secret.
func ClientSecretMatches(pepper []byte, secret string, hash []byte) bool {
	if len(hash) == 0 {
		return false
	}
	return hmac.Equal(HashClientSecret(pepper, secret), hash)
}
