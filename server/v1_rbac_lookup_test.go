package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The read-side scenarios of issue 24 over the decision fixture (v1_rbac_decisions_test.go):
// a principal's effective permissions and who holds a permission, each answer written out.

// TestPrincipalPermissions: the effective roles and permissions of each fixture principal, as
// the fixture's table gives them; expired bindings count for nothing, a principal with nothing
// is a 200 with empty lists, and a principal type other than user or service_account is a 400.
func TestPrincipalPermissions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newDecisionApp(t, b)
		viewer := ten.members[RoleViewer]
		path := func(typ, id string) string {
			return "/api/v1/projects/" + ten.project.ID + "/principals/" + typ + "/" + url.PathEscape(id) + "/permissions"
		}
		for _, tc := range []struct {
			name, typ, id, want string
		}{
			{"two roles", "user", "alice", `{"principalType":"user","principalId":"alice","roles":[
				{"roleId":"role_commenter","slug":"commenter","bindingId":"rb_alice_commenter","expiresAt":"2026-12-01T00:00:00Z"},
				{"roleId":"role_editor","slug":"editor","bindingId":"rb_alice_editor","expiresAt":null}],
				"permissions":["comment:write","document:read","document:write"],"wildcard":false}`},
			{"a * role", "user", "root", `{"principalType":"user","principalId":"root","roles":[
				{"roleId":"role_superuser","slug":"superuser","bindingId":"rb_root_superuser","expiresAt":null}],
				"permissions":["*","document:delete"],"wildcard":true}`},
			{"a binding that expired a second ago", "user", "carol", `{"principalType":"user","principalId":"carol","roles":[
				{"roleId":"role_editor","slug":"editor","bindingId":"rb_carol_editor","expiresAt":null}],
				"permissions":["document:read","document:write"],"wildcard":false}`},
			{"only an expired binding", "user", "dave", `{"principalType":"user","principalId":"dave","roles":[],"permissions":[],"wildcard":false}`},
			{"no bindings", "user", "erin", `{"principalType":"user","principalId":"erin","roles":[],"permissions":[],"wildcard":false}`},
			{"a service account", "service_account", "alice", `{"principalType":"service_account","principalId":"alice","roles":[
				{"roleId":"role_auditor","slug":"auditor","bindingId":"rb_robot_auditor","expiresAt":null}],
				"permissions":["audit:read"],"wildcard":false}`},
			{"a role with no permissions", "user", "frank", `{"principalType":"user","principalId":"frank","roles":[
				{"roleId":"role_placeholder","slug":"placeholder","bindingId":"rb_frank_placeholder","expiresAt":null}],
				"permissions":[],"wildcard":false}`},
			{"an id that needs escaping", "user", "a/b c", `{"principalType":"user","principalId":"a/b c","roles":[],"permissions":[],"wildcard":false}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, r := range []request{viewer.as(request{method: http.MethodGet, path: path(tc.typ, tc.id)}),
					withKey(ten.readerKey, request{method: http.MethodGet, path: path(tc.typ, tc.id)})} {
					var out envelope[json.RawMessage]
					app.do(r).decode(t, http.StatusOK, &out)
					wantJSONEqual(t, tc.name, out.Data, tc.want)
				}
			})
		}
		p := app.do(viewer.as(request{method: http.MethodGet, path: path("group", "alice")})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		if want := []FieldError{{Path: []string{"path", "principalType"}, Message: "must be one of user, service_account"}}; !reflect.DeepEqual(p.Errors, want) {
			t.Errorf("errors %+v, want %+v", p.Errors, want)
		}
		app.do(ten.stranger.as(request{method: http.MethodGet, path: path("user", "alice")})).
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
	})
}

// holdersPage is one answer of the permission-holders list: its data and its next cursor.
type holdersPage struct {
	data string
	next string
}

// TestPermissionHolders: the principals holding each permission, directly or through *, ordered
// by type then id, each with the roles that grant it; paging by the x-next-cursor header; the
// filters and their refusals.
func TestPermissionHolders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newDecisionApp(t, b)
		viewer := ten.members[RoleViewer]
		list := func(t *testing.T, query string) holdersPage {
			t.Helper()
			res := app.do(viewer.as(request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID + "/permission-holders?" + query}))
			var out envelope[json.RawMessage]
			res.decode(t, http.StatusOK, &out)
			return holdersPage{data: string(out.Data), next: res.Header().Get("x-next-cursor")}
		}
		for _, tc := range []struct {
			query, want string
		}{
			{"permission=document:read", `[
				{"principalType":"user","principalId":"alice","roles":["commenter","editor"]},
				{"principalType":"user","principalId":"carol","roles":["editor"]},
				{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
			{"permission=audit:read", `[
				{"principalType":"service_account","principalId":"alice","roles":["auditor"]},
				{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
			{"permission=invoice:read", `[{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
			{"permission=profile:read", `[
				{"principalType":"user","principalId":"fixture-user","roles":["member"]},
				{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
			{"permission=*", `[{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
			{"permission=audit:read&principalType=user", `[{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
			{"permission=audit:read&principalType=service_account", `[{"principalType":"service_account","principalId":"alice","roles":["auditor"]}]`},
			{"permission=document:read&principalType=service_account", `[]`},
			{"permission=document:read&limit=3", `[
				{"principalType":"user","principalId":"alice","roles":["commenter","editor"]},
				{"principalType":"user","principalId":"carol","roles":["editor"]},
				{"principalType":"user","principalId":"root","roles":["superuser"]}]`},
		} {
			t.Run(tc.query, func(t *testing.T) {
				page := list(t, tc.query)
				wantJSONEqual(t, tc.query, []byte(page.data), tc.want)
				if page.next != "" {
					t.Errorf("a single page has x-next-cursor %q", page.next)
				}
			})
		}

		t.Run("pages of one", func(t *testing.T) {
			var got []string
			next := ""
			for range 5 {
				q := "permission=document:read&limit=1"
				if next != "" {
					q += "&cursor=" + url.QueryEscape(next)
				}
				page := list(t, q)
				got = append(got, page.data)
				if next = page.next; next == "" {
					break
				}
			}
			want := []string{
				`[{"principalType":"user","principalId":"alice","roles":["commenter","editor"]}]`,
				`[{"principalType":"user","principalId":"carol","roles":["editor"]}]`,
				`[{"principalType":"user","principalId":"root","roles":["superuser"]}]`,
			}
			if len(got) != len(want) {
				t.Fatalf("pages %q, want %q", got, want)
			}
			for i := range want {
				wantJSONEqual(t, fmt.Sprintf("page %d", i+1), []byte(got[i]), want[i])
			}
		})
		t.Run("pages of two, across principal types", func(t *testing.T) {
			first := list(t, "permission=audit:read&limit=1")
			wantJSONEqual(t, "page 1", []byte(first.data), `[{"principalType":"service_account","principalId":"alice","roles":["auditor"]}]`)
			second := list(t, "permission=audit:read&limit=2&cursor="+url.QueryEscape(first.next))
			wantJSONEqual(t, "page 2", []byte(second.data), `[{"principalType":"user","principalId":"root","roles":["superuser"]}]`)
			if first.next == "" || second.next != "" {
				t.Errorf("cursors %q then %q, want one then none", first.next, second.next)
			}
		})

		p := app.do(viewer.as(request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID + "/permission-holders"})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "query.permission")
		for _, tc := range []struct {
			query string
			want  FieldError
		}{
			{"permission=Document:Read", FieldError{Path: []string{"query", "permission"},
				Message: `must match the pattern ^(\*|[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*)$`}},
			{"permission=a:b&principalType=group", FieldError{Path: []string{"query", "principalType"}, Message: "must be one of user, service_account"}},
			{"permission=a:b&limit=0", FieldError{Path: []string{"query", "limit"}, Message: "must be at least 1"}},
			{"permission=a:b&limit=201", FieldError{Path: []string{"query", "limit"}, Message: "must be at most 200"}},
			{"permission=a:b&cursor=not-a-cursor!", FieldError{Path: []string{"query", "cursor"}, Message: "is not a cursor of this list"}},
			{"permission=a:b&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("group\x00alice")),
				FieldError{Path: []string{"query", "cursor"}, Message: "is not a cursor of this list"}},
			{"permission=a:b&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("useralice")),
				FieldError{Path: []string{"query", "cursor"}, Message: "is not a cursor of this list"}},
		} {
			t.Run(tc.query, func(t *testing.T) {
				p := app.do(viewer.as(request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID + "/permission-holders?" + tc.query})).
					wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				if !reflect.DeepEqual(p.Errors, []FieldError{tc.want}) {
					t.Errorf("errors %+v, want %+v", p.Errors, tc.want)
				}
			})
		}
	})
}

// TestDecisionsFollowChanges: a deleted binding, a new one and a role's new permissions change
// the batch, explain, effective-permission and who-holds answers at the very next request.
func TestDecisionsFollowChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newDecisionApp(t, b)
		dev := rbacCaller{t, app, ten.members[RoleDeveloper], ten.project.ID}
		answers := func() string {
			var parts []string
			res := app.do(dev.user.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch", body: fmt.Sprintf(
				`{"projectId":%q,"explain":true,"checks":[{"principalType":"user","principalId":"alice","permission":"document:write"}]}`, ten.project.ID)}))
			var batch envelope[struct{ Results []decisionAnswer }]
			res.decode(t, http.StatusOK, &batch)
			parts = append(parts, fmt.Sprintf("batch %v %s", batch.Data.Results[0].Allowed, batch.Data.Results[0].Explanation))
			var single envelope[decisionAnswer]
			app.do(dev.user.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: fmt.Sprintf(
				`{"projectId":%q,"principalType":"user","principalId":"alice","permission":"document:write","explain":true}`, ten.project.ID)})).
				decode(t, http.StatusOK, &single)
			parts = append(parts, fmt.Sprintf("explain %v %s", single.Data.Allowed, single.Data.Explanation))
			var perms envelope[struct{ Permissions []string }]
			dev.do(http.MethodGet, "/principals/user/alice/permissions", "").decode(t, http.StatusOK, &perms)
			parts = append(parts, fmt.Sprintf("permissions %q", perms.Data.Permissions))
			var holders envelope[json.RawMessage]
			dev.do(http.MethodGet, "/permission-holders?permission=document:write", "").decode(t, http.StatusOK, &holders)
			parts = append(parts, "holders "+string(holders.Data))
			return strings.Join(parts, "\n")
		}
		check := func(step, want string) {
			t.Helper()
			if got := answers(); got != want {
				t.Errorf("%s:\n got %s\nwant %s", step, got, want)
			}
		}
		check("as the fixture has it", `batch true {"grantedBy":[{"bindingId":"rb_alice_editor","expiresAt":null,"matched":"document:write","roleId":"role_editor","roleSlug":"editor"}]}
explain true {"grantedBy":[{"bindingId":"rb_alice_editor","expiresAt":null,"matched":"document:write","roleId":"role_editor","roleSlug":"editor"}]}
permissions ["comment:write" "document:read" "document:write"]
holders [{"principalId":"alice","principalType":"user","roles":["editor"]},{"principalId":"carol","principalType":"user","roles":["editor"]},{"principalId":"root","principalType":"user","roles":["superuser"]}]`)

		dev.do(http.MethodDelete, "/role-bindings/rb_alice_editor", "").decode(t, http.StatusOK, &envelope[bindingJSON]{})
		check("after deleting alice's editor binding", `batch false {"considered":[{"bindingId":"rb_alice_commenter","expired":false,"expiresAt":"2026-12-01T00:00:00Z","roleSlug":"commenter"}],"reason":"permission_not_granted"}
explain false {"considered":[{"bindingId":"rb_alice_commenter","expired":false,"expiresAt":"2026-12-01T00:00:00Z","roleSlug":"commenter"}],"reason":"permission_not_granted"}
permissions ["comment:write" "document:read"]
holders [{"principalId":"carol","principalType":"user","roles":["editor"]},{"principalId":"root","principalType":"user","roles":["superuser"]}]`)

		dev.do(http.MethodPatch, "/roles/role_commenter", `{"permissions":["comment:write","document:write"]}`).decode(t, http.StatusOK, &envelope[roleJSON]{})
		check("after the commenter role gained document:write", `batch true {"grantedBy":[{"bindingId":"rb_alice_commenter","expiresAt":"2026-12-01T00:00:00Z","matched":"document:write","roleId":"role_commenter","roleSlug":"commenter"}]}
explain true {"grantedBy":[{"bindingId":"rb_alice_commenter","expiresAt":"2026-12-01T00:00:00Z","matched":"document:write","roleId":"role_commenter","roleSlug":"commenter"}]}
permissions ["comment:write" "document:write"]
holders [{"principalId":"alice","principalType":"user","roles":["commenter"]},{"principalId":"carol","principalType":"user","roles":["editor"]},{"principalId":"root","principalType":"user","roles":["superuser"]}]`)
	})
}
