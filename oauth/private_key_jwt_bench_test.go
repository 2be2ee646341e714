package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// BenchmarkOAuthPrivateKeyJWTLoad is the loopback load run of client_credentials with
// private_key_jwt (ES256): the client lookup, the assertion's signature check, the jti's
// lookup and INSERT, then the token as in OAuthTokenLoad. Assertions are signed before the
// measured window (one per request, each with its own jti).
//
//	go test -run '^$' -bench 'OAuthPrivateKeyJWTLoad' -benchtime 1x ./oauth/
func BenchmarkOAuthPrivateKeyJWTLoad(b *testing.B) {
	duration := apptest.LoadDuration(b)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	for _, be := range apptest.BenchBackends(b) {
		b.Run(be.Name, func(b *testing.B) {
			st := be.Open(b)
			base, secretClient := oauthBenchServer(b, st, "")
			clientID := createBenchKeyClient(b, st, secretClient, key)
			tokenURL := base + oauth.TokenPath
			aud := apptest.BaseURL + oauth.TokenPath // the bench server's issuer is the test base URL
			const pool = 8000
			assertions := make([]string, pool)
			for i := range assertions {
				assertions[i] = assertion(b, key, jose.ES256, "bench-ec", clientID, aud, "bench-"+strconv.Itoa(i), time.Now().Add(10*time.Minute))
			}
			var next atomic.Int64
			target := func() *http.Request {
				n := next.Add(1) - 1
				form := url.Values{"grant_type": {"client_credentials"}, "scope": {"roles"},
					"client_assertion_type": {assertionType}, "client_assertion": {assertions[n%pool]}}
				req, _ := http.NewRequest(http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				return req
			}
			b.ResetTimer()
			var res apptest.LoadResult
			for b.Loop() {
				res = apptest.RunLoad(b, target, apptest.LoadConns, duration)
			}
			if next.Load() > pool {
				b.Logf("%d requests for %d assertions: the excess were replays (401)", next.Load(), pool)
			}
			reportOAuthLoad(b, be.Name+" private_key_jwt", "token", res)
		})
	}
}

// createBenchKeyClient registers a private_key_jwt client for key in the project of client
// sibling and returns its id.
func createBenchKeyClient(b *testing.B, st *store.Store, sibling string, key *ecdsa.PrivateKey) string {
	b.Helper()
	ctx := context.Background()
	other, err := st.OIDCClientByID(ctx, sibling)
	if err != nil {
		b.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "bench-ec", Use: "sig", Algorithm: "ES256"}}})
	if err != nil {
		b.Fatal(err)
	}
	c := store.OIDCClient{ProjectID: other.ProjectID, Name: "Bench key client", Type: store.OIDCClientWeb,
		RedirectURIs: []string{"https://rp.example.com/cb"}, GrantTypes: []string{"client_credentials"}, Scopes: []string{"roles"},
		SecretHash: make([]byte, store.OIDCClientSecretHashLen), TokenEndpointAuthMethod: store.OIDCAuthPrivateKeyJWT, JWKS: string(jwks)}
	if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOIDCClient(ctx, &c) }); err != nil {
		b.Fatal(err)
	}
	return c.ID
}
