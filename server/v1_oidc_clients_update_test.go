package server

import (
	"net/http"
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// oidcClientPAR is an OidcClient with its PAR setting.
type oidcClientPAR struct {
	oidcClientBody
	RequirePushedAuthorizationRequests bool `json:"requirePushedAuthorizationRequests"`
}

// TestOidcClientUpdate: PATCH replaces the members sent and keeps the others; a change that
// breaks a registration rule is a 400 at the offending path and writes nothing.
func TestOidcClientUpdate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner, viewer := ten.members[RoleOwner], ten.members[RoleViewer]
		project := saProject(t, app, ten, "oidc-update")
		base := "/api/v1/projects/" + project.ID + "/oidc-clients"
		web, _ := oidcCreate(t, app, owner, project.ID, webClientBody)
		spa, _ := oidcCreate(t, app, owner, project.ID,
			`{"name":"Shop spa","type":"spa","redirectUris":["https://spa.example.com/cb"],"grantTypes":["authorization_code"],"scopes":["openid"]}`)

		// get reads a client back through the list.
		get := func(id string) oidcClientPAR {
			t.Helper()
			var list envelope[[]oidcClientPAR]
			app.do(owner.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
			for _, c := range list.Data {
				if c.ID == id {
					return c
				}
			}
			t.Fatalf("client %s not listed", id)
			return oidcClientPAR{}
		}

		var got envelope[oidcClientPAR]
		app.do(owner.as(request{method: "PATCH", path: base + "/" + web.ID, body: `{"name":"Storefront v2",` +
			`"redirectUris":["https://shop.example.com/cb3"],"postLogoutRedirectUris":[],"grantTypes":["authorization_code"],` +
			`"scopes":["openid","email"],"skipConsent":false,"requirePushedAuthorizationRequests":true}`})).
			decode(t, http.StatusOK, &got)
		c := got.Data
		if c.ID != web.ID || c.Name != "Storefront v2" || c.Type != "web" || c.TokenEndpointAuthMethod != "client_secret_basic" ||
			!slices.Equal(c.RedirectURIs, []string{"https://shop.example.com/cb3"}) || len(c.PostLogoutRedirectURIs) != 0 ||
			!slices.Equal(c.GrantTypes, []string{"authorization_code"}) || !slices.Equal(c.Scopes, []string{"openid", "email"}) ||
			c.SkipConsent || !c.RequirePushedAuthorizationRequests || c.ClientSecret != nil || !c.CreatedAt.Equal(web.CreatedAt) {
			t.Fatalf("updated client %+v", c)
		}
		if listed := get(web.ID); listed.Name != "Storefront v2" || !listed.RequirePushedAuthorizationRequests {
			t.Fatalf("listed after update %+v", listed)
		}

		// One member alone; the others stay.
		app.do(owner.as(request{method: "PATCH", path: base + "/" + web.ID, body: `{"skipConsent":true}`})).decode(t, http.StatusOK, &got)
		if c := got.Data; !c.SkipConsent || c.Name != "Storefront v2" || !slices.Equal(c.Scopes, []string{"openid", "email"}) {
			t.Fatalf("after a one-member change %+v", c)
		}

		// The ID token algorithm can be set (and changed) after registration.
		var alg envelope[struct {
			Alg  *string `json:"idTokenSignedResponseAlg"`
			Name string  `json:"name"`
		}]
		app.do(owner.as(request{method: "PATCH", path: base + "/" + web.ID, body: `{"idTokenSignedResponseAlg":"ES256"}`})).decode(t, http.StatusOK, &alg)
		if alg.Data.Alg == nil || *alg.Data.Alg != "ES256" || alg.Data.Name != "Storefront v2" {
			t.Fatalf("after setting the ID token algorithm: %+v", alg.Data)
		}
		var list envelope[[]struct {
			ID  string  `json:"id"`
			Alg *string `json:"idTokenSignedResponseAlg"`
		}]
		app.do(owner.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
		for _, c := range list.Data {
			if c.ID == web.ID && (c.Alg == nil || *c.Alg != "ES256") {
				t.Fatalf("listed ID token algorithm %v, want ES256", c.Alg)
			}
		}

		before := map[string]oidcClientPAR{web.ID: get(web.ID), spa.ID: get(spa.ID)}
		for _, tc := range []struct {
			name, id, body string
			paths          []string
		}{
			{"no member", web.ID, `{}`, nil},
			{"type is fixed", web.ID, `{"type":"spa"}`, []string{"body.type"}},
			{"authentication method is fixed", web.ID, `{"tokenEndpointAuthMethod":"private_key_jwt"}`, []string{"body.tokenEndpointAuthMethod"}},
			{"empty name", web.ID, `{"name":""}`, []string{"body.name"}},
			{"unknown ID token algorithm", web.ID, `{"idTokenSignedResponseAlg":"HS256"}`, []string{"body.idTokenSignedResponseAlg"}},
			{"no redirect uri", web.ID, `{"redirectUris":[]}`, []string{"body.redirectUris"}},
			{"http redirect uri", web.ID, `{"redirectUris":["https://ok.example.com/cb","http://shop.example.com/cb"]}`, []string{"body.redirectUris.1"}},
			{"refresh_token without authorization_code", web.ID, `{"grantTypes":["client_credentials","refresh_token"]}`, []string{"body.grantTypes.1"}},
			{"client_credentials for spa", spa.ID, `{"grantTypes":["authorization_code","client_credentials"]}`, []string{"body.grantTypes.1"}},
			{"spa skipping consent", spa.ID, `{"skipConsent":true,"name":"renamed"}`, []string{"body.skipConsent"}},
			{"jwks on a secret client", web.ID, `{"jwks":{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}}`, []string{"body.jwks"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := app.do(owner.as(request{method: "PATCH", path: base + "/" + tc.id, body: tc.body})).
					wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				if tc.paths != nil {
					wantPaths(t, p.Errors, tc.paths...)
				}
				if after := get(tc.id); !after.UpdatedAt.Equal(before[tc.id].UpdatedAt) || after.Name != before[tc.id].Name ||
					after.SkipConsent != before[tc.id].SkipConsent || !slices.Equal(after.GrantTypes, before[tc.id].GrantTypes) ||
					!slices.Equal(after.RedirectURIs, before[tc.id].RedirectURIs) {
					t.Fatalf("a refused change wrote: %+v, before %+v", after, before[tc.id])
				}
			})
		}

		app.do(viewer.as(request{method: "PATCH", path: base + "/" + web.ID, body: `{"name":"viewer"}`})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		app.do(owner.as(request{method: "PATCH", path: base + "/cli_00000000000000000000000000", body: `{"name":"x"}`})).
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		app.do(owner.as(request{method: "PATCH", path: "/api/v1/projects/" + ten.project.ID + "/oidc-clients/" + web.ID, body: `{"name":"x"}`})).
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		if got := get(web.ID); got.Name != "Storefront v2" {
			t.Fatalf("a refused change renamed the client to %q", got.Name)
		}

		// Audit: one row per accepted change, naming the members sent.
		var entries envelope[[]struct {
			Action   string
			Target   struct{ Type, ID string }
			Metadata map[string]any
		}]
		app.do(owner.as(request{method: "GET", path: "/api/v1/projects/" + project.ID + "/audit-logs"})).decode(t, http.StatusOK, &entries)
		var changes [][]any
		for _, e := range entries.Data {
			if e.Action == "oidc_client.update" {
				if e.Target.Type != "oidc_client" || e.Target.ID != web.ID {
					t.Errorf("update audit target %+v", e.Target)
				}
				changes = append(changes, e.Metadata["changed"].([]any))
			}
		}
		if len(changes) != 3 || len(changes[0]) != 1 || changes[0][0] != "idTokenSignedResponseAlg" {
			t.Fatalf("%d oidc_client.update audit rows, want 3, the newest naming idTokenSignedResponseAlg: %v", len(changes), changes)
		}
	})
}
