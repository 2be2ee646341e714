package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOAuthKeptClients: client_credentials requests to one replica, which keeps the client it
// has read between requests, while the client is changed through another replica over the same
// database. Every change counts on the very next token request: a rotated-out secret, a disabled
// client, a grant or scope taken away or a project archived is refused, and a new secret or a
// scope added is accepted at once, whatever copy the replica kept.
func TestOAuthKeptClients(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := t.Context()
		replica := newTestApp(t, env.app.Store, testConfig(), nil)
		srv := httptest.NewServer(replica.Handler)
		t.Cleanup(srv.Close)
		token := func(secret, scope string) protocolResponse {
			t.Helper()
			form := url.Values{"grant_type": {"client_credentials"}}
			if scope != "" {
				form.Set("scope", scope)
			}
			return (&providerEnv{url: srv.URL}).post(t, "/api/auth/oauth2/token", form, env.web.ID, secret)
		}
		wantToken := func(step string, res protocolResponse) {
			t.Helper()
			var body struct {
				AccessToken string `json:"access_token"`
			}
			if err := json.Unmarshal([]byte(res.Body), &body); err != nil || res.Status != http.StatusOK || body.AccessToken == "" {
				t.Errorf("%s: %d %s; want a token", step, res.Status, res.Body)
			}
		}
		// change sends an administrative request through the other replica (env's app).
		change := func(method, path, body string) string {
			t.Helper()
			res := env.app.Do(env.owner.As(apptest.Request{Method: method, Body: body,
				Path:    "/api/v1/projects/" + env.project.ID + "/oidc-clients/" + env.web.ID + path,
				Headers: map[string]string{"Origin": env.url}}))
			if res.Code != http.StatusOK {
				t.Fatalf("%s %s: %d %s", method, path, res.Code, res.Body)
			}
			return res.Body.String()
		}
		rotate := func() string {
			t.Helper()
			var out struct {
				Data struct {
					ClientSecret string `json:"clientSecret"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(change("POST", "/rotate-secret", "")), &out); err != nil || out.Data.ClientSecret == "" {
				t.Fatalf("rotate: %v", err)
			}
			return out.Data.ClientSecret
		}

		secret := env.webSecret
		wantToken("first token", token(secret, ""))
		wantToken("second token", token(secret, "roles"))

		// A new secret is accepted at once, though the replica kept the old one's hash.
		first := rotate()
		wantToken("the new secret", token(first, ""))
		token(secret, "").wantOAuthError(t, "the rotated-out secret", http.StatusUnauthorized, "invalid_client")
		wantToken("the new secret again", token(first, ""))
		// The replica keeps the client with the first new secret; a second rotation refuses that
		// secret on the next request.
		second := rotate()
		token(first, "").wantOAuthError(t, "a secret rotated out while kept", http.StatusUnauthorized, "invalid_client")
		wantToken("the second new secret", token(second, ""))
		wantToken("the second new secret, kept", token(second, ""))

		change("POST", "/disable", "")
		token(second, "").wantOAuthError(t, "a disabled client", http.StatusUnauthorized, "invalid_client")
		change("POST", "/enable", "")
		wantToken("enabled again", token(second, ""))
		wantToken("enabled again, kept", token(second, "billing"))

		change("PATCH", "", `{"scopes":["openid","roles"]}`)
		token(second, "billing").wantOAuthError(t, "a scope taken away", http.StatusBadRequest, "invalid_scope")
		wantToken("the scopes left", token(second, "roles"))
		change("PATCH", "", `{"scopes":["openid","roles","billing"]}`)
		wantToken("a scope added", token(second, "billing"))

		change("PATCH", "", `{"grantTypes":["authorization_code","refresh_token"]}`)
		token(second, "").wantOAuthError(t, "the grant taken away", http.StatusBadRequest, "unauthorized_client")
		change("PATCH", "", `{"grantTypes":["authorization_code","refresh_token","client_credentials"]}`)
		wantToken("the grant given back", token(second, ""))
		// That request was answered again from a fresh read, which keeps nothing; this one keeps
		// the client, so that the archive below is met by a kept copy at the current version.
		wantToken("the grant given back, kept", token(second, ""))

		if err := env.app.Store.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.SetProjectArchived(ctx, env.project.ID, true)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		token(second, "").wantOAuthError(t, "a client of an archived project", http.StatusUnauthorized, "invalid_client")
	})
}
