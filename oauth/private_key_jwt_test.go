package oauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// keyClientBody registers a private_key_jwt client with the public half of key.
func keyClientBody(t testing.TB, key any, kid string) string {
	t.Helper()
	var pub any
	switch k := key.(type) {
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	default:
		pub = key
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: kid}}})
	if err != nil {
		t.Fatal(err)
	}
	return `{"name":"Key client","type":"web","redirectUris":["https://keys.example.com/cb"],` +
		`"grantTypes":["client_credentials"],"scopes":["roles"],"tokenEndpointAuthMethod":"private_key_jwt","jwks":` + string(jwks) + `}`
}

// assertion signs a client assertion for clientID with key (alg) under kid.
func assertion(t testing.TB, key any, alg jose.SignatureAlgorithm, kid, clientID, aud, jti string, exp time.Time) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: clientID, Subject: clientID, Audience: jwt.Audience{aud},
		ID: jti, IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(exp)}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestOAuthPrivateKeyJWT: clients registered with a JSON Web Key Set authenticate with client
// assertions signed by go-jose (RS256 and ES256); a replayed jti, a wrong audience, an expired
// assertion, a foreign key and a secret are invalid_client.
func TestOAuthPrivateKeyJWT(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		tokenURL := env.url + "/api/auth/oauth2/token"
		rsaClient, raw := env.create(t, keyClientBody(t, rsaKey, "rsa-1"))
		if rsaClient.TokenEndpointAuthMethod != "private_key_jwt" || rsaClient.ClientSecret != nil ||
			!strings.Contains(raw, `"jwks":{"keys":[{"use":"sig","kty":"RSA","kid":"rsa-1"`) {
			t.Errorf("registered key client: %s", raw)
		}
		ecClient, _ := env.create(t, keyClientBody(t, ecKey, "ec-1"))

		grant := func(clientAssertion string) protocolResponse {
			return env.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"roles"},
				"client_assertion_type": {assertionType}, "client_assertion": {clientAssertion}}, "", "")
		}
		soon := time.Now().Add(time.Minute)
		cases := []struct {
			name      string
			assertion string
			status    int
			err       string
		}{
			{"RS256, aud the token endpoint", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-1", soon), 200, ""},
			{"ES256, aud the token endpoint", assertion(t, ecKey, jose.ES256, "ec-1", ecClient.ID, tokenURL, "jti-ec-1", soon), 200, ""},
			{"aud the issuer", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, env.url, "jti-rsa-2", soon), 200, ""},
			{"replayed jti", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-1", soon), 401, "invalid_client"},
			{"replayed jti, other client", assertion(t, ecKey, jose.ES256, "ec-1", ecClient.ID, tokenURL, "jti-rsa-1", soon), 401, "invalid_client"},
			{"wrong aud", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, "https://elsewhere.example.com/token", "jti-rsa-3", soon), 401, "invalid_client"},
			{"expired", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-4", time.Now().Add(-time.Minute)), 401, "invalid_client"},
			// An assertion lives at most 10 minutes (exp - now).
			{"exp a year ahead", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-year", time.Now().AddDate(1, 0, 0)), 401, "invalid_client"},
			{"exp 11 minutes ahead", assertion(t, ecKey, jose.ES256, "ec-1", ecClient.ID, tokenURL, "jti-ec-11m", time.Now().Add(11*time.Minute)), 401, "invalid_client"},
			{"exp 9 minutes ahead", assertion(t, ecKey, jose.ES256, "ec-1", ecClient.ID, tokenURL, "jti-ec-9m", time.Now().Add(9*time.Minute)), 200, ""},
			// A jti PostgreSQL cannot store as text is refused like any unusable jti, never
			// sent to the database (no 500).
			{"jti with NUL", assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-\x00-nul", soon), 401, "invalid_client"},
			{"foreign key", assertion(t, otherKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-5", soon), 401, "invalid_client"},
			{"another client's id", assertion(t, rsaKey, jose.RS256, "rsa-1", ecClient.ID, tokenURL, "jti-rsa-6", soon), 401, "invalid_client"},
		}
		for _, c := range cases {
			res := grant(c.assertion)
			if c.status == 200 {
				var tok struct {
					AccessToken string `json:"access_token"`
				}
				if err := json.Unmarshal([]byte(res.Body), &tok); err != nil || res.Status != 200 || tok.AccessToken == "" {
					t.Errorf("%s: %d %s", c.name, res.Status, res.Body)
				}
				continue
			}
			res.wantOAuthError(t, c.name, c.status, c.err)
		}
		// The "expired" and "wrong aud" jtis were never accepted... the wrong-aud one was
		// recorded by fosite before its aud check, so even a corrected assertion with that jti
		// is refused; a fresh jti works.
		grant(assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-7", soon)).wantStatus(t, "fresh jti", 200)
		// The too long-lived assertion was refused before its jti was recorded.
		grant(assertion(t, rsaKey, jose.RS256, "rsa-1", rsaClient.ID, tokenURL, "jti-rsa-year", soon)).
			wantStatus(t, "short-lived assertion with the jti of a refused long-lived one", 200)

		// No secret authenticates a key client.
		env.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, rsaClient.ID, "").
			wantOAuthError(t, "empty basic secret", http.StatusUnauthorized, "invalid_client")
		env.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {rsaClient.ID},
			"client_secret": {"anything"}}, "", "").wantOAuthError(t, "client_secret_post", http.StatusUnauthorized, "invalid_client")
		// A secret client cannot authenticate with an assertion.
		grant(assertion(t, rsaKey, jose.RS256, "rsa-1", env.web.ID, tokenURL, "jti-web", soon)).
			wantOAuthError(t, "assertion for a secret client", http.StatusBadRequest, "invalid_request")
		// Nor is a key client's secret rotated.
		res := env.app.Do(env.owner.As(apptest.Request{Method: "POST", Path: "/api/v1/projects/" + env.project.ID + "/oidc-clients/" + rsaClient.ID + "/rotate-secret",
			Headers: map[string]string{"Origin": env.url}}))
		if res.Code != http.StatusConflict || !strings.Contains(res.Body.String(), "Clients that authenticate with private_key_jwt have no client secret") {
			t.Errorf("rotate a key client's secret: %d %s", res.Code, res.Body)
		}

		// Registration refusals, each at its field.
		privateJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: rsaKey, KeyID: "k"}}})
		small, _ := rsa.GenerateKey(rand.Reader, 1024)
		smallJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &small.PublicKey, KeyID: "k"}}})
		pubJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &rsaKey.PublicKey, KeyID: "k"}}})
		base := `{"name":"K","type":"web","redirectUris":["https://keys.example.com/cb"],"grantTypes":["client_credentials"],"scopes":["roles"]`
		for _, c := range []struct{ name, body, path string }{
			{"private key material", base + `,"tokenEndpointAuthMethod":"private_key_jwt","jwks":` + string(privateJWKS) + `}`, "jwks"},
			{"RSA key under 2048 bits", base + `,"tokenEndpointAuthMethod":"private_key_jwt","jwks":` + string(smallJWKS) + `}`, "jwks"},
			{"private_key_jwt without jwks", base + `,"tokenEndpointAuthMethod":"private_key_jwt"}`, "jwks"},
			{"jwks without private_key_jwt", base + `,"jwks":` + string(pubJWKS) + `}`, "jwks"},
			{"public client with an auth method", `{"name":"K","type":"spa","redirectUris":["https://keys.example.com/cb"],"grantTypes":["authorization_code"],"scopes":["openid"],"tokenEndpointAuthMethod":"private_key_jwt","jwks":` + string(pubJWKS) + `}`, "tokenEndpointAuthMethod"},
		} {
			res := env.app.Do(env.owner.As(apptest.Request{Method: "POST", Path: "/api/v1/projects/" + env.project.ID + "/oidc-clients",
				Body: c.body, Headers: map[string]string{"Origin": env.url}}))
			if res.Code != http.StatusBadRequest || !strings.Contains(res.Body.String(), `"path":["body","`+c.path+`"`) {
				t.Errorf("%s: %d %s", c.name, res.Code, res.Body)
			}
		}
	})
}

func (r protocolResponse) wantStatus(t *testing.T, name string, status int) {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: %d %s; want %d", name, r.Status, r.Body, status)
	}
}
