package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
)

// DeriveKey derives an independent 32-byte key for one purpose (for example "session-cookie")
// from the master key, so that no two mechanisms share key material.
func DeriveKey(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("gatehouse/v1/" + purpose))
	return m.Sum(nil)
}
