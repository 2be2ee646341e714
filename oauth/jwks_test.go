package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v3"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// newJWKSApp returns an app whose signing keys run on clk, with a first key ensured.
func newJWKSApp(t *testing.T, st *store.Store, clk *storetest.Clock) (*testApp, *oauth.KeySet) {
	t.Helper()
	cfg := testConfig()
	ring, err := seal.NewKeyring(cfg.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	keys := oauth.NewKeySet(st, ring, oauth.KeySetOptions{Now: clk.Now})
	if _, err := keys.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	return newTestApp(t, st, cfg, keys), keys
}

// TestJWKS: the route serves the published keys as a JWK Set with RSA public members only,
// cacheable for five minutes, and a token signed with the current key verifies against it.
func TestJWKS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		clk := storetest.NewClock(time.Date(2031, 3, 4, 10, 0, 0, 0, time.UTC))
		app, keys := newJWKSApp(t, b.Open(t), clk)
		res := app.Do(apptest.Request{Method: http.MethodGet, Path: "/.well-known/jwks.json"})
		if res.Code != http.StatusOK || res.Header().Get("Content-Type") != "application/json" ||
			res.Header().Get("Cache-Control") != "public, max-age=300" {
			t.Fatalf("GET jwks: %d, Content-Type %q, Cache-Control %q: %s", res.Code,
				res.Header().Get("Content-Type"), res.Header().Get("Cache-Control"), res.Body)
		}
		body := res.Body.String()
		for _, member := range []string{`"d"`, `"p"`, `"q"`, `"dp"`, `"dq"`, `"qi"`} {
			if strings.Contains(body, member) {
				t.Errorf("JWKS holds the private member %s: %s", member, body)
			}
		}
		var shape map[string][]map[string]any
		if err := json.Unmarshal([]byte(body), &shape); err != nil || len(shape) != 1 || len(shape["keys"]) != 1 {
			t.Fatalf("JWKS %s: %v", body, err)
		}
		current, err := keys.Current(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		k := shape["keys"][0]
		if len(k) != 6 || k["kty"] != "RSA" || k["use"] != "sig" || k["alg"] != "RS256" || k["kid"] != current.ID ||
			k["e"] != "AQAB" || len(k["n"].(string)) != 342 { // 256 bytes in unpadded base64url
			t.Errorf("JWK: %v", k)
		}

		// A token signed with the current key verifies against the served set, by kid.
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: current.JSONWebKey()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := signer.Sign([]byte(`{"sub":"usr_1"}`))
		if err != nil {
			t.Fatal(err)
		}
		compact, _ := obj.CompactSerialize()
		parsed, err := jose.ParseSigned(compact)
		if err != nil {
			t.Fatal(err)
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal([]byte(body), &set); err != nil {
			t.Fatal(err)
		}
		found := set.Key(parsed.Signatures[0].Header.KeyID)
		if len(found) != 1 {
			t.Fatalf("no JWK for kid %q", parsed.Signatures[0].Header.KeyID)
		}
		if payload, err := parsed.Verify(found[0]); err != nil || string(payload) != `{"sub":"usr_1"}` {
			t.Fatalf("verify: %q, %v", payload, err)
		}

		// After a rotation the served set lists the next key first, before it signs.
		clk.Set(clk.Now().Add(time.Minute))
		rot, err := keys.Rotate(context.Background(), oauth.DefaultPublishDelay)
		if err != nil {
			t.Fatal(err)
		}
		res = app.Do(apptest.Request{Method: http.MethodGet, Path: "/.well-known/jwks.json"})
		if err := json.Unmarshal(res.Body.Bytes(), &set); err != nil || len(set.Keys) != 2 ||
			set.Keys[0].KeyID != rot.KeyID || set.Keys[1].KeyID != current.ID {
			t.Fatalf("after rotation: %d %s", res.Code, res.Body)
		}
	})
}

// TestJWKSEmptyAndFailing: without keys the set is empty (nothing is created by reading it);
// when the database fails the route answers with an RFC 6749 body, not a problem.
func TestJWKSEmptyAndFailing(t *testing.T) {
	b := storetest.Backends(t)[0]
	app := newTestApp(t, b.Open(t), testConfig(), nil) // the key set made as main makes it
	res := app.Do(apptest.Request{Method: http.MethodGet, Path: "/.well-known/jwks.json"})
	if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != `{"keys":[]}` {
		t.Fatalf("empty JWKS: %d %s", res.Code, res.Body)
	}

	st, err := store.Open(context.Background(), b.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	broken := newTestApp(t, st, testConfig(), nil)
	st.Close()
	res = broken.Do(apptest.Request{Method: http.MethodGet, Path: "/.well-known/jwks.json"})
	if res.Code != http.StatusInternalServerError || res.Header().Get("Content-Type") != "application/json" ||
		res.Header().Get("Cache-Control") != "no-store" ||
		strings.TrimSpace(res.Body.String()) != `{"error":"server_error","error_description":"Internal server error"}` {
		t.Fatalf("failing JWKS: %d %q %s", res.Code, res.Header().Get("Content-Type"), res.Body)
	}
}
