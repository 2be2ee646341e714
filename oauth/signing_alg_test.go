package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Clients of the signing-algorithm tests: one with no idTokenSignedResponseAlg (whichever key
// signs), one registered for ES256 ID tokens, one for RS256.
const (
	anyAlgClientBody = `{"name":"Any alg","type":"web","redirectUris":["https://shop.example.com/cb"],` +
		`"postLogoutRedirectUris":["https://shop.example.com/"],"grantTypes":["authorization_code","client_credentials"],"scopes":["openid","email"],"skipConsent":true}`
	es256ClientBody = `{"name":"ES256 only","type":"web","redirectUris":["https://shop.example.com/cb"],` +
		`"grantTypes":["authorization_code"],"scopes":["openid","email"],"skipConsent":true,"idTokenSignedResponseAlg":"ES256"}`
	rs256ClientBody = `{"name":"RS256 only","type":"web","redirectUris":["https://shop.example.com/cb"],` +
		`"grantTypes":["authorization_code"],"scopes":["openid","email"],"skipConsent":true,"idTokenSignedResponseAlg":"RS256"}`
)

// signingAlgEnv is a providerEnv whose signing keys run on clk, with the default algorithm it
// was made with and the further algorithms offered (GATEHOUSE_SIGNING_ALGS); rotate makes the
// next key with another algorithm, as `gatehouse keys rotate-signing` does under another
// GATEHOUSE_SIGNING_ALG. A pinned client whose algorithm is not offered is registered without
// it and pinned in the store: a client that registered it while it was offered.
type signingAlgEnv struct {
	*providerEnv
	clk  *storetest.Clock
	ring *seal.Keyring
	br   *apptest.Browser
	// clients by their body above
	anyAlg, es256, rs256 apptest.OIDCClient
}

func newSigningAlgEnv(t *testing.T, b storetest.Backend, alg string, offered ...string) *signingAlgEnv {
	t.Helper()
	st := b.Open(t)
	ring, err := seal.NewKeyring(testConfig().SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	clk := storetest.NewClock(time.Now())
	keys := oauth.NewKeySet(st, ring, oauth.KeySetOptions{Now: clk.Now, CacheTTL: -1, Algorithm: alg, Algorithms: offered})
	if _, err := keys.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &signingAlgEnv{providerEnv: newProviderEnvKeys(t, st, keys), clk: clk, ring: ring}
	e.anyAlg, _ = e.create(t, anyAlgClientBody)
	e.es256 = e.createPinned(t, es256ClientBody, "ES256")
	e.rs256 = e.createPinned(t, rs256ClientBody, "RS256")
	u := e.app.NewUser(t, "Ada", "ada-alg@example.com")
	e.br = apptest.NewBrowser(t, e.url)
	e.br.SignIn(t, u.Email, "password-"+u.Email)
	return e
}

// createPinned registers the client of body, pinned to alg: through the API when alg is
// offered, else without it and then pinned in the store.
func (e *signingAlgEnv) createPinned(t *testing.T, body, alg string) apptest.OIDCClient {
	t.Helper()
	if slices.Contains(e.app.keys.Algorithms(), alg) {
		c, _ := e.create(t, body)
		return c
	}
	c, _ := e.create(t, strings.Replace(body, `,"idTokenSignedResponseAlg":"`+alg+`"`, "", 1))
	err := e.app.Store.InTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.UpdateOIDCClient(context.Background(), c.ProjectID, c.ID, func(c *store.OIDCClient) error {
			c.IDTokenAlg = alg
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rotate rotates to a key of alg published now, signing in an hour.
func (e *signingAlgEnv) rotate(t *testing.T, alg string) oauth.Rotation {
	t.Helper()
	r, err := oauth.NewKeySet(e.app.Store, e.ring, oauth.KeySetOptions{Now: e.clk.Now, Algorithm: alg}).Rotate(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// idToken runs the code flow for client and returns the raw ID token, or the token endpoint's
// error.
func (e *signingAlgEnv) idToken(t *testing.T, client apptest.OIDCClient) (string, error) {
	t.Helper()
	cfg := e.clientConfig(client, *client.ClientSecret, "openid", "email")
	v := oauth2.GenerateVerifier()
	q := e.br.Get(cfg.AuthCodeURL("state-alg-0123456789", oauth2.S256ChallengeOption(v))).RedirectParams(t, "authorize", cfg.RedirectURL+"?")
	if q.Get("code") == "" {
		t.Fatalf("authorization response %v", q)
	}
	tok, err := cfg.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		return "", err
	}
	raw, _ := tok.Extra("id_token").(string)
	return raw, nil
}

// accessToken obtains a client-credentials access token for the any-alg client.
func (e *signingAlgEnv) accessToken(t *testing.T) string {
	t.Helper()
	return e.clientCredentials(t, e.anyAlg.ID, *e.anyAlg.ClientSecret, oauth2.AuthStyleInHeader).AccessToken
}

// wantHeader asserts a token's alg and kid.
func wantHeader(t *testing.T, name, token, alg, kid string) {
	t.Helper()
	if h := jwtHeader(t, token); h["alg"] != alg || h["kid"] != kid {
		t.Errorf("%s: header %v, want alg %s kid %s", name, h, alg, kid)
	}
}

// wantServerError asserts that err is the token endpoint's 500 server_error.
func wantServerError(t *testing.T, name string, err error) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusInternalServerError || re.ErrorCode != "server_error" {
		t.Errorf("%s: %v, want 500 server_error", name, err)
	}
}

// TestOAuthES256GoOIDC: an instance created with GATEHOUSE_SIGNING_ALG=ES256 signs access and ID
// tokens ES256 under its P-256 key; discovery lists ES256 first, and go-oidc verifies both kinds
// through discovery and the JWKS, with ES256 as the only accepted algorithm. A client registered
// for RS256 ID tokens while RS256 was offered gets server_error rather than a token it cannot
// verify.
func TestOAuthES256GoOIDC(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		e := newSigningAlgEnv(t, b, "ES256")
		ctx := context.Background()
		provider, err := oidc.NewProvider(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Algs []string `json:"id_token_signing_alg_values_supported"`
		}
		if err := provider.Claims(&meta); err != nil || !slices.Equal(meta.Algs, []string{"ES256"}) {
			t.Fatalf("id_token_signing_alg_values_supported %v (%v), want [ES256]", meta.Algs, err)
		}
		key, err := e.app.keys.Current(ctx)
		if err != nil || key.Algorithm != "ES256" {
			t.Fatalf("current key %+v: %v", key, err)
		}
		onlyES256 := func(clientID string) *oidc.IDTokenVerifier {
			return provider.Verifier(&oidc.Config{ClientID: clientID, SupportedSigningAlgs: []string{oidc.ES256}})
		}
		at := e.accessToken(t)
		wantHeader(t, "access token", at, "ES256", key.ID)
		if _, err := onlyES256(e.anyAlg.ID).Verify(ctx, at); err != nil {
			t.Errorf("go-oidc rejects the ES256 access token: %v", err)
		}
		if res := e.introspect(t, at); res.Status != http.StatusOK || !jsonHas(res.Body, "active", true) {
			t.Errorf("introspection of the ES256 access token: %d %s", res.Status, res.Body)
		}
		for _, c := range []apptest.OIDCClient{e.anyAlg, e.es256} {
			raw, err := e.idToken(t, c)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			wantHeader(t, c.Name+" ID token", raw, "ES256", key.ID)
			if _, err := onlyES256(c.ID).Verify(ctx, raw); err != nil {
				t.Errorf("%s: go-oidc rejects the ES256 ID token: %v", c.Name, err)
			}
		}
		_, err = e.idToken(t, e.rs256)
		wantServerError(t, "RS256 client on an ES256 key", err)
	})
}

// TestOAuthRotationRS256ToES256: a rotation from RS256 to ES256 publishes both keys; go-oidc,
// taking the accepted algorithms from discovery, verifies tokens of both keys at each step:
// while the RS256 key still signs, after the ES256 key took over (the RS256 tokens still
// verify), and only the ES256 ones once the RS256 key retired. A client registered for ES256 ID
// tokens gets server_error until the ES256 key signs (this instance does not offer ES256).
func TestOAuthRotationRS256ToES256(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		e := newSigningAlgEnv(t, b, "RS256")
		ctx := context.Background()
		verify := func(name, token, clientID string) error {
			t.Helper()
			// A fresh relying party each time: discovery and the JWKS as published now.
			provider, err := oidc.NewProvider(ctx, e.url)
			if err != nil {
				t.Fatal(err)
			}
			_, err = provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(ctx, token)
			return err
		}
		old, err := e.app.keys.Current(ctx)
		if err != nil || old.Algorithm != "RS256" {
			t.Fatalf("first key %+v: %v", old, err)
		}
		rsAccess := e.accessToken(t)
		rsID, err := e.idToken(t, e.anyAlg)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, "RS256 access token", rsAccess, "RS256", old.ID)
		wantHeader(t, "RS256 ID token", rsID, "RS256", old.ID)
		_, err = e.idToken(t, e.es256)
		wantServerError(t, "ES256 client before the rotation", err)

		r := e.rotate(t, "ES256")
		if r.RetiredKeyID != old.ID {
			t.Fatalf("rotation %+v", r)
		}
		// Published, not signing yet: tokens are still RS256, and verify.
		if kids := kids(t, e.app.keys); kids != r.KeyID+","+old.ID {
			t.Fatalf("JWKS after the rotation: %s", kids)
		}
		at := e.accessToken(t)
		wantHeader(t, "access token before activation", at, "RS256", old.ID)
		_, err = e.idToken(t, e.es256)
		wantServerError(t, "ES256 client before activation", err)

		// The ES256 key signs.
		e.clk.Set(r.ActivatesAt)
		esAccess := e.accessToken(t)
		esID, err := e.idToken(t, e.anyAlg)
		if err != nil {
			t.Fatal(err)
		}
		wantHeader(t, "ES256 access token", esAccess, "ES256", r.KeyID)
		wantHeader(t, "ES256 ID token", esID, "ES256", r.KeyID)
		pinned, err := e.idToken(t, e.es256)
		if err != nil {
			t.Fatalf("ES256 client once the ES256 key signs: %v", err)
		}
		wantHeader(t, "ES256 client's ID token", pinned, "ES256", r.KeyID)
		// (An RS256 client now gets a fresh RS256 key, RS256 being still offered by this
		// instance: TestOAuthPinnedAfterMove.)
		for _, tok := range []struct{ name, raw, aud string }{
			{"RS256 access token", rsAccess, e.anyAlg.ID}, {"RS256 ID token", rsID, e.anyAlg.ID},
			{"ES256 access token", esAccess, e.anyAlg.ID}, {"ES256 ID token", esID, e.anyAlg.ID},
			{"ES256 client's ID token", pinned, e.es256.ID},
		} {
			if err := verify(tok.name, tok.raw, tok.aud); err != nil {
				t.Errorf("during the rotation go-oidc rejects the %s: %v", tok.name, err)
			}
		}
		for _, tok := range []string{rsAccess, esAccess} {
			if res := e.introspect(t, tok); res.Status != http.StatusOK || !jsonHas(res.Body, "active", true) {
				t.Errorf("introspection during the rotation: %d %s", res.Status, res.Body)
			}
		}

		// The RS256 key retires: only the ES256 key is published, and RS256 tokens no longer
		// verify.
		e.clk.Set(r.RetiresAt)
		if kids := kids(t, e.app.keys); kids != r.KeyID {
			t.Fatalf("JWKS after retirement: %s", kids)
		}
		if err := verify("RS256 ID token", rsID, e.anyAlg.ID); err == nil {
			t.Error("go-oidc accepts an RS256 ID token after its key retired")
		}
		if err := verify("ES256 ID token", esID, e.anyAlg.ID); err != nil {
			t.Errorf("go-oidc rejects the ES256 ID token after the RS256 key retired: %v", err)
		}
	})
}

