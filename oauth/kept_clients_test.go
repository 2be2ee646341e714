package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"golang.org/x/oauth2"

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
		on := replicaOf(t, env)
		token := func(secret, scope string) protocolResponse {
			t.Helper()
			form := url.Values{"grant_type": {"client_credentials"}}
			if scope != "" {
				form.Set("scope", scope)
			}
			return on.post(t, "/api/auth/oauth2/token", form, env.web.ID, secret)
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
		change := func(method, path, body string) string {
			t.Helper()
			return changeClient(t, env, env.web.ID, method, path, body)
		}
		rotate := func() string {
			t.Helper()
			return rotateClientSecret(t, env, env.web.ID)
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

		archiveProject(t, env)
		token(second, "").wantOAuthError(t, "a client of an archived project", http.StatusUnauthorized, "invalid_client")
	})
}

// replicaOf serves a second app over env's store, as another replica would, and returns it as a
// providerEnv that knows only its URL.
func replicaOf(t *testing.T, env *providerEnv) *providerEnv {
	t.Helper()
	replica := newTestApp(t, env.app.Store, testConfig(), nil)
	srv := httptest.NewServer(replica.Handler)
	t.Cleanup(srv.Close)
	return &providerEnv{url: srv.URL}
}

// archiveProject archives env's project by a statement of its own, as an operator would.
func archiveProject(t *testing.T, env *providerEnv) {
	t.Helper()
	ctx := t.Context()
	if err := env.app.Store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, env.project.ID, true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// changeClient sends an administrative request about client id through env's app (the other
// replica of the kept-client tests) and returns its body.
func changeClient(t *testing.T, env *providerEnv, id, method, path, body string) string {
	t.Helper()
	res := env.app.Do(env.owner.As(apptest.Request{Method: method, Body: body,
		Path:    "/api/v1/projects/" + env.project.ID + "/oidc-clients/" + id + path,
		Headers: map[string]string{"Origin": env.url}}))
	if res.Code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, res.Code, res.Body)
	}
	return res.Body.String()
}

// rotateClientSecret rotates client id's secret through env's app and returns the new one.
func rotateClientSecret(t *testing.T, env *providerEnv, id string) string {
	t.Helper()
	var out struct {
		Data struct {
			ClientSecret string `json:"clientSecret"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(changeClient(t, env, id, "POST", "/rotate-secret", "")), &out); err != nil || out.Data.ClientSecret == "" {
		t.Fatalf("rotate: %v", err)
	}
	return out.Data.ClientSecret
}

// TestOAuthKeptClientsIntrospection: a resource server (the peer client) introspects the web
// client's token on one replica, which keeps the clients it has read between requests, while
// both clients are changed through another replica over the same database. Every change counts
// on the very next introspection: the peer's rotated-out secret, the peer disabled or its
// project archived is 401 invalid_client, its new secret is accepted at once, and the token of a
// disabled web client is inactive, though the replica kept a copy of that client too.
func TestOAuthKeptClientsIntrospection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		on := replicaOf(t, env)
		introspect := func(token, secret string) protocolResponse {
			t.Helper()
			return on.post(t, "/api/auth/oauth2/introspect", url.Values{"token": {token}}, env.peer.ID, secret)
		}
		want := func(step string, res protocolResponse, active bool) {
			t.Helper()
			var body struct {
				Active   bool   `json:"active"`
				ClientID string `json:"client_id"`
			}
			if err := json.Unmarshal([]byte(res.Body), &body); err != nil || res.Status != http.StatusOK || body.Active != active {
				t.Errorf("%s: %d %s; want 200 with active %v", step, res.Status, res.Body, active)
			}
			if active && body.ClientID != env.web.ID {
				t.Errorf("%s: client_id %q, want %q", step, body.ClientID, env.web.ID)
			}
		}

		// The replica keeps the web client too: a token request of its own, then the token.
		on.clientCredentials(t, env.web.ID, env.webSecret, oauth2.AuthStyleInHeader)
		tok := on.clientCredentials(t, env.web.ID, env.webSecret, oauth2.AuthStyleInHeader).AccessToken
		secret := env.peerSecret
		want("first introspection", introspect(tok, secret), true)
		want("kept", introspect(tok, secret), true)
		want("an unknown token, kept", introspect("not-a-token", secret), false)

		// A new secret is accepted at once, though the replica kept the old one's hash.
		first := rotateClientSecret(t, env, env.peer.ID)
		want("the new secret", introspect(tok, first), true)
		introspect(tok, secret).wantOAuthError(t, "the rotated-out secret", http.StatusUnauthorized, "invalid_client")
		want("the new secret, kept", introspect(tok, first), true)
		second := rotateClientSecret(t, env, env.peer.ID)
		introspect(tok, first).wantOAuthError(t, "a secret rotated out while kept", http.StatusUnauthorized, "invalid_client")
		want("the second new secret", introspect(tok, second), true)
		want("the second new secret, kept", introspect(tok, second), true)

		changeClient(t, env, env.peer.ID, "POST", "/disable", "")
		introspect(tok, second).wantOAuthError(t, "a disabled caller", http.StatusUnauthorized, "invalid_client")
		changeClient(t, env, env.peer.ID, "POST", "/enable", "")
		want("the caller enabled again", introspect(tok, second), true)
		want("the caller enabled again, kept", introspect(tok, second), true)

		// The token's own client disabled: inactive, whatever copy of it the replica kept.
		changeClient(t, env, env.web.ID, "POST", "/disable", "")
		want("the token of a disabled client", introspect(tok, second), false)
		want("the token of a disabled client, again", introspect(tok, second), false)
		changeClient(t, env, env.web.ID, "POST", "/enable", "")
		want("its client enabled again", introspect(tok, second), true)
		want("its client enabled again, kept", introspect(tok, second), true)

		// A token of another project's client is inactive to the peer; once the peer's project
		// is archived, the peer is refused, though that token's client is still usable.
		foreignProject := env.app.NewProject(t, env.project.OrganizationID, "oauth-foreign")
		var foreign apptest.Envelope[apptest.OIDCClient]
		env.app.Do(env.owner.As(apptest.Request{Method: "POST", Path: "/api/v1/projects/" + foreignProject.ID + "/oidc-clients",
			Body: apptest.WebClientBody})).Decode(t, http.StatusCreated, &foreign)
		foreignTok := on.clientCredentials(t, foreign.Data.ID, *foreign.Data.ClientSecret, oauth2.AuthStyleInHeader).AccessToken
		want("another project's token", introspect(foreignTok, second), false)

		archiveProject(t, env)
		introspect(foreignTok, second).wantOAuthError(t, "a caller of an archived project", http.StatusUnauthorized, "invalid_client")
		introspect(tok, second).wantOAuthError(t, "a caller of an archived project, its own project's token", http.StatusUnauthorized, "invalid_client")
	})
}
