package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Signing algorithms of the provider's keys (JWS "alg", RFC 7518 and RFC 8037):
//
//	RS256  RSA 2048-bit, PKCS #1 v1.5 with SHA-256: the default, which every relying party
//	       verifies; a signature costs about 1 ms here.
//	ES256  ECDSA P-256 with SHA-256: a signature costs about 50 µs, a tenth of the token size.
//	EdDSA  Ed25519: as fast as ES256, fewer relying parties verify it.
//
// The key's public half is stored as a SubjectPublicKeyInfo in PEM and its private half as
// sealed PKCS #8 DER whatever the algorithm, so the table needs no column per algorithm.

// SigningAlgorithms are the algorithms a signing key may have, RS256 (the default) first.
// Discovery lists them as id_token_signing_alg_values_supported, and a client may register one
// as its id_token_signed_response_alg.
var SigningAlgorithms = store.SigningAlgorithms

// ErrUnknownSigningAlgorithm is returned for an algorithm that is not one of SigningAlgorithms.
var ErrUnknownSigningAlgorithm = errors.New("oauth: unknown signing algorithm")

// CheckSigningAlgorithm returns nil when alg is one of SigningAlgorithms (case-sensitive, as JWS
// "alg" values are) and an error wrapping ErrUnknownSigningAlgorithm otherwise.
func CheckSigningAlgorithm(alg string) error {
	if !slices.Contains(SigningAlgorithms, alg) {
		return fmt.Errorf("%w %q: want one of %v", ErrUnknownSigningAlgorithm, alg, SigningAlgorithms)
	}
	return nil
}

// generateSigningKey returns a new private key for alg.
func generateSigningKey(alg string) (crypto.Signer, error) {
	switch alg {
	case store.SigningAlgorithmRS256:
		return rsa.GenerateKey(rand.Reader, SigningKeyBits)
	case store.SigningAlgorithmES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case store.SigningAlgorithmEdDSA:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	return nil, CheckSigningAlgorithm(alg)
}

// parsePublicKey reads a PEM "PUBLIC KEY" block holding a key of alg: RSA for RS256, ECDSA
// P-256 for ES256, Ed25519 for EdDSA. Any other pairing is an error, so a row cannot publish a
// key under an algorithm it does not sign with.
func parsePublicKey(alg, text string) (crypto.PublicKey, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("public key is not a PEM PUBLIC KEY block")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	ok := false
	switch k := pub.(type) {
	case *rsa.PublicKey:
		ok = alg == store.SigningAlgorithmRS256
	case *ecdsa.PublicKey:
		ok = alg == store.SigningAlgorithmES256 && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		ok = alg == store.SigningAlgorithmEdDSA
	}
	if !ok {
		return nil, fmt.Errorf("public key is %T, which does not sign %s", pub, alg)
	}
	return pub, nil
}

// publicKeyEqual reports whether a and b are the same public key.
func publicKeyEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}