// TestOAuthEdDSAGoOIDC: an EdDSA instance signs with Ed25519, and go-oidc verifies its access
// and ID tokens through discovery and the JWKS.
func TestOAuthEdDSAGoOIDC(t *testing.T) {
	b := storetest.Backends(t)[0]
	e := newSigningAlgEnv(t, b, "EdDSA")
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.app.keys.Current(ctx)
	if err != nil || key.Algorithm != "EdDSA" {
		t.Fatalf("current key %+v: %v", key, err)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: e.anyAlg.ID, SupportedSigningAlgs: []string{oidc.EdDSA}})
	at := e.accessToken(t)
	raw, err := e.idToken(t, e.anyAlg)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"access token": at, "ID token": raw} {
		wantHeader(t, name, tok, "EdDSA", key.ID)
		if _, err := verifier.Verify(ctx, tok); err != nil {
			t.Errorf("go-oidc rejects the EdDSA %s: %v", name, err)
		}
	}
	_, err = e.idToken(t, e.es256)
	wantServerError(t, "ES256 client on an EdDSA key", err)
}

// jsonHas reports whether body is a JSON object whose member name is want.
func jsonHas(body, name string, want any) bool {
	var m map[string]any
	return json.Unmarshal([]byte(body), &m) == nil && m[name] == want
}

