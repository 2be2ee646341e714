package oauth_test

import (
	"context"
	"testing"

	jose "github.com/go-jose/go-jose/v3"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
)

// BenchmarkSigningKeySign is the cost of one JWS signature with a key of each algorithm, as the
// token endpoint makes it (go-jose over SigningKey.JSONWebKey), without the rest of a request:
//
//	go test -run '^$' -bench SigningKeySign ./oauth/
func BenchmarkSigningKeySign(b *testing.B) {
	st := apptest.BenchBackends(b)[0].Open(b)
	payload := []byte(`{"iss":"https://gatehouse.example.com","sub":"cli_01jd3p0a1b2c3d4e5f6g7h8j9k","aud":["cli_01jd3p0a1b2c3d4e5f6g7h8j9k"],"client_id":"cli_01jd3p0a1b2c3d4e5f6g7h8j9k","scope":"roles","jti":"0f9c1e6d-2b1a-4c2d-9e7f-1a2b3c4d5e6f","iat":1795000000,"exp":1795003600}`)
	for _, alg := range oauth.SigningAlgorithms {
		b.Run(alg, func(b *testing.B) {
			// Each algorithm in a fresh key set over the same store: Rotate with no delay makes
			// a key of alg that signs at once.
			ks := oauth.NewKeySet(st, testRing(b, 1), oauth.KeySetOptions{Algorithm: alg, CacheTTL: -1})
			if _, err := ks.Rotate(context.Background(), 0); err != nil {
				b.Fatal(err)
			}
			k, err := ks.Current(context.Background())
			if err != nil || k.Algorithm != alg {
				b.Fatalf("key %+v: %v", k.Algorithm, err)
			}
			signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: k.JSONWebKey()}, nil)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := signer.Sign(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
