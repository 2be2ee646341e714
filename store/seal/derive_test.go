package seal

import (
	"encoding/hex"
	"testing"
)

// fixedMaster is a 32-byte master key written out so that the values below can be checked by
// anyone: they were computed by the code before key derivation moved into this package.
var fixedMaster = []byte("gatehouse fixed master key 0001!")

// TestDeriveKeyStable holds DeriveKey to its bytes for every purpose Gatehouse derives: a
// change would orphan every sealed secret, session cookie, API key and client secret.
func TestDeriveKeyStable(t *testing.T) {
	want := map[string]string{
		"seal":                    "ebf1315e7ce8df7a00e490b67a2d176ccddcf49bfaec6a14aa8715595d8f0890",
		"session-cookie":          "14630ef2b163d8d1eb4c62802f740711b59491037083ed4c0325fc471d8740e8",
		"api-key":                 "daaba261e9889545fffbd47dc01fa6dea5b53c2f47a94e87c0967727fd118029",
		"oidc-client-secret":      "a502808b11f625fc0ca66c1c6f212a922eff5eafb4ef840dee6df05cdd183a64",
		"oauth-hmac":              "3de5077af16e6215121c0951ea8bbe0772e402771b2cc38fe65a5f0f6c0ba19b",
		"oauth-browser-challenge": "8f568b371f6980f69a6619cdcbcd118657a159cfec9d9f6bdbbbc46413a0cdfc",
		"social-flow":             "40f284a3ea777bd53c2c9b034e3d8a9b3c4a2c27fc3acf1681526b83f9b3eba3",
	}
	for purpose, hexKey := range want {
		if got := hex.EncodeToString(DeriveKey(fixedMaster, purpose)); got != hexKey {
			t.Errorf("DeriveKey(fixed, %q) = %s, want %s", purpose, got, hexKey)
		}
	}
}

// TestOpensValueSealedBeforeMove opens a value sealed under fixedMaster by the build before key
// derivation moved here: a database written then keeps opening.
func TestOpensValueSealedBeforeMove(t *testing.T) {
	const sealed = "v1.74f6103e.L5Vz1o7VfZsBgJCOj-KzNfKPJSiUl3G8olEcsBV4ZeWQW0Ot26-hpzvLSMxuEcgAMz4"
	k, err := NewKeyring(fixedMaster)
	if err != nil {
		t.Fatal(err)
	}
	if k.KeyID() != "74f6103e" {
		t.Fatalf("KeyID = %q, want 74f6103e", k.KeyID())
	}
	got, err := k.Open(sealed, []byte("config_entries/env_1/API_TOKEN"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if string(got) != "sealed before the move" {
		t.Fatalf("Open = %q, want %q", got, "sealed before the move")
	}
}
