package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/seal"
)

func TestNewClientSecret(t *testing.T) {
	shape := regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	seen := map[string]bool{}
	for range 200 {
		s, err := NewClientSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !shape.MatchString(s) || len(s) != ClientSecretLen {
			t.Fatalf("secret %q does not match %s", s, shape)
		}
		raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
		if err != nil || len(raw) != 32 {
			t.Fatalf("secret %q decodes to %d bytes, %v; want 32", s, len(raw), err)
		}
		if seen[s] {
			t.Fatalf("secret %q drawn twice", s)
		}
		seen[s] = true
	}
}

func TestHashClientSecret(t *testing.T) {
	pepper := seal.DeriveKey([]byte("0123456789abcdef0123456789abcdef"), "oidc-client-secret")
	// The pepper is its own derivation, distinct from the API key one.
	if hmac.Equal(pepper, seal.DeriveKey([]byte("0123456789abcdef0123456789abcdef"), "api-key")) {
		t.Fatal("client-secret pepper equals the api-key pepper")
	}
	// HMAC-SHA256 written out with the standard library, independently of HashClientSecret.
	m := hmac.New(sha256.New, pepper)
	m.Write([]byte("s3cret"))
	want := m.Sum(nil)
	got := HashClientSecret(pepper, "s3cret")
	if !hmac.Equal(got, want) || len(got) != 32 {
		t.Fatalf("HashClientSecret = %s, want %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
	if !ClientSecretMatches(pepper, "s3cret", got) {
		t.Error("the right secret does not match")
	}
	for _, wrong := range []string{"", "s3cre", "s3cret ", "S3cret"} {
		if ClientSecretMatches(pepper, wrong, got) {
			t.Errorf("%q matches", wrong)
		}
	}
	if ClientSecretMatches(seal.DeriveKey([]byte("another master key, 32 bytes...."), "oidc-client-secret"), "s3cret", got) {
		t.Error("the secret matches under another pepper")
	}
	for _, empty := range [][]byte{nil, {}} {
		if ClientSecretMatches(pepper, "", empty) || ClientSecretMatches(pepper, "s3cret", empty) {
			t.Error("an empty hash (public client) matches")
		}
	}
}
