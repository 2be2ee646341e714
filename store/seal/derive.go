package seal

import (
	"crypto/hmac"
	"crypto/sha256"
)

// DeriveKey derives an independent 32-byte key for one purpose (for example "session-cookie")
// from the master key, so that no two mechanisms share key material: HMAC-SHA256(master,
// "gatehouse/v1/" + purpose). Every key Gatehouse keeps under GATEHOUSE_SECRET_KEY (sealing,
// session cookies, API-key and client-secret peppers, fosite's HMAC strategy) is derived here,
// and its bytes must never change: existing databases, cookies and API keys depend on them
// (TestDeriveKeyStable holds them to values computed before this function moved here).
func DeriveKey(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("gatehouse/v1/" + purpose))
	return m.Sum(nil)
}
