package oauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The authorization endpoint is not built yet; these tests make authorization codes by calling
// fosite's authorize API directly (as that endpoint will), then drive the real token,
// introspection and revocation handlers, so the storage's code, PKCE, OpenID Connect, refresh
// and revocation paths are exercised end to end on every database.

const (
	flowBase     = "https://id.example.com"
	flowRedirect = "https://rp.example.com/cb"
	flowSecret   = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-xx"
	flowVerifier = "verifier-verifier-verifier-verifier-verifier-01"
)

var flowMasterKey = []byte("0123456789abcdef0123456789abcdef")

type flowEnv struct {
	p        *oauth.Provider
	st       *store.Store
	keys     *oauth.KeySet
	clientID string
}

func newFlowEnv(t *testing.T, b storetest.Backend) *flowEnv {
	t.Helper()
	ctx := context.Background()
	st := b.Open(t)
	pepper := seal.DeriveKey(flowMasterKey, "oidc-client-secret")
	client := store.OIDCClient{Name: "RP", Type: store.OIDCClientWeb, RedirectURIs: []string{flowRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token", "client_credentials"},
		Scopes:     []string{"openid", "offline_access", "profile"}, SecretHash: oauth.HashClientSecret(pepper, flowSecret)}
	err := st.InTx(ctx, func(tx *store.Tx) error {
		u := store.User{Name: "Owner", Email: "owner@example.com"}
		org := store.Organization{Name: "Acme", Slug: "acme"}
		p := store.Project{Name: "RP", Slug: "rp"}
		if err := storetest.CreateOwnedProject(ctx, tx, &u, "", &org, &p); err != nil {
			return err
		}
		client.ProjectID = p.ID
		return tx.CreateOIDCClient(ctx, &client)
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{CacheTTL: -1})
	p, err := oauth.NewProvider(oauth.ProviderConfig{BaseURL: flowBase, SecretKey: flowMasterKey, Store: st, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return &flowEnv{p: p, st: st, keys: keys, clientID: client.ID}
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize runs fosite's authorization request for user usr_1 with all of query (merged over
// a valid S256 request) and returns the code, or the error.
func (e *flowEnv) authorize(t *testing.T, extra url.Values) (string, error) {
	t.Helper()
	ctx := context.Background()
	q := url.Values{"response_type": {"code"}, "client_id": {e.clientID}, "redirect_uri": {flowRedirect},
		"scope": {"openid offline_access"}, "state": {"state-0123456789"}, "nonce": {"nonce-0123456789"},
		"code_challenge": {s256(flowVerifier)}, "code_challenge_method": {"S256"}}
	for k, v := range extra {
		if v == nil {
			q.Del(k)
		} else {
			q[k] = v
		}
	}
	r := httptest.NewRequest("GET", flowBase+oauth.AuthorizePath+"?"+q.Encode(), nil)
	ar, err := e.p.NewAuthorizeRequest(ctx, r)
	if err != nil {
		return "", err
	}
	for _, s := range ar.GetRequestedScopes() {
		ar.GrantScope(s)
	}
	ar.GrantAudience(e.clientID)
	sess := oauth.NewSession("usr_1")
	sess.ClientID, sess.GrantedAt = e.clientID, time.Now()
	sess.Claims.AuthTime = time.Now()
	resp, err := e.p.NewAuthorizeResponse(ctx, ar, sess)
	if err != nil {
		return "", err
	}
	return resp.GetParameters().Get("code"), nil
}

type flowResult struct {
	status int
	body   map[string]any
	raw    string
}

func (e *flowEnv) call(handler http.HandlerFunc, path string, form url.Values) flowResult {
	r := httptest.NewRequest("POST", flowBase+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth(e.clientID, flowSecret)
	w := httptest.NewRecorder()
	handler(w, r)
	out := flowResult{status: w.Code, raw: w.Body.String()}
	_ = json.Unmarshal(w.Body.Bytes(), &out.body)
	return out
}

func (e *flowEnv) exchange(code, verifier string) flowResult {
	return e.call(e.p.Token, oauth.TokenPath, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {flowRedirect}, "code_verifier": {verifier}})
}

func (e *flowEnv) refresh(token string) flowResult {
	return e.call(e.p.Token, oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}})
}

func (e *flowEnv) active(t *testing.T, token string) bool {
	t.Helper()
	res := e.call(e.p.Introspect, oauth.IntrospectPath, url.Values{"token": {token}})
	if res.status != http.StatusOK {
		t.Fatalf("introspect: %d %s", res.status, res.raw)
	}
	if res.body["active"] != true && strings.TrimSpace(res.raw) != `{"active":false}` {
		t.Fatalf("inactive body %q, want exactly {\"active\":false}", res.raw)
	}
	return res.body["active"] == true
}

func (r flowResult) tokens(t *testing.T) (access, refresh string) {
	t.Helper()
	access, _ = r.body["access_token"].(string)
	refresh, _ = r.body["refresh_token"].(string)
	if r.status != http.StatusOK || access == "" || refresh == "" {
		t.Fatalf("token response %d %s; want access and refresh tokens", r.status, r.raw)
	}
	return access, refresh
}

func (r flowResult) wantError(t *testing.T, name string, status int, code string) {
	t.Helper()
	if r.status != status || r.body["error"] != code {
		t.Errorf("%s: %d %s; want %d %s", name, r.status, r.raw, status, code)
	}
}

func TestCodeFlowStorage(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			env := newFlowEnv(t, b)

			// PKCE is mandatory and S256 only.
			if _, err := env.authorize(t, url.Values{"code_challenge": nil, "code_challenge_method": nil}); err == nil {
				t.Error("authorization without PKCE succeeded")
			}
			if _, err := env.authorize(t, url.Values{"code_challenge": {flowVerifier}, "code_challenge_method": {"plain"}}); err == nil {
				t.Error("authorization with plain PKCE succeeded")
			}
			code, err := env.authorize(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			env.exchange(code, strings.Repeat("w", 43)).wantError(t, "wrong verifier", 400, "invalid_grant")

			// A code with the right verifier gives access, refresh and ID tokens.
			code, err = env.authorize(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			first := env.exchange(code, flowVerifier)
			access1, refresh1 := first.tokens(t)
			if id, _ := first.body["id_token"].(string); id == "" {
				t.Errorf("no id_token: %s", first.raw)
			}
			if !env.active(t, access1) {
				t.Fatal("fresh access token inactive")
			}
			// Replay: invalid_grant, and the first exchange's tokens are revoked.
			env.exchange(code, flowVerifier).wantError(t, "code replay", 400, "invalid_grant")
			if env.active(t, access1) {
				t.Error("code replay left the first access token active")
			}
			env.refresh(refresh1).wantError(t, "refresh token of a replayed code", 400, "invalid_grant")

			// Refresh rotates; reusing the old refresh token revokes the family.
			code, err = env.authorize(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			access1, refresh1 = env.exchange(code, flowVerifier).tokens(t)
			access2, refresh2 := env.refresh(refresh1).tokens(t)
			if env.active(t, access1) || !env.active(t, access2) {
				t.Error("rotation: the old access token should be inactive and the new one active")
			}
			env.refresh(refresh1).wantError(t, "refresh reuse", 400, "invalid_grant")
			if env.active(t, access2) {
				t.Error("refresh reuse left the family's access token active")
			}
			env.refresh(refresh2).wantError(t, "refresh after reuse", 400, "invalid_grant")

			// Revoking a refresh token kills its access tokens.
			code, err = env.authorize(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			access1, refresh1 = env.exchange(code, flowVerifier).tokens(t)
			if res := env.call(env.p.Revoke, oauth.RevokePath, url.Values{"token": {refresh1}}); res.status != http.StatusOK {
				t.Fatalf("revoke: %d %s", res.status, res.raw)
			}
			if env.active(t, access1) || env.active(t, refresh1) {
				t.Error("revoking the refresh token left a token of its grant active")
			}
			env.refresh(refresh1).wantError(t, "refresh after revocation", 400, "invalid_grant")
		})
	}
}

// TestCodeConcurrentRedemption: 50 concurrent redemptions of one code give exactly one success.
func TestCodeConcurrentRedemption(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			env := newFlowEnv(t, b)
			code, err := env.authorize(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			var wins atomic.Int32
			var mu sync.Mutex
			losers := map[string]int{}
			var wg sync.WaitGroup
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := env.exchange(code, flowVerifier)
					if res.status == http.StatusOK {
						wins.Add(1)
						return
					}
					mu.Lock()
					losers[fmt.Sprintf("%d %v", res.status, res.body["error"])]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if n := wins.Load(); n != 1 {
				t.Errorf("%d successful redemptions, want exactly 1", n)
			}
			// Every loser is told the code is spent: 400 invalid_grant, never a server error.
			for answer, n := range losers {
				if answer != "400 invalid_grant" {
					t.Errorf("%d losers got %s, want 400 invalid_grant", n, answer)
				}
			}
		})
	}
}

// TestRefreshConcurrentReuse: 10 concurrent refreshes with one refresh token give one success at
// most; every other answer is 400 invalid_grant, and the family is revoked (the winner's new
// tokens included), since using one refresh token twice is reuse however close together.
func TestRefreshConcurrentReuse(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			env := newFlowEnv(t, b)
			code, err := env.authorize(t, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, refresh := env.exchange(code, flowVerifier).tokens(t)
			results := make([]flowResult, 10)
			var wg sync.WaitGroup
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = env.refresh(refresh)
				}()
			}
			wg.Wait()
			wins := 0
			for _, res := range results {
				switch {
				case res.status == http.StatusOK:
					wins++
					access, newRefresh := res.tokens(t)
					if env.active(t, access) || env.active(t, newRefresh) {
						t.Error("the winner's tokens survived the reuse")
					}
				case res.status != http.StatusBadRequest || res.body["error"] != "invalid_grant":
					t.Errorf("loser got %d %s, want 400 invalid_grant", res.status, res.raw)
				}
			}
			if wins > 1 {
				t.Errorf("%d successful refreshes, want at most 1", wins)
			}
		})
	}
}

