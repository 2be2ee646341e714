package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// createKey makes a service account in the tenancy's project through the API, as its owner, and
// returns the account id, its first key id and the API key.
func (a *testApp) createKey(t *testing.T, ten tenancy, body string) (accountID, keyID, apiKey string) {
	t.Helper()
	res := a.do(ten.members[RoleOwner].as(request{method: http.MethodPost,
		path: "/api/v1/projects/" + ten.project.ID + "/service-accounts", body: body}))
	var out envelope[struct {
		ID     string `json:"id"`
		APIKey string `json:"apiKey"`
		Keys   []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}]
	res.decode(t, http.StatusCreated, &out)
	if len(out.Data.Keys) != 1 {
		t.Fatalf("created account has %d keys", len(out.Data.Keys))
	}
	return out.Data.ID, out.Data.Keys[0].ID, out.Data.APIKey
}

func withKey(key string, r request) request {
	h := map[string]string{"X-API-Key": key}
	for k, v := range r.headers {
		h[k] = v
	}
	r.headers = h
	return r
}

func TestAPIKeyAuthentication(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		prjPath := "/api/v1/projects/" + ten.project.ID
		accountID, keyID, key := app.createKey(t, ten, `{"name":"reader","scopes":["project:read"]}`)
		get := func(k string, extra map[string]string) response {
			r := withKey(k, request{method: http.MethodGet, path: prjPath})
			for h, v := range extra {
				r.headers[h] = v
			}
			return app.do(r)
		}
		if res := get(key, nil); res.Code != http.StatusOK {
			t.Fatalf("valid key: %d %s", res.Code, res.Body)
		}

		publicID := key[7:19]
		wrongSecret := key[:20] + strings.Repeat("A", 43)
		unknownID := "svc_sk_" + "ZZZZZZZZZZZZ" + key[19:]
		cases := map[string]string{
			"malformed":           "svc_sk_short",
			"wrong prefix":        "sk_svc" + key[6:],
			"unknown public id":   unknownID,
			"wrong secret":        wrongSecret,
			"secret not 32 bytes": key[:20] + strings.Repeat("A", 42) + "=",
			"empty":               "",
			"bearer-style":        "Bearer " + key,
		}
		var bodies []string
		for name, k := range cases {
			t.Run(name, func(t *testing.T) {
				res := get(k, nil)
				p := res.wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
				bodies = append(bodies, strings.Replace(res.Body.String(), p.RequestID, "", 1))
			})
		}
		for _, body := range bodies[1:] {
			if body != bodies[0] {
				t.Errorf("401 bodies differ:\n%s\n%s", body, bodies[0])
			}
		}
		t.Run("a bad key with a valid cookie is still 401", func(t *testing.T) {
			get(wrongSecret, map[string]string{"Cookie": owner.Cookie}).
				wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		})
		t.Run("key never echoed in logs", func(t *testing.T) {
			if strings.Contains(app.logs.String(), key[20:]) || strings.Contains(app.logs.String(), publicID+"_") {
				t.Fatal("the API key appears in the logs")
			}
		})

		ctx := context.Background()
		t.Run("disabled account", func(t *testing.T) {
			res := app.do(owner.as(request{method: http.MethodPost, path: prjPath + "/service-accounts/" + accountID + "/disable"}))
			if res.Code != http.StatusOK {
				t.Fatalf("disable: %d %s", res.Code, res.Body)
			}
			get(key, nil).wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
			res = app.do(owner.as(request{method: http.MethodPost, path: prjPath + "/service-accounts/" + accountID + "/enable"}))
			if res.Code != http.StatusOK {
				t.Fatalf("enable: %d %s", res.Code, res.Body)
			}
			if res := get(key, nil); res.Code != http.StatusOK {
				t.Fatalf("re-enabled key: %d", res.Code)
			}
		})
		t.Run("revoked key, while a second key keeps working", func(t *testing.T) {
			var minted envelope[struct {
				APIKey string `json:"apiKey"`
			}]
			app.do(owner.as(request{method: http.MethodPost, path: prjPath + "/service-accounts/" + accountID + "/keys", body: `{}`})).
				decode(t, http.StatusCreated, &minted)
			res := app.do(owner.as(request{method: http.MethodPost, path: prjPath + "/service-accounts/" + accountID + "/keys/" + keyID + "/revoke"}))
			if res.Code != http.StatusOK {
				t.Fatalf("revoke: %d %s", res.Code, res.Body)
			}
			get(key, nil).wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
			if res := get(minted.Data.APIKey, nil); res.Code != http.StatusOK {
				t.Fatalf("second key after revoking the first: %d", res.Code)
			}
		})
		t.Run("expired key (injected clock)", func(t *testing.T) {
			clock := storetest.NewClock(time.Now().UTC())
			app := newTestApp(t, openURL(t, b.URL(t), store.WithClock(clock.Now)), testConfig())
			ten := app.newTenancy(t)
			expires := clock.Now().Add(time.Hour).Format(time.RFC3339Nano)
			_, _, shortKey := app.createKey(t, ten, `{"name":"short","scopes":["project:read"],"expiresAt":"`+expires+`"}`)
			path := "/api/v1/projects/" + ten.project.ID
			if res := app.do(withKey(shortKey, request{method: http.MethodGet, path: path})); res.Code != http.StatusOK {
				t.Fatalf("before expiry: %d", res.Code)
			}
			clock.Advance(time.Hour)
			app.do(withKey(shortKey, request{method: http.MethodGet, path: path})).
				wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		})
		t.Run("lastUsedAt is recorded without blocking", func(t *testing.T) {
			_, _, k := app.createKey(t, ten, `{"name":"touch","scopes":["project:read"]}`)
			get(k, nil)
			deadline := time.Now().Add(5 * time.Second)
			for {
				auth, err := app.store.APIKeyByPublicID(ctx, k[7:19])
				if err != nil {
					t.Fatal(err)
				}
				if auth.LastUsedAt != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("lastUsedAt never recorded")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	})
}

func TestServiceAccountAuthorization(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		other := app.newTenancy(t)
		envs := ten.project.Environments
		prjPath := "/api/v1/projects/" + ten.project.ID
		_, _, star := app.createKey(t, ten, `{"name":"all","scopes":["*"]}`)
		_, _, reader := app.createKey(t, ten, `{"name":"reader","scopes":["project:read"]}`)
		_, _, pinned := app.createKey(t, ten, `{"name":"pinned","scopes":["project:read","audit:read"],"environmentId":"`+envs[2].ID+`"}`)

		cases := []struct {
			name   string
			key    string
			req    request
			status int
			title  string
		}{
			{"user-only route refused whatever the scopes", star, request{method: "POST", path: prjPath + "/service-accounts", body: `{"name":"x","scopes":["*"]}`}, 403, titleUserRequired},
			{"organizations list is user only", star, request{method: "GET", path: "/api/v1/organizations"}, 403, titleUserRequired},
			{"another project", star, request{method: "GET", path: "/api/v1/projects/" + other.project.ID}, 403, titlePermissionDenied},
			{"another organization's projects", star, request{method: "GET", path: "/api/v1/organizations/" + other.org.ID + "/projects"}, 403, titlePermissionDenied},
			{"own organization's projects", reader, request{method: "GET", path: "/api/v1/organizations/" + ten.org.ID + "/projects"}, 200, ""},
			{"scope lacks the permission", reader, request{method: "PATCH", path: prjPath, body: `{"name":"x"}`}, 403, titlePermissionDenied},
			{"star grants it", star, request{method: "PATCH", path: prjPath, body: `{"name":"Renamed by a key"}`}, 200, ""},
			{"unknown project is 404", star, request{method: "GET", path: "/api/v1/projects/prj_nope"}, 404, titleNotFound},
			{"pinned: project-level route allowed", pinned, request{method: "GET", path: prjPath}, 200, ""},
			{"pinned: own environment allowed", pinned, request{method: "GET", path: prjPath + "/audit-logs?environmentId=" + envs[2].ID}, 200, ""},
			{"pinned: another environment in the query", pinned, request{method: "GET", path: prjPath + "/audit-logs?environmentId=" + envs[0].ID}, 403, titleEnvironmentScoped},
			{"pinned: another environment in the path, before the permission check", pinned, request{method: "GET", path: "/api/v1/environments/" + envs[0].ID + "/configs"}, 403, titleEnvironmentScoped},
			{"pinned: own environment without the permission", pinned, request{method: "GET", path: "/api/v1/environments/" + envs[2].ID + "/configs"}, 403, titlePermissionDenied},
			{"pinned: another environment in the body", pinned, request{method: "POST", path: "/api/v1/authorize",
				body: `{"projectId":"` + ten.project.ID + `","principalType":"user","principalId":"u1","permission":"a:b","environmentId":"` + envs[0].ID + `"}`}, 400, titleValidation},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res := app.do(withKey(tc.key, tc.req))
				if tc.status >= 400 {
					kind := map[int]string{400: "validation", 403: "http-403", 404: "http-404"}[tc.status]
					res.wantProblem(t, tc.status, kind, tc.title)
					return
				}
				if res.Code != tc.status {
					t.Fatalf("status %d, want %d: %s", res.Code, tc.status, res.Body)
				}
			})
		}

		// Mutations by a service account are audited with the account as the actor.
		var logs envelope[[]auditBody]
		app.do(ten.members[RoleOwner].as(request{method: "GET", path: prjPath + "/audit-logs"})).decode(t, http.StatusOK, &logs)
		found := false
		for _, e := range logs.Data {
			if e.Action == "project.update" && e.Actor.Type == store.ActorServiceAccount && strings.HasPrefix(e.Actor.ID, "sa_") {
				found = true
			}
			raw, _ := json.Marshal(e)
			if strings.Contains(string(raw), star[20:]) {
				t.Fatal("an audit row holds an API key")
			}
		}
		if !found {
			t.Fatalf("no project.update row by a service account: %+v", logs.Data)
		}
	})
}

