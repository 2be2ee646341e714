package server

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// oidcClientBody is an OidcClient as the wire carries it; ClientSecret only in the creation and
// rotation responses.
type oidcClientBody = apptest.OIDCClient

var (
	// oidcClientMembers are the members of OidcClient, written out from the spec.
	oidcClientMembers = []string{"createdAt", "disabledAt", "grantTypes", "id", "idTokenSignedResponseAlg", "name", "postLogoutRedirectUris",
		"projectId", "redirectUris", "requirePushedAuthorizationRequests", "scopes", "skipConsent", "tokenEndpointAuthMethod", "type", "updatedAt"}
	// clientSecretShape is the OidcClientSecret pattern: 32 bytes, base64url, no padding.
	clientSecretShape = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	clientIDShape     = regexp.MustCompile(`^cli_[0-9a-z]{26}$`)
)

const webClientBody = apptest.WebClientBody

// oidcCreate registers a client as u and returns the decoded 201 body with the raw body.
func oidcCreate(t *testing.T, app *testApp, u testUser, projectID, body string) (oidcClientBody, string) {
	t.Helper()
	return app.CreateOIDCClient(t, apptest.User(u), projectID, body, testBaseURL)
}

// rawMembers returns the sorted member names of data in a {"data": {...}} body.
func rawMembers(t *testing.T, body string) []string {
	t.Helper()
	var raw struct{ Data json.RawMessage }
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	return saJSONKeys(t, raw.Data)
}

func TestOidcClientValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		project := saProject(t, app, ten, "oidc-validation")
		base := "/api/v1/projects/" + project.ID + "/oidc-clients"

		// body builds a request body from a client type, redirect URIs and extra members.
		body := func(typ string, uris []string, extra string) string {
			b, _ := json.Marshal(uris)
			s := fmt.Sprintf(`{"name":"x","type":%q,"redirectUris":%s`, typ, b)
			if !strings.Contains(extra, `"grantTypes"`) {
				s += `,"grantTypes":["authorization_code"]`
			}
			if !strings.Contains(extra, `"scopes"`) {
				s += `,"scopes":["openid"]`
			}
			if extra != "" {
				s += "," + extra
			}
			return s + "}"
		}
		ok := []string{"https://app.example.com/cb"}
		eleven := make([]string, 11)
		for i := range eleven {
			eleven[i] = fmt.Sprintf("https://app.example.com/cb%d", i)
		}
		cases := []struct {
			name, body string
			paths      []string
		}{
			// Schema rules.
			{"empty name", `{"name":"","type":"web","redirectUris":["https://a.example/cb"],"grantTypes":["authorization_code"],"scopes":["openid"]}`, []string{"body.name"}},
			{"name of 101 characters", `{"name":"` + strings.Repeat("n", 101) + `","type":"web","redirectUris":["https://a.example/cb"],"grantTypes":["authorization_code"],"scopes":["openid"]}`, []string{"body.name"}},
			{"unknown type", body("confidential", ok, ""), []string{"body.type"}},
			{"no redirect uri", body("web", []string{}, ""), []string{"body.redirectUris"}},
			{"eleven redirect uris", body("web", eleven, ""), []string{"body.redirectUris"}},
			{"duplicate redirect uris", body("web", []string{"https://a.example/cb", "https://a.example/cb"}, ""), []string{"body.redirectUris"}},
			{"unknown grant type", body("web", ok, `"grantTypes":["authorization_code","password"]`), []string{"body.grantTypes.1"}},
			{"implicit grant", body("spa", ok, `"grantTypes":["implicit"]`), []string{"body.grantTypes.0"}},
			{"no grant type", body("web", ok, `"grantTypes":[]`), []string{"body.grantTypes"}},
			{"unknown scope", body("web", ok, `"scopes":["openid","admin"]`), []string{"body.scopes.1"}},
			{"no scope", body("web", ok, `"scopes":[]`), []string{"body.scopes"}},
			{"unknown member", body("web", ok, `"clientSecret":"mine"`), []string{"body.clientSecret"}},
			{"HS256 id token alg", body("web", ok, `"idTokenSignedResponseAlg":"HS256"`), []string{"body.idTokenSignedResponseAlg"}},
			{"lower-case id token alg", body("web", ok, `"idTokenSignedResponseAlg":"es256"`), []string{"body.idTokenSignedResponseAlg"}},
			{"id token alg none", body("native", ok, `"idTokenSignedResponseAlg":"none"`), []string{"body.idTokenSignedResponseAlg"}},
			{"null id token alg", body("web", ok, `"idTokenSignedResponseAlg":null`), []string{"body.idTokenSignedResponseAlg"}},
			// Redirect URI rules, at the offending item.
			{"relative redirect uri", body("web", []string{"https://a.example/cb", "/cb"}, ""), []string{"body.redirectUris.1"}},
			{"redirect uri with a fragment", body("web", []string{"https://a.example/cb#frag"}, ""), []string{"body.redirectUris.0"}},
			{"redirect uri with an empty fragment", body("web", []string{"https://a.example/cb#"}, ""), []string{"body.redirectUris.0"}},
			{"redirect uri without a host", body("web", []string{"https:///cb"}, ""), []string{"body.redirectUris.0"}},
			{"redirect uri with user information", body("web", []string{"https://user:pw@a.example/cb"}, ""), []string{"body.redirectUris.0"}},
			{"redirect uri with a space", body("web", []string{"https://a.example/c b"}, ""), []string{"body.redirectUris.0"}},
			{"http redirect uri for web", body("web", []string{"http://a.example/cb"}, ""), []string{"body.redirectUris.0"}},
			{"http loopback for web", body("web", []string{"http://127.0.0.1:8080/cb"}, ""), []string{"body.redirectUris.0"}},
			{"http localhost for spa", body("spa", []string{"http://localhost:5173/cb"}, ""), []string{"body.redirectUris.0"}},
			{"http non-loopback for native", body("native", []string{"http://192.168.1.2/cb"}, ""), []string{"body.redirectUris.0"}},
			{"custom scheme for native", body("native", []string{"com.example.app:/cb"}, ""), []string{"body.redirectUris.0"}},
			{"bad post-logout uri", body("web", ok, `"postLogoutRedirectUris":["https://a.example/","http://a.example/"]`), []string{"body.postLogoutRedirectUris.1"}},
			{"post-logout uri with a fragment", body("native", ok, `"postLogoutRedirectUris":["http://[::1]/bye#x"]`), []string{"body.postLogoutRedirectUris.0"}},
			// Grant rules.
			{"client_credentials for native", body("native", ok, `"grantTypes":["authorization_code","client_credentials"]`), []string{"body.grantTypes.1"}},
			{"client_credentials for spa", body("spa", ok, `"grantTypes":["client_credentials"]`), []string{"body.grantTypes.0"}},
			{"refresh_token without authorization_code", body("web", ok, `"grantTypes":["client_credentials","refresh_token"]`), []string{"body.grantTypes.1"}},
			// Consent rule.
			{"native skipping consent", body("native", ok, `"skipConsent":true`), []string{"body.skipConsent"}},
			{"spa skipping consent", body("spa", ok, `"skipConsent":true`), []string{"body.skipConsent"}},
			// Everything the handler checks, at once.
			{"everything at once", body("spa", []string{"http://a.example/cb", "https://a.example/ok"},
				`"postLogoutRedirectUris":["ftp://a.example/"],"grantTypes":["refresh_token","client_credentials"],"skipConsent":true`),
				[]string{"body.redirectUris.0", "body.postLogoutRedirectUris.0", "body.grantTypes.0", "body.grantTypes.1", "body.skipConsent"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				p := app.do(owner.as(request{method: "POST", path: base, body: c.body})).
					wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				wantPaths(t, p.Errors, c.paths...)
				for _, e := range p.Errors {
					for _, echoed := range []string{"a.example", "192.168", "com.example.app", "user:pw", "mine"} {
						if strings.Contains(e.Message, echoed) {
							t.Errorf("message %q echoes the input", e.Message)
						}
					}
				}
			})
		}
		var list envelope[[]oidcClientBody]
		app.do(owner.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
		if len(list.Data) != 0 {
			t.Fatalf("refused registrations created %d clients", len(list.Data))
		}

		// Accepted: native loopback URIs in their three spellings with ports, https anywhere,
		// a web client with client_credentials only and skipConsent.
		accepted := []struct{ name, body string }{
			{"native loopback", body("native", []string{"http://127.0.0.1:8400/cb", "http://[::1]:8400/cb", "http://localhost/cb", "https://app.example.com/cb"},
				`"postLogoutRedirectUris":["http://127.0.0.1/bye"],"grantTypes":["authorization_code","refresh_token"],"scopes":["openid","offline_access"]`)},
			{"spa https", body("spa", ok, `"skipConsent":false`)},
			{"web machine client", body("web", ok, `"grantTypes":["client_credentials"],"skipConsent":true`)},
			{"web with query", body("web", []string{"https://app.example.com/cb?tenant=a&x=%20"}, "")},
		}
		for _, a := range accepted {
			t.Run("accepted/"+a.name, func(t *testing.T) {
				oidcCreate(t, app, owner, project.ID, a.body)
			})
		}
	})
}

