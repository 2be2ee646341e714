package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestAuthorizeWithAPIKey covers the one-query path of POST /api/v1/authorize with an API key
// (authorize_fast.go): the decisions it makes, and that every refusal comes in the same order,
// with the same problem, as on the general path — a bad key is 401 whatever the body, a bad body
// with a good key is 400, another project is 403 or 404 — and that the decision reads bindings
// and keys as they are at the request.
func TestAuthorizeWithAPIKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		other := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		dev := rbacCaller{t, app, owner, ten.project.ID}
		editor := dev.createRole(`{"name":"Editor","permissions":["document:read"]}`)
		binding := dev.bind(editor.ID, "user", "alice")
		post := func(key, body string) response {
			return app.do(withKey(key, request{method: http.MethodPost, path: "/api/v1/authorize", body: body}))
		}
		body := func(projectID, perm string) string {
			return authorizeBody(projectID, store.PrincipalUser, "alice", perm)
		}
		wrongSecret := flipSecret(ten.readerKey)

		for _, tc := range []struct {
			name, key, body string
			status          int
			kind, title     string
			want            []string // fragments of the 200 body
		}{
			{"allowed", ten.readerKey, body(ten.project.ID, "document:read"), 200, "", "", []string{`"allowed":true`, `"roles":["editor"]`}},
			{"denied", ten.readerKey, body(ten.project.ID, "document:write"), 200, "", "", []string{`"allowed":false`, `"roles":["editor"]`}},
			{"star key", ten.starKey, body(ten.project.ID, "document:read"), 200, "", "", []string{`"allowed":true`}},
			{"wrong secret, valid body", wrongSecret, body(ten.project.ID, "document:read"), 401, "http-401", "Authentication required", nil},
			{"wrong secret, invalid body", wrongSecret, `{"projectId":1}`, 401, "http-401", "Authentication required", nil},
			{"malformed key", "svc_sk_short", body(ten.project.ID, "document:read"), 401, "http-401", "Authentication required", nil},
			{"valid key, invalid body", ten.readerKey, `{"projectId":"` + ten.project.ID + `","principalType":"robot","principalId":"alice","permission":"document:read"}`,
				400, "validation", "Validation failed", nil},
			{"valid key, extra member", ten.readerKey, `{"projectId":"` + ten.project.ID + `","principalType":"user","principalId":"alice","permission":"document:read","x":1}`,
				400, "validation", "Validation failed", nil},
			{"another organization's project", ten.readerKey, body(other.project.ID, "document:read"), 403, "http-403", "Permission denied", nil},
			{"unknown project", ten.readerKey, body("prj_01jd3m5c2v8r1k4y7p0qwzt6nb", "document:read"), 404, "http-404", "Not found", nil},
		} {
			res := post(tc.key, tc.body)
			if tc.status != http.StatusOK {
				res.wantProblem(t, tc.status, tc.kind, tc.title)
				continue
			}
			for _, w := range tc.want {
				if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), w) {
					t.Errorf("%s: %d %s, want 200 with %s", tc.name, res.Code, res.Body, w)
				}
			}
		}

		// The very next request sees a deleted binding, then a revoked key.
		dev.do(http.MethodDelete, "/role-bindings/"+binding.ID, "").decode(t, http.StatusOK, &struct{}{})
		if res := post(ten.readerKey, body(ten.project.ID, "document:read")); !strings.Contains(res.Body.String(), `"allowed":false`) || !strings.Contains(res.Body.String(), `"roles":[]`) {
			t.Errorf("after deleting the binding: %d %s", res.Code, res.Body)
		}
		app.do(owner.as(request{method: http.MethodPost,
			path: "/api/v1/projects/" + ten.project.ID + "/service-accounts/" + ten.accountID + "/keys/" + ten.keyID + "/revoke"})).
			decode(t, http.StatusOK, &struct{}{})
		post(ten.readerKey, body(ten.project.ID, "document:read")).wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
	})
}

// flipSecret changes the first character of an API key's secret to another valid one: the
// same public id with a wrong secret.
func flipSecret(key string) string {
	i := len("svc_sk_") + 12 + 1
	c := byte('A')
	if key[i] == 'A' {
		c = 'B'
	}
	return key[:i] + string(c) + key[i+1:]
}
