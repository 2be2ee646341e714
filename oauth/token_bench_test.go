package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Loopback load runs of the OAuth provider's token side, 16 keep-alive connections for 5 s
// (GATEHOUSE_BENCH_DURATION overrides) per backend, client and server in this process:
//
//   - OAuthTokenLoad: POST /api/auth/oauth2/token, grant_type=client_credentials with
//     client_secret_basic (client lookup + HMAC check, a signature, one INSERT), once with an
//     RS256 signing key and once with an ES256 one (sub-benchmarks <backend>/RS256 and /ES256);
//   - OAuthIntrospectLoad: POST /api/auth/oauth2/introspect of 256 pre-issued access tokens
//     (client authentication, the token row, its client's state).
//
// Targets on the 2-core machine: ≥ 500 tokens/s; ≥ 1,800 introspections/s with p99 ≤ 30 ms.
//
//	go test -run '^$' -bench 'OAuthTokenLoad|OAuthIntrospectLoad' -benchtime 1x ./oauth/

const oauthBenchSecret = "bench-secret-bench-secret-bench-secret-0123"

// oauthBenchServer serves the app on 127.0.0.1 over a store seeded with one confidential
// client, and returns the server URL and the client id. Its signing keys are of alg ("": the
// default).
func oauthBenchServer(b testing.TB, st *store.Store, alg string) (string, string) {
	b.Helper()
	ctx := context.Background()
	cfg := testConfig()
	client := store.OIDCClient{Name: "Bench RP", Type: store.OIDCClientWeb, RedirectURIs: []string{"https://rp.example.com/cb"},
		GrantTypes: []string{"client_credentials"}, Scopes: []string{"roles", "billing"},
		SecretHash: oauth.HashClientSecret(seal.DeriveKey(cfg.SecretKey, "oidc-client-secret"), oauthBenchSecret)}
	err := st.InTx(ctx, func(tx *store.Tx) error {
		u := store.User{Name: "Bench owner", Email: "oauth-bench@example.com"}
		org := store.Organization{Name: "Bench", Slug: "oauth-bench"}
		p := store.Project{Name: "Bench", Slug: "bench"}
		if err := storetest.CreateOwnedProject(ctx, tx, &u, "", &org, &p); err != nil {
			return err
		}
		client.ProjectID = p.ID
		return tx.CreateOIDCClient(ctx, &client)
	})
	if err != nil {
		b.Fatal(err)
	}
	ring, err := seal.NewKeyring(cfg.SecretKey)
	if err != nil {
		b.Fatal(err)
	}
	app, err := newServer(cfg, st, oauth.NewKeySet(st, ring, oauth.KeySetOptions{Algorithm: alg}))
	if err != nil {
		b.Fatal(err)
	}
	ts := apptest.StartLoopback(b, app.srv.Handler())
	return ts.URL, client.ID
}

func oauthBenchRequest(base, path, clientID string, form url.Values) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, oauthBenchSecret)
	return req
}

// oauthBenchToken issues one access token and checks the answer.
func oauthBenchToken(b testing.TB, base, clientID string) string {
	b.Helper()
	res, err := apptest.LoopbackClient(1).Do(oauthBenchRequest(base, oauth.TokenPath, clientID, url.Values{"grant_type": {"client_credentials"}, "scope": {"roles"}}))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK || body.AccessToken == "" {
		b.Fatalf("token: %d %v", res.StatusCode, err)
	}
	return body.AccessToken
}

func reportOAuthLoad(b *testing.B, name, unit string, res apptest.LoadResult) {
	b.Logf("%s: %s", name, res)
	if res.Errors > 0 {
		b.Errorf("%d errors, first: %s", res.Errors, res.FirstError)
	}
	b.ReportMetric(res.RPS, unit+"/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(res.CPUPerRequest().Microseconds()), "cpu-µs/"+unit)
}

func BenchmarkOAuthTokenLoad(b *testing.B) {
	duration := apptest.LoadDuration(b)
	for _, be := range apptest.BenchBackends(b) {
		for _, alg := range []string{"RS256", "ES256"} {
			b.Run(be.Name+"/"+alg, func(b *testing.B) {
				base, clientID := oauthBenchServer(b, be.Open(b), alg)
				if h := oauthJWTHeader(b, oauthBenchToken(b, base, clientID)); h["alg"] != alg {
					b.Fatalf("token header %v, want alg %s", h, alg)
				}
				form := url.Values{"grant_type": {"client_credentials"}, "scope": {"roles"}}
				target := func() *http.Request { return oauthBenchRequest(base, oauth.TokenPath, clientID, form) }
				b.ResetTimer()
				var res apptest.LoadResult
				for b.Loop() {
					res = apptest.RunLoad(b, target, apptest.LoadConns, duration)
				}
				reportOAuthLoad(b, be.Name+" "+alg+" client_credentials", "token", res)
			})
		}
	}
}

func BenchmarkOAuthIntrospectLoad(b *testing.B) {
	duration := apptest.LoadDuration(b)
	for _, be := range apptest.BenchBackends(b) {
		b.Run(be.Name, func(b *testing.B) {
			base, clientID := oauthBenchServer(b, be.Open(b), "")
			tokens := make([]string, 256)
			for i := range tokens {
				tokens[i] = oauthBenchToken(b, base, clientID)
			}
			// One checked introspection first: the load counts only statuses.
			res, err := apptest.LoopbackClient(1).Do(oauthBenchRequest(base, oauth.IntrospectPath, clientID, url.Values{"token": {tokens[0]}}))
			if err != nil {
				b.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.HasPrefix(string(raw), `{"active":true`) {
				b.Fatalf("introspection: %d %s", res.StatusCode, raw)
			}
			var next atomic.Int64
			target := func() *http.Request {
				tok := tokens[int(next.Add(1))%len(tokens)]
				return oauthBenchRequest(base, oauth.IntrospectPath, clientID, url.Values{"token": {tok}})
			}
			b.ResetTimer()
			var out apptest.LoadResult
			for b.Loop() {
				out = apptest.RunLoad(b, target, apptest.LoadConns, duration)
			}
			reportOAuthLoad(b, be.Name+" introspection", "introspection", out)
		})
	}
}

// oauthJWTHeader decodes the header of a compact JWS.
func oauthJWTHeader(b *testing.B, token string) map[string]any {
	b.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	var h map[string]any
	if err != nil || json.Unmarshal(raw, &h) != nil {
		b.Fatalf("token %q: not a JWS", token)
	}
	return h
}