// TestOidcClientRedirectMessages: a refused redirect URI's message says what is allowed instead.
// A web or spa client registering http://localhost (a developer's first try) learns that
// loopback http is for native clients only; a native client learns its loopback options.
func TestOidcClientRedirectMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		const webOnly = "must use https (http on 127.0.0.1, [::1] or localhost is only for native clients)"
		for _, c := range []struct{ typ, uri, path, message string }{
			{"web", "http://localhost:3000/api/auth/callback", "redirectUris", webOnly},
			{"spa", "http://127.0.0.1:5173/cb", "redirectUris", webOnly},
			{"web", "http://app.example.com/cb", "redirectUris", webOnly},
			{"spa", "http://localhost:5173/", "postLogoutRedirectUris", webOnly},
			{"native", "http://192.168.1.2/cb", "redirectUris", "must use https, or http on 127.0.0.1, [::1] or localhost"},
		} {
			uris := map[string][]string{"redirectUris": {"https://app.example.com/cb"}, "postLogoutRedirectUris": {}}
			uris[c.path] = []string{c.uri}
			body, _ := json.Marshal(map[string]any{"name": "Dev", "type": c.typ, "redirectUris": uris["redirectUris"],
				"postLogoutRedirectUris": uris["postLogoutRedirectUris"], "grantTypes": []string{"authorization_code"}, "scopes": []string{"openid"}})
			p := app.do(owner.as(request{method: "POST", path: "/api/v1/projects/" + ten.project.ID + "/oidc-clients", body: string(body)})).
				wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
			want := []FieldError{{Path: []string{"body", c.path, "0"}, Message: c.message}}
			if !reflect.DeepEqual(p.Errors, want) {
				t.Errorf("%s %s: errors %+v, want %+v", c.typ, c.uri, p.Errors, want)
			}
		}
	})
}

func TestOidcClientLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st, raw := saOpen(t, b)
		app := newTestApp(t, st, testConfig())
		ten := app.newTenancy(t)
		owner, admin, viewer := ten.members[RoleOwner], ten.members[RoleAdmin], ten.members[RoleViewer]
		project := saProject(t, app, ten, "oidc-lifecycle")
		other := saProject(t, app, ten, "oidc-other")
		base := "/api/v1/projects/" + project.ID + "/oidc-clients"
		ctx := context.Background()

		// A web client: its secret comes back once, and only its HMAC is stored.
		web, webRaw := oidcCreate(t, app, owner, project.ID, webClientBody)
		if !clientIDShape.MatchString(web.ID) || web.ProjectID != project.ID || web.Name != "Storefront web" || web.Type != "web" ||
			!slices.Equal(web.RedirectURIs, []string{"https://shop.example.com/cb", "https://shop.example.com/cb2?x=1"}) ||
			!slices.Equal(web.PostLogoutRedirectURIs, []string{"https://shop.example.com/"}) ||
			!slices.Equal(web.GrantTypes, []string{"authorization_code", "refresh_token", "client_credentials"}) ||
			!slices.Equal(web.Scopes, []string{"openid", "profile", "email", "offline_access", "organization", "roles", "entitlements", "billing"}) ||
			!web.SkipConsent || web.TokenEndpointAuthMethod != "client_secret_basic" || web.DisabledAt != nil ||
			!web.UpdatedAt.Equal(web.CreatedAt) {
			t.Fatalf("created web client %+v", web)
		}
		if web.ClientSecret == nil || !clientSecretShape.MatchString(*web.ClientSecret) {
			t.Fatalf("clientSecret %v does not match the OidcClientSecret pattern", web.ClientSecret)
		}
		secret := *web.ClientSecret
		if got, want := rawMembers(t, webRaw), slices.Sorted(slices.Values(append(slices.Clone(oidcClientMembers), "clientSecret"))); !slices.Equal(got, want) {
			t.Errorf("creation members %v, want %v", got, want)
		}
		if n := strings.Count(webRaw, secret); n != 1 {
			t.Errorf("creation body carries the secret %d times, want once", n)
		}
		auth, err := st.OIDCClientByID(ctx, web.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !oauth.ClientSecretMatches(app.srv.clientSecretPepper, secret, auth.SecretHash) ||
			!oauth.ClientSecretMatches(seal.DeriveKey(testConfig().SecretKey, "oidc-client-secret"), secret, auth.SecretHash) ||
			auth.ProjectID != project.ID || auth.OrganizationID != ten.org.ID || !auth.Usable() {
			t.Fatalf("lookup by client id %+v", auth)
		}
		// The API key pepper is not the client-secret pepper.
		if oauth.ClientSecretMatches(app.srv.apiKeyPepper, secret, auth.SecretHash) {
			t.Fatal("the client secret hash is keyed with the API key pepper")
		}

		// Public clients: clientSecret is an explicit null and the auth method none.
		for _, typ := range []string{"native", "spa"} {
			uri := "https://app.example.com/cb"
			if typ == "native" {
				uri = "http://127.0.0.1/cb"
			}
			c, cRaw := oidcCreate(t, app, admin, project.ID, fmt.Sprintf(
				`{"name":"%s app","type":%q,"redirectUris":[%q],"grantTypes":["authorization_code","refresh_token"],"scopes":["openid","offline_access"]}`,
				typ, typ, uri))
			if c.ClientSecret != nil || !strings.Contains(cRaw, `"clientSecret":null`) || c.TokenEndpointAuthMethod != "none" ||
				c.SkipConsent || c.Type != typ || len(c.PostLogoutRedirectURIs) != 0 || c.PostLogoutRedirectURIs == nil {
				t.Fatalf("%s client %+v (%s)", typ, c, cRaw)
			}
			if a, err := st.OIDCClientByID(ctx, c.ID); err != nil || a.SecretHash != nil {
				t.Errorf("%s client stores a secret hash %x, %v", typ, a.SecretHash, err)
			}
			// Rotating a public client's secret: 409, nothing changes.
			app.do(owner.as(request{method: "POST", path: base + "/" + c.ID + "/rotate-secret"})).
				wantProblem(t, http.StatusConflict, "conflict", "Public clients have no client secret")
			if a, _ := st.OIDCClientByID(ctx, c.ID); a.SecretHash != nil || !a.UpdatedAt.Equal(c.UpdatedAt) {
				t.Errorf("a refused rotation changed the %s client: %+v", typ, a)
			}
		}

		// Rotate: a new secret, shown once; the old one stops matching.
		rotRes := app.do(admin.as(request{method: "POST", path: base + "/" + web.ID + "/rotate-secret"}))
		var rotated envelope[oidcClientBody]
		rotRes.decode(t, http.StatusOK, &rotated)
		if rotated.Data.ClientSecret == nil || !clientSecretShape.MatchString(*rotated.Data.ClientSecret) || *rotated.Data.ClientSecret == secret ||
			rotated.Data.ID != web.ID || rotated.Data.UpdatedAt.Before(web.UpdatedAt) {
			t.Fatalf("rotated %+v", rotated.Data)
		}
		newSecret := *rotated.Data.ClientSecret
		if got, want := rawMembers(t, rotRes.Body.String()), slices.Sorted(slices.Values(append(slices.Clone(oidcClientMembers), "clientSecret"))); !slices.Equal(got, want) {
			t.Errorf("rotation members %v, want %v", got, want)
		}
		auth, _ = st.OIDCClientByID(ctx, web.ID)
		if oauth.ClientSecretMatches(app.srv.clientSecretPepper, secret, auth.SecretHash) ||
			!oauth.ClientSecretMatches(app.srv.clientSecretPepper, newSecret, auth.SecretHash) {
			t.Fatal("after rotation the old secret still matches or the new one does not")
		}

		// Disable (twice keeps the first time), rotate while disabled, enable.
		var disabled, again, enabled envelope[oidcClientBody]
		app.do(owner.as(request{method: "POST", path: base + "/" + web.ID + "/disable"})).decode(t, http.StatusOK, &disabled)
		if disabled.Data.DisabledAt == nil || disabled.Data.ClientSecret != nil {
			t.Fatalf("disabled %+v", disabled.Data)
		}
		app.do(owner.as(request{method: "POST", path: base + "/" + web.ID + "/disable"})).decode(t, http.StatusOK, &again)
		if again.Data.DisabledAt == nil || !again.Data.DisabledAt.Equal(*disabled.Data.DisabledAt) {
			t.Errorf("second disable moved disabledAt: %v → %v", disabled.Data.DisabledAt, again.Data.DisabledAt)
		}
		if a, _ := st.OIDCClientByID(ctx, web.ID); a.DisabledAt == nil || a.Usable() {
			t.Errorf("lookup after disable %+v", a)
		}
		var whileDisabled envelope[oidcClientBody]
		app.do(owner.as(request{method: "POST", path: base + "/" + web.ID + "/rotate-secret"})).decode(t, http.StatusOK, &whileDisabled)
		if whileDisabled.Data.DisabledAt == nil || whileDisabled.Data.ClientSecret == nil {
			t.Errorf("rotation while disabled %+v", whileDisabled.Data)
		}
		thirdSecret := *whileDisabled.Data.ClientSecret
		app.do(owner.as(request{method: "POST", path: base + "/" + web.ID + "/enable"})).decode(t, http.StatusOK, &enabled)
		if enabled.Data.DisabledAt != nil || enabled.Data.UpdatedAt.Before(again.Data.UpdatedAt) {
			t.Fatalf("enabled %+v", enabled.Data)
		}
		if a, _ := st.OIDCClientByID(ctx, web.ID); !a.Usable() || !oauth.ClientSecretMatches(app.srv.clientSecretPepper, thirdSecret, a.SecretHash) {
			t.Errorf("after enable the lookup says %+v", a)
		}

		// Not found: unknown ids, and a client addressed through another project.
		for _, path := range []string{
			base + "/cli_missing/disable",
			base + "/cli_missing/enable",
			base + "/cli_missing/rotate-secret",
			"/api/v1/projects/" + other.ID + "/oidc-clients/" + web.ID + "/disable",
			"/api/v1/projects/" + other.ID + "/oidc-clients/" + web.ID + "/enable",
			"/api/v1/projects/" + other.ID + "/oidc-clients/" + web.ID + "/rotate-secret",
		} {
			app.do(owner.as(request{method: "POST", path: path})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		}
		if a, _ := st.OIDCClientByID(ctx, web.ID); a.DisabledAt != nil || !oauth.ClientSecretMatches(app.srv.clientSecretPepper, thirdSecret, a.SecretHash) {
			t.Error("calls through another project changed the client")
		}

		// List (the viewer holds credential:read): registrations only, never a secret.
		listRes := app.do(viewer.as(request{method: "GET", path: base}))
		var list envelope[[]oidcClientBody]
		listRes.decode(t, http.StatusOK, &list)
		if len(list.Data) != 3 || list.Data[0].ID != web.ID || list.Data[1].Type != "native" || list.Data[2].Type != "spa" {
			t.Fatalf("list %+v", list.Data)
		}
		var listRaw struct{ Data []json.RawMessage }
		_ = json.Unmarshal(listRes.Body.Bytes(), &listRaw)
		for _, c := range listRaw.Data {
			if got := saJSONKeys(t, c); !slices.Equal(got, oidcClientMembers) {
				t.Errorf("listed client members %v, want %v", got, oidcClientMembers)
			}
		}
		var otherList envelope[[]oidcClientBody]
		app.do(owner.as(request{method: "GET", path: "/api/v1/projects/" + other.ID + "/oidc-clients"})).decode(t, http.StatusOK, &otherList)
		if len(otherList.Data) != 0 {
			t.Errorf("another project lists %d clients", len(otherList.Data))
		}

		// Audit: every mutation, in its own row, never with secret material.
		auditRes := app.do(owner.as(request{method: "GET", path: "/api/v1/projects/" + project.ID + "/audit-logs"}))
		var entries envelope[[]struct {
			Action   string
			Target   struct{ Type, ID string }
			Actor    struct{ Type, ID string }
			Metadata map[string]any
		}]
		auditRes.decode(t, http.StatusOK, &entries)
		counts := map[string]int{}
		for _, e := range entries.Data {
			counts[e.Action]++
			if strings.HasPrefix(e.Action, "oidc_client.") && (e.Target.Type != "oidc_client" || !clientIDShape.MatchString(e.Target.ID) || e.Actor.Type != "user") {
				t.Errorf("audit %+v", e)
			}
			if e.Action == "oidc_client.create" && e.Target.ID == web.ID &&
				(e.Metadata["type"] != "web" || e.Metadata["skipConsent"] != true || e.Actor.ID != owner.ID) {
				t.Errorf("create audit %+v", e)
			}
		}
		want := map[string]int{"oidc_client.create": 3, "oidc_client.rotate_secret": 2, "oidc_client.disable": 2, "oidc_client.enable": 1}
		for action, n := range want {
			if counts[action] != n {
				t.Errorf("%d %s audit rows, want %d (all: %v)", counts[action], action, n, counts)
			}
		}

		// No secret, and no printable form of its hash, anywhere after the responses that
		// drew it: not in list or audit responses, not in the logs, not in any database row.
		dump := saDumpDatabase(t, raw, st.Dialect())
		if !strings.Contains(dump, web.ID) || !strings.Contains(dump, "https://shop.example.com/cb2?x=1") {
			t.Fatal("database dump misses the client's row: the grep below would prove nothing")
		}
		places := map[string]string{
			"list response":       listRes.Body.String(),
			"disable response":    fmt.Sprint(disabled),
			"audit response":      auditRes.Body.String(),
			"logs":                app.logs.String(),
			"database (raw rows)": dump,
		}
		for _, s := range []string{secret, newSecret, thirdSecret} {
			h := oauth.HashClientSecret(app.srv.clientSecretPepper, s)
			needles := map[string]string{"secret": s, "hash (hex)": hex.EncodeToString(h), "hash (base64)": base64.StdEncoding.EncodeToString(h),
				"hash (base64url)": base64.RawURLEncoding.EncodeToString(h)}
			for where, text := range places {
				for what, needle := range needles {
					if strings.Contains(text, needle) {
						t.Errorf("%s contains the %s of a client secret", where, what)
					}
				}
			}
		}
		if !strings.Contains(dump, string(oauth.HashClientSecret(app.srv.clientSecretPepper, thirdSecret))) {
			t.Error("the raw rows do not hold the HMAC of the current secret")
		}
	})
}

