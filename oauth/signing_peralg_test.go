package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOAuthSigningKeyPerAlgorithm: an instance with GATEHOUSE_SIGNING_ALG=RS256 and
// GATEHOUSE_SIGNING_ALGS=ES256 keeps a key of each. A client registered for ES256 ID tokens gets
// an ES256 ID token under the ES256 key, which go-oidc verifies through discovery and the JWKS
// accepting ES256 only; access tokens and the other clients' ID tokens stay RS256. Discovery
// lists exactly the two; registering or switching a client to EdDSA is 400 at
// body.idTokenSignedResponseAlg and writes nothing. Rotating the ES256 line leaves the RS256 key
// signing.
func TestOAuthSigningKeyPerAlgorithm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		e := newSigningAlgEnv(t, b, "RS256", "ES256")
		ctx := context.Background()
		provider, err := oidc.NewProvider(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Algs []string `json:"id_token_signing_alg_values_supported"`
		}
		if err := provider.Claims(&meta); err != nil || !slices.Equal(meta.Algs, []string{"RS256", "ES256"}) {
			t.Fatalf("id_token_signing_alg_values_supported %v (%v), want [RS256 ES256]", meta.Algs, err)
		}
		rs, err := e.app.keys.Current(ctx)
		if err != nil || rs.Algorithm != "RS256" {
			t.Fatalf("default key %+v: %v", rs, err)
		}

		pinned, err := e.idToken(t, e.es256)
		if err != nil {
			t.Fatalf("ES256 client on an RS256 instance offering ES256: %v", err)
		}
		es, err := e.app.keys.CurrentFor(ctx, "ES256")
		if err != nil || es.ID == rs.ID {
			t.Fatalf("ES256 key %+v: %v", es, err)
		}
		wantHeader(t, "ES256 client's ID token", pinned, "ES256", es.ID)
		onlyES256 := provider.Verifier(&oidc.Config{ClientID: e.es256.ID, SupportedSigningAlgs: []string{oidc.ES256}})
		if _, err := onlyES256.Verify(ctx, pinned); err != nil {
			t.Errorf("go-oidc (ES256 only) rejects the ES256 client's ID token: %v", err)
		}
		if got := kids(t, e.app.keys); got != es.ID+","+rs.ID && got != rs.ID+","+es.ID {
			t.Errorf("JWKS %s, want the keys %s and %s", got, rs.ID, es.ID)
		}
		wantHeader(t, "access token", e.accessToken(t), "RS256", rs.ID)
		for _, c := range []apptest.OIDCClient{e.anyAlg, e.rs256} {
			raw, err := e.idToken(t, c)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			wantHeader(t, c.Name+" ID token", raw, "RS256", rs.ID)
		}

		eddsa := strings.Replace(es256ClientBody, `"ES256"`, `"EdDSA"`, 1)
		base := "/api/v1/projects/" + e.project.ID + "/oidc-clients"
		res := e.app.Do(e.owner.As(apptest.Request{Method: "POST", Path: base, Body: eddsa, Headers: map[string]string{"Origin": e.url}}))
		wantAlgProblem(t, "register EdDSA", res, e.url)
		res = e.app.Do(e.owner.As(apptest.Request{Method: "PATCH", Path: base + "/" + e.es256.ID,
			Body: `{"idTokenSignedResponseAlg":"EdDSA"}`, Headers: map[string]string{"Origin": e.url}}))
		wantAlgProblem(t, "switch to EdDSA", res, e.url)
		res = e.app.Do(e.owner.As(apptest.Request{Method: "GET", Path: base, Headers: map[string]string{"Origin": e.url}}))
		if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), `"idTokenSignedResponseAlg":"ES256"`) {
			t.Errorf("after the refused switch: %d %s", res.Code, res.Body)
		}

		r, err := e.app.keys.RotateAlgorithm(ctx, "ES256", time.Hour)
		if err != nil || r.Algorithm != "ES256" || !slices.Equal(r.Retired, []string{es.ID}) {
			t.Fatalf("rotate ES256: %+v %v", r, err)
		}
		e.clk.Set(r.ActivatesAt)
		wantHeader(t, "access token after the ES256 rotation", e.accessToken(t), "RS256", rs.ID)
		pinned, err = e.idToken(t, e.es256)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, "ES256 ID token after the ES256 rotation", pinned, "ES256", r.KeyID)
	})
}

// wantAlgProblem asserts the 400 validation problem of an algorithm not offered.
func wantAlgProblem(t *testing.T, name string, res apptest.Response, base string) {
	t.Helper()
	var p apptest.Problem[struct {
		Path    []string `json:"path"`
		Message string   `json:"message"`
	}]
	if err := json.Unmarshal(res.Body.Bytes(), &p); err != nil || res.Code != http.StatusBadRequest {
		t.Fatalf("%s: %d %s", name, res.Code, res.Body)
	}
	if p.Type != base+"/problems/validation" || p.Title != "Validation failed" || p.Status != 400 || len(p.Errors) != 1 ||
		!slices.Equal(p.Errors[0].Path, []string{"body", "idTokenSignedResponseAlg"}) ||
		p.Errors[0].Message != "is not an algorithm this server signs with (GATEHOUSE_SIGNING_ALGS): one of RS256, ES256" {
		t.Errorf("%s: %s", name, res.Body)
	}
}

// TestOAuthPinnedAfterMove: an RS256 instance (offering RS256 only) whose default moves to ES256
// by rotation keeps serving a client registered for RS256: once the ES256 key signs and the
// RS256 key stops, the RS256 client's ID token comes from a fresh RS256 key, while the others
// get ES256.
func TestOAuthPinnedAfterMove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		e := newSigningAlgEnv(t, b, "RS256")
		ctx := context.Background()
		old, err := e.app.keys.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := e.rotate(t, "ES256")
		e.clk.Set(r.ActivatesAt)
		wantHeader(t, "access token", e.accessToken(t), "ES256", r.KeyID)
		raw, err := e.idToken(t, e.rs256)
		if err != nil {
			t.Fatalf("RS256 client after the move: %v", err)
		}
		fresh, err := e.app.keys.CurrentFor(ctx, "RS256")
		if err != nil || fresh.ID == old.ID {
			t.Fatalf("RS256 key after the move %+v (old %s): %v", fresh, old.ID, err)
		}
		wantHeader(t, "RS256 client's ID token", raw, "RS256", fresh.ID)
	})
}

// TestOAuthSigningKeyFailureIsServerError: when the signing key cannot be opened (sealed under
// another secret key), the token endpoint answers 500 with the registered code server_error,
// not fosite's unregistered "error", and the cause stays out of the body.
func TestOAuthSigningKeyFailureIsServerError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		if _, err := oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{}).Ensure(context.Background()); err != nil {
			t.Fatal(err)
		}
		e := newProviderEnvKeys(t, st, oauth.NewKeySet(st, testRing(t, 2), oauth.KeySetOptions{}))
		c, _ := e.create(t, anyAlgClientBody)
		res := e.post(t, "/api/auth/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, c.ID, *c.ClientSecret)
		var body map[string]any
		if res.Status != http.StatusInternalServerError || json.Unmarshal([]byte(res.Body), &body) != nil || body["error"] != "server_error" {
			t.Fatalf("token with an unopenable key: %d %s, want 500 server_error", res.Status, res.Body)
		}
		if strings.Contains(res.Body, "sig_") || strings.Contains(res.Body, "signing key") {
			t.Errorf("the body names the key: %s", res.Body)
		}
	})
}