// TestOAuthEndSessionES256Hint: on an ES256 instance an ES256 ID token is an id_token_hint
// that logs out without asking; the same token with its header's alg rewritten to RS256 (the
// key's kid kept) is no hint at all: the confirmation page asks, and with a post-logout
// redirect (which only a valid hint vouches for) the error page answers.
func TestOAuthEndSessionES256Hint(t *testing.T) {
	e := newSigningAlgEnv(t, storetest.Backends(t)[0], "ES256")
	raw, err := e.idToken(t, e.anyAlg)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(raw, ".")
	var header map[string]any
	if h, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(h, &header) != nil || header["alg"] != "ES256" {
		t.Fatalf("ID token header %s: %v", parts[0], err)
	}
	header["alg"] = "RS256"
	forged, _ := json.Marshal(header)
	swapped := base64.RawURLEncoding.EncodeToString(forged) + "." + parts[1] + "." + parts[2]
	e.br.Get("/api/auth/oauth2/end-session?"+url.Values{"id_token_hint": {swapped}}.Encode()).
		WantPage(t, "hint with another alg", http.StatusOK, "Sign out?")
	e.br.Get("/api/auth/oauth2/end-session?"+url.Values{"id_token_hint": {swapped},
		"post_logout_redirect_uri": {"https://shop.example.com/"}}.Encode()).
		WantPage(t, "hint with another alg and a redirect", http.StatusBadRequest, "not registered")
	if _, _, _, err := e.app.accounts.Sessions.FromRequest(httpRequestWithJar(t, e.br, e.url)); err != nil {
		t.Fatalf("signed out by a hint whose alg was rewritten: %v", err)
	}
	res := e.br.Get("/api/auth/oauth2/end-session?" + url.Values{"id_token_hint": {raw},
		"post_logout_redirect_uri": {"https://shop.example.com/"}, "state": {"s-es256"}}.Encode())
	if q := res.RedirectParams(t, "ES256 ID token as hint", "https://shop.example.com/?"); q.Get("state") != "s-es256" {
		t.Errorf("logout state %v", q)
	}
	if _, _, _, err := e.app.accounts.Sessions.FromRequest(httpRequestWithJar(t, e.br, e.url)); err == nil {
		t.Error("still signed in after end-session with the ES256 ID token")
	}
}