// TestIntrospectionAcrossKeyRotation: a token signed by a key that has since stopped signing
// introspects active until it expires (fosite's JWT strategy would verify it with the current
// key only and call it inactive).
func TestIntrospectionAcrossKeyRotation(t *testing.T) {
	env := newFlowEnv(t, storetest.Backends(t)[0])
	ctx := context.Background()
	cc := url.Values{"grant_type": {"client_credentials"}}
	old := env.call(env.p.Token, oauth.TokenPath, cc)
	oldToken, _ := old.body["access_token"].(string)
	if old.status != http.StatusOK || oldToken == "" {
		t.Fatalf("token: %d %s", old.status, old.raw)
	}
	before, err := env.keys.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.keys.Rotate(ctx, 0); err != nil {
		t.Fatal(err)
	}
	after, err := env.keys.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.ID == before.ID {
		t.Fatalf("rotation kept key %s signing", before.ID)
	}
	fresh := env.call(env.p.Token, oauth.TokenPath, cc)
	if fresh.status != http.StatusOK {
		t.Fatalf("token after rotation: %d %s", fresh.status, fresh.raw)
	}
	if !env.active(t, oldToken) {
		t.Error("a token of the previous signing key introspects inactive")
	}
	if !env.active(t, fresh.body["access_token"].(string)) {
		t.Error("a token of the new signing key introspects inactive")
	}
}