// TestOidcClientAccess: who may do what. Every operation is user only: a service account is
// refused with 403 "A user session is required" whatever its scopes. Reading needs
// credential:read (every role), the rest credential:manage (owner, admin); a non-member and an
// archived project get 404.
func TestOidcClientAccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		base := "/api/v1/projects/" + ten.project.ID + "/oidc-clients"
		client := base + "/" + ten.clientID

		type op struct {
			name, method, path, body string
			status                   int
			manage                   bool
		}
		ops := []op{
			{"list", "GET", base, "", http.StatusOK, false},
			{"create", "POST", base, webClientBody, http.StatusCreated, true},
			{"disable", "POST", client + "/disable", "", http.StatusOK, true},
			{"enable", "POST", client + "/enable", "", http.StatusOK, true},
			{"rotate-secret", "POST", client + "/rotate-secret", "", http.StatusOK, true},
			{"update", "PATCH", client, `{"name":"Renamed"}`, http.StatusOK, true},
		}
		for _, o := range ops {
			for _, who := range append(slices.Clone(fixedRoles), "non-member", "key:*", "key:project:read") {
				t.Run(o.name+"/"+who, func(t *testing.T) {
					r := request{method: o.method, path: o.path, body: o.body}
					var res response
					switch who {
					case "non-member":
						res = app.do(ten.stranger.as(r))
					case "key:*":
						res = app.do(withKey(ten.starKey, r))
					case "key:project:read":
						res = app.do(withKey(ten.readerKey, r))
					default:
						res = app.do(ten.members[who].as(r))
					}
					switch {
					case strings.HasPrefix(who, "key:"):
						res.wantProblem(t, http.StatusForbidden, "http-403", "A user session is required")
					case who == "non-member":
						res.wantProblem(t, http.StatusNotFound, "http-404", "Not found")
					case o.manage && who != RoleOwner && who != RoleAdmin:
						res.wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
					case res.Code != o.status:
						t.Fatalf("status %d, want %d: %s", res.Code, o.status, res.Body)
					}
				})
			}
		}

		// An archived project's clients are not found, for reads and writes alike.
		owner := ten.members[RoleOwner]
		err := app.store.InTx(context.Background(), func(tx *store.Tx) error {
			_, err := tx.SetProjectArchived(context.Background(), ten.project.ID, true)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ops {
			t.Run("archived/"+o.name, func(t *testing.T) {
				app.do(owner.as(request{method: o.method, path: o.path, body: o.body})).
					wantProblem(t, http.StatusNotFound, "http-404", "Not found")
			})
		}
	})
}

