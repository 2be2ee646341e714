package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v3"
	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store"
)

// private_key_jwt client authentication (RFC 7523 section 2.2, OpenID Connect Core section 9).
// fosite checks the assertion (signature by a key of the client's set, iss = sub = client id,
// exp, aud among Provider's token URLs, a jti never seen) when the client it gets is a
// fosite.OpenIDConnectClient whose method is private_key_jwt; the jti store is the SQL table
// oauth_client_assertions.

// Client assertion signing algorithms: an RSA key signs RS256, a P-256 key ES256.
var ClientAssertionAlgs = []string{"RS256", "ES256"}

// MaxClientKeys is the most keys a client's JSON Web Key Set may hold.
const MaxClientKeys = 5

// MaxClientAssertionLifetime is how far ahead of now a client assertion's exp may lie (FAPI 2.0
// suggests assertions of minutes): a longer-lived one is refused with invalid_client, so that a
// leaked assertion is of little use and its jti is not kept for long.
const MaxClientAssertionLifetime = 10 * time.Minute

// KeyClient is a web client that authenticates at the token and PAR endpoints with a JWT
// signed by one of Keys (all of one algorithm, Alg); it has no usable secret.
type KeyClient struct {
	*Client
	Keys *jose.JSONWebKeySet
	Alg  string
}

var _ fosite.OpenIDConnectClient = (*KeyClient)(nil)

// GetRequestURIs is empty: request objects by reference are not supported.
func (c *KeyClient) GetRequestURIs() []string { return nil }

// GetJSONWebKeys returns the client's registered public keys.
func (c *KeyClient) GetJSONWebKeys() *jose.JSONWebKeySet { return c.Keys }

// GetJSONWebKeysURI is empty: keys are registered inline, never fetched.
func (c *KeyClient) GetJSONWebKeysURI() string { return "" }

// GetRequestObjectSigningAlgorithm is empty: request objects are not supported.
func (c *KeyClient) GetRequestObjectSigningAlgorithm() string { return "" }

// GetTokenEndpointAuthMethod is private_key_jwt.
func (c *KeyClient) GetTokenEndpointAuthMethod() string { return store.OIDCAuthPrivateKeyJWT }

// GetTokenEndpointAuthSigningAlgorithm is the algorithm of the client's keys.
func (c *KeyClient) GetTokenEndpointAuthSigningAlgorithm() string { return c.Alg }

// ProjectOf returns the project of a client GetClient returned, "" for any other value.
func ProjectOf(c fosite.Client) string {
	switch v := c.(type) {
	case *Client:
		return v.ProjectID
	case *KeyClient:
		return v.ProjectID
	}
	return ""
}

// ParseClientJWKS checks a client's JSON Web Key Set and returns it normalised with its
// signing algorithm: 1 to MaxClientKeys public keys, all RSA (at least 2048 bits; RS256) or
// all EC P-256 (ES256), each with use "sig" or none (set to "sig", which fosite requires),
// alg absent or the family's, key ids unique. The error says what is wrong without quoting
// key material.
func ParseClientJWKS(raw []byte) (*jose.JSONWebKeySet, string, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, "", errors.New("not a JSON Web Key Set of supported keys (RSA or EC P-256 public keys)")
	}
	if len(set.Keys) == 0 || len(set.Keys) > MaxClientKeys {
		return nil, "", fmt.Errorf("want 1 to %d keys", MaxClientKeys)
	}
	alg := ""
	kids := map[string]bool{}
	for i := range set.Keys {
		k := &set.Keys[i]
		var keyAlg string
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < 2048 {
				return nil, "", fmt.Errorf("key %d: RSA keys must have at least 2048 bits", i)
			}
			keyAlg = "RS256"
		case *ecdsa.PublicKey:
			if pub.Curve != elliptic.P256() {
				return nil, "", fmt.Errorf("key %d: EC keys must be on P-256", i)
			}
			keyAlg = "ES256"
		default:
			return nil, "", fmt.Errorf("key %d: want an RSA or EC P-256 public key (no private key material)", i)
		}
		if k.Algorithm != "" && k.Algorithm != keyAlg {
			return nil, "", fmt.Errorf("key %d: alg must be %s for this key", i, keyAlg)
		}
		if k.Use != "" && k.Use != "sig" {
			return nil, "", fmt.Errorf("key %d: use must be sig", i)
		}
		if alg != "" && alg != keyAlg {
			return nil, "", errors.New("all keys must be of one algorithm (RS256 or ES256)")
		}
		if kids[k.KeyID] {
			return nil, "", fmt.Errorf("key %d: duplicate kid", i)
		}
		kids[k.KeyID] = true
		alg, k.Algorithm, k.Use = keyAlg, keyAlg, "sig"
	}
	return &set, alg, nil
}

// ClientAssertionJWTValid returns fosite.ErrJTIKnown when the jti of a client assertion has
// been accepted before and has not expired. A jti that is not text the store can hold (NUL,
// invalid UTF-8: store.ValidText) is refused without a query; fosite answers invalid_client.
func (f *FositeStore) ClientAssertionJWTValid(ctx context.Context, jti string) error {
	if !store.ValidText(jti) {
		return fosite.ErrInvalidClient.WithHint("The client assertion's jti must be text without NUL characters.")
	}
	known, err := f.st.ClientAssertionKnown(ctx, jti)
	if err != nil {
		return err
	}
	if known {
		return fosite.ErrJTIKnown
	}
	return nil
}

// SetClientAssertionJWT records the jti of an accepted client assertion until exp. When a
// concurrent request recorded it first, it returns fosite.ErrJTIKnown: of two requests with
// one assertion, exactly one authenticates.
//
// It is also where the assertion's lifetime is capped: fosite hands over exp here, after the
// signature, iss, sub and jti checks and before anything is recorded, and refuses the client
// with the error returned. An exp more than MaxClientAssertionLifetime after now is
// fosite.ErrInvalidClient, and the jti is not recorded.
func (f *FositeStore) SetClientAssertionJWT(ctx context.Context, jti string, exp time.Time) error {
	if exp.Sub(f.clock()) > MaxClientAssertionLifetime {
		return fosite.ErrInvalidClient.WithHintf("The client assertion expires more than %d minutes from now; sign a short-lived one for each request.",
			int(MaxClientAssertionLifetime/time.Minute))
	}
	err := f.st.AddClientAssertion(ctx, jti, exp)
	if errors.Is(err, store.ErrConflict) {
		return fosite.ErrJTIKnown
	}
	return err
}