// TestServiceAccountRevealsWithConfigRead: a service account needs only config:read to read
// one value (users need config:reveal); each secret reveal is one audit row with the account as
// actor and the response's request id; lists stay masked.
func TestServiceAccountRevealsWithConfigRead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		prod := ten.project.Environments[2].ID
		cfg := "/api/v1/environments/" + prod + "/configs/"
		res := app.do(owner.as(request{method: http.MethodPut, path: cfg + "DB_PASSWORD", body: `{"value":"hunter2-very-secret","secret":true}`}))
		if res.Code != http.StatusCreated {
			t.Fatalf("put: %d %s", res.Code, res.Body)
		}
		_, _, key := app.createKey(t, ten, `{"name":"app","scopes":["config:read"],"environmentId":"`+prod+`"}`)

		list := app.do(withKey(key, request{method: http.MethodGet, path: cfg[:len(cfg)-1]}))
		if list.Code != http.StatusOK || strings.Contains(list.Body.String(), "hunter2") || !strings.Contains(list.Body.String(), `"masked":true`) {
			t.Fatalf("list: %d %s", list.Code, list.Body)
		}
		got := app.do(withKey(key, request{method: http.MethodGet, path: cfg + "DB_PASSWORD", headers: map[string]string{"X-Request-Id": "reveal-by-key"}}))
		if got.Code != http.StatusOK || !strings.Contains(got.Body.String(), `"value":"hunter2-very-secret"`) || got.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("reveal: %d %v %s", got.Code, got.Header(), got.Body)
		}
		app.do(ten.members[RoleDeveloper].as(request{method: http.MethodGet, path: cfg + "DB_PASSWORD"})).
			wantProblem(t, http.StatusForbidden, "http-403", titlePermissionDenied)
		app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/environments/" + ten.project.Environments[0].ID + "/configs/FEATURE_FLAGS"})).
			wantProblem(t, http.StatusForbidden, "http-403", titleEnvironmentScoped)

		entries, err := app.store.ListAudit(context.Background(), store.AuditFilter{ProjectID: ten.project.ID})
		if err != nil {
			t.Fatal(err)
		}
		reveals := 0
		for _, e := range entries {
			if e.Action == "config.reveal" {
				reveals++
				if e.ActorType != store.ActorServiceAccount || e.RequestID != "reveal-by-key" {
					t.Errorf("reveal row %+v", e)
				}
			}
		}
		if reveals != 1 {
			t.Fatalf("%d config.reveal rows, want 1", reveals)
		}
	})
}