// TestOidcClientIDTokenAlg: a client registers idTokenSignedResponseAlg (any of the three
// algorithms, any client type); it reads back in the creation response and the list, and is
// null when omitted.
func TestOidcClientIDTokenAlg(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		project := saProject(t, app, ten, "oidc-id-token-alg")
		want := map[string]string{}
		for _, c := range []struct{ typ, extra, alg string }{
			{"web", `,"idTokenSignedResponseAlg":"ES256"`, `"ES256"`},
			{"native", `,"idTokenSignedResponseAlg":"EdDSA"`, `"EdDSA"`},
			{"spa", `,"idTokenSignedResponseAlg":"RS256"`, `"RS256"`},
			{"web", ``, `null`},
		} {
			body := `{"name":"alg","type":"` + c.typ + `","redirectUris":["https://app.example.com/cb"],"grantTypes":["authorization_code"],"scopes":["openid"]` + c.extra + `}`
			created, raw := oidcCreate(t, app, owner, project.ID, body)
			var got struct {
				Data struct {
					Alg json.RawMessage `json:"idTokenSignedResponseAlg"`
				}
			}
			if err := json.Unmarshal([]byte(raw), &got); err != nil || string(got.Data.Alg) != c.alg {
				t.Fatalf("create %s%s: idTokenSignedResponseAlg %s, want %s (%v)", c.typ, c.extra, got.Data.Alg, c.alg, err)
			}
			want[created.ID] = c.alg
		}
		res := app.do(owner.as(request{method: "GET", path: "/api/v1/projects/" + project.ID + "/oidc-clients"}))
		var list struct {
			Data []struct {
				ID  string          `json:"id"`
				Alg json.RawMessage `json:"idTokenSignedResponseAlg"`
			}
		}
		if err := json.Unmarshal(res.Body.Bytes(), &list); err != nil || res.Code != http.StatusOK || len(list.Data) != 4 {
			t.Fatalf("list: %d %s (%v)", res.Code, res.Body, err)
		}
		for _, c := range list.Data {
			if string(c.Alg) != want[c.ID] {
				t.Errorf("list: client %s has %s, want %s", c.ID, c.Alg, want[c.ID])
			}
		}
	})
}
