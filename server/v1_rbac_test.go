package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

type roleJSON struct {
	ID          string   `json:"id"`
	ProjectID   string   `json:"projectId"`
	Name        string   `json:"name"`
	Slug        string   `json:"slug"`
	Description string   `json:"description"`
	Permissions []string `json:"permissions"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

type bindingJSON struct {
	ID            string  `json:"id"`
	ProjectID     string  `json:"projectId"`
	RoleID        string  `json:"roleId"`
	RoleSlug      string  `json:"roleSlug"`
	PrincipalType string  `json:"principalType"`
	PrincipalID   string  `json:"principalId"`
	ExpiresAt     *string `json:"expiresAt"`
	CreatedAt     string  `json:"createdAt"`
}

type decisionJSON struct {
	Allowed    bool     `json:"allowed"`
	Roles      []string `json:"roles"`
	DecisionID string   `json:"decisionId"`
}

// rbacCaller issues the RBAC calls of one user against one project.
type rbacCaller struct {
	t       *testing.T
	app     *testApp
	user    testUser
	project string
}

func (c rbacCaller) do(method, path, body string) response {
	c.t.Helper()
	return c.app.do(c.user.as(request{method: method, path: "/api/v1/projects/" + c.project + path, body: body}))
}

func (c rbacCaller) createRole(body string) roleJSON {
	c.t.Helper()
	var out envelope[roleJSON]
	c.do(http.MethodPost, "/roles", body).decode(c.t, http.StatusCreated, &out)
	return out.Data
}

func (c rbacCaller) bind(roleID, principalType, principalID string) bindingJSON {
	c.t.Helper()
	var out envelope[bindingJSON]
	c.do(http.MethodPost, "/role-bindings", fmt.Sprintf(`{"roleId":%q,"principalType":%q,"principalId":%q}`,
		roleID, principalType, principalID)).decode(c.t, http.StatusCreated, &out)
	return out.Data
}

func authorizeBody(projectID, principalType, principalID, permission string) string {
	b, _ := json.Marshal(map[string]string{"projectId": projectID, "principalType": principalType,
		"principalId": principalID, "permission": permission})
	return string(b)
}

func (c rbacCaller) authorize(principalType, principalID, permission string) decisionJSON {
	c.t.Helper()
	var out envelope[decisionJSON]
	c.app.do(c.user.as(request{method: http.MethodPost, path: "/api/v1/authorize",
		body: authorizeBody(c.project, principalType, principalID, permission)})).decode(c.t, http.StatusOK, &out)
	return out.Data
}

func (c rbacCaller) auditActions() []string {
	c.t.Helper()
	var logs envelope[[]auditBody]
	c.do(http.MethodGet, "/audit-logs", "").decode(c.t, http.StatusOK, &logs)
	var out []string
	for i := len(logs.Data) - 1; i >= 0; i-- { // oldest first
		out = append(out, logs.Data[i].Action)
	}
	return out
}

var decisionIDFormat = regexp.MustCompile(`^dec_[0-9a-hjkmnp-tv-z]{26}$`)

func TestProjectRoles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		other := app.newTenancy(t)
		dev := rbacCaller{t, app, ten.members[RoleDeveloper], ten.project.ID}

		// The seeded roles are listed first (the fixture's role follows), to any reader.
		var list envelope[[]roleJSON]
		rbacCaller{t, app, ten.members[RoleViewer], ten.project.ID}.do(http.MethodGet, "/roles", "").decode(t, http.StatusOK, &list)
		var seeded []string
		for _, r := range list.Data {
			seeded = append(seeded, r.Slug+"="+strings.Join(r.Permissions, ","))
		}
		if want := []string{"project-admin=*", "member=profile:read", "fixture-editor=document:write"}; !reflect.DeepEqual(seeded, want) {
			t.Fatalf("roles %v, want %v", seeded, want)
		}
		rolesBefore := len(list.Data)

		// Create: the slug defaults to the slugified name; description defaults to "".
		editor := dev.createRole(`{"name":"Document Éditor","permissions":["document:read","document:write"]}`)
		if editor.Slug != "document-editor" || editor.Description != "" || editor.ProjectID != ten.project.ID ||
			!reflect.DeepEqual(editor.Permissions, []string{"document:read", "document:write"}) || !strings.HasPrefix(editor.ID, "role_") {
			t.Fatalf("created %+v", editor)
		}
		empty := dev.createRole(`{"name":"Nothing","slug":"nothing","description":"No permissions","permissions":[]}`)
		if empty.Permissions == nil || len(empty.Permissions) != 0 || empty.Description != "No permissions" {
			t.Fatalf("created %+v", empty)
		}
		hundred := make([]string, 100)
		for i := range hundred {
			hundred[i] = fmt.Sprintf("resource%d:read", i)
		}
		body, _ := json.Marshal(map[string]any{"name": "Big", "permissions": hundred})
		if big := dev.createRole(string(body)); len(big.Permissions) != 100 {
			t.Fatalf("100 permissions: %d stored", len(big.Permissions))
		}
		// Another project may reuse a slug.
		rbacCaller{t, app, other.members[RoleOwner], other.project.ID}.createRole(`{"name":"Document editor","permissions":["*"]}`)

		tooMany, _ := json.Marshal(map[string]any{"name": "Too many", "permissions": append(hundred, "one:more")})
		for _, tc := range []struct {
			name, body string
			paths      []string
		}{
			{"101 permissions", string(tooMany), []string{"body.permissions"}},
			{"duplicate permissions", `{"name":"Dup","permissions":["a:read","a:read"]}`, []string{"body.permissions"}},
			{"bad grammar", `{"name":"","slug":"Bad Slug","permissions":["Document:Read","ok:read","*x","a:b:c"],"extra":1}`,
				[]string{"body.name", "body.slug", "body.permissions.0", "body.permissions.2", "body.permissions.3", "body.extra"}},
			{"no permissions member", `{"name":"Missing"}`, []string{"body.permissions"}},
			{"no usable slug", `{"name":"!!!","permissions":[]}`, []string{"body.slug"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := dev.do(http.MethodPost, "/roles", tc.body).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				wantPaths(t, p.Errors, tc.paths...)
			})
		}
		dev.do(http.MethodPost, "/roles", `{"name":"Document editor","permissions":[]}`).
			wantProblem(t, http.StatusConflict, "conflict", "Project role slug already taken")
		dev.do(http.MethodPost, "/roles", `{"name":"Admin again","slug":"project-admin","permissions":[]}`).
			wantProblem(t, http.StatusConflict, "conflict", "Project role slug already taken")
		rbacCaller{t, app, ten.members[RoleBilling], ten.project.ID}.do(http.MethodPost, "/roles", `{"name":"X","permissions":[]}`).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		rbacCaller{t, app, ten.stranger, ten.project.ID}.do(http.MethodGet, "/roles", "").
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")

		// PATCH changes what it names and nothing else.
		var patched envelope[roleJSON]
		dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"name":"Writer","permissions":["document:write"]}`).decode(t, http.StatusOK, &patched)
		if patched.Data.Name != "Writer" || patched.Data.Slug != editor.Slug || patched.Data.CreatedAt != editor.CreatedAt ||
			!reflect.DeepEqual(patched.Data.Permissions, []string{"document:write"}) || patched.Data.UpdatedAt < editor.UpdatedAt {
			t.Fatalf("patched %+v", patched.Data)
		}
		dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"slug":"writer","description":"Writes"}`).decode(t, http.StatusOK, &patched)
		if patched.Data.Slug != "writer" || patched.Data.Description != "Writes" || patched.Data.Name != "Writer" {
			t.Fatalf("patched %+v", patched.Data)
		}
		dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"slug":"member"}`).
			wantProblem(t, http.StatusConflict, "conflict", "Project role slug already taken")
		p := dev.do(http.MethodPatch, "/roles/"+editor.ID, `{}`).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body")
		p = dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"permissions":["x:y","x:y"],"name":null}`).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.permissions", "body.name")
		dev.do(http.MethodPatch, "/roles/role_missing", `{"name":"X"}`).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		// A role of another project is not found through this one.
		var otherRoles envelope[[]roleJSON]
		rbacCaller{t, app, other.members[RoleOwner], other.project.ID}.do(http.MethodGet, "/roles", "").decode(t, http.StatusOK, &otherRoles)
		dev.do(http.MethodPatch, "/roles/"+otherRoles.Data[0].ID, `{"name":"Stolen"}`).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		dev.do(http.MethodDelete, "/roles/"+otherRoles.Data[0].ID, "").wantProblem(t, http.StatusNotFound, "http-404", "Not found")

		// DELETE returns the role; it is gone from the list.
		var deleted envelope[roleJSON]
		dev.do(http.MethodDelete, "/roles/"+empty.ID, "").decode(t, http.StatusOK, &deleted)
		if deleted.Data.ID != empty.ID || deleted.Data.Slug != "nothing" {
			t.Fatalf("deleted %+v", deleted.Data)
		}
		dev.do(http.MethodDelete, "/roles/"+empty.ID, "").wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		dev.do(http.MethodGet, "/roles", "").decode(t, http.StatusOK, &list)
		if len(list.Data) != rolesBefore+2 { // editor and big are left
			t.Fatalf("%d roles after delete, want %d", len(list.Data), rolesBefore+2)
		}
		p = dev.do(http.MethodDelete, "/roles/"+editor.ID+"?force=maybe", "").wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "query.force")
	})
}

func TestRoleBindings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		other := app.newTenancy(t)
		dev := rbacCaller{t, app, ten.members[RoleDeveloper], ten.project.ID}
		editor := dev.createRole(`{"name":"Editor","permissions":["document:write"]}`)
		foreign := rbacCaller{t, app, other.members[RoleOwner], other.project.ID}.createRole(`{"name":"Foreign","permissions":["*"]}`)

		b1 := dev.bind(editor.ID, "user", "user-42")
		if !strings.HasPrefix(b1.ID, "rb_") || b1.RoleSlug != "editor" || b1.ProjectID != ten.project.ID ||
			b1.PrincipalType != "user" || b1.PrincipalID != "user-42" || b1.ExpiresAt != nil {
			t.Fatalf("created %+v", b1)
		}
		expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		var b2 envelope[bindingJSON]
		dev.do(http.MethodPost, "/role-bindings", fmt.Sprintf(`{"roleId":%q,"principalType":"service_account","principalId":"user-42","expiresAt":%q}`,
			editor.ID, expires.Format(time.RFC3339Nano))).decode(t, http.StatusCreated, &b2)
		if b2.Data.ExpiresAt == nil {
			t.Fatalf("created %+v", b2.Data)
		}
		if got, err := time.Parse(time.RFC3339Nano, *b2.Data.ExpiresAt); err != nil || !got.Equal(expires) {
			t.Fatalf("expiresAt %s, want %s", *b2.Data.ExpiresAt, expires)
		}
		var seeded envelope[[]roleJSON]
		dev.do(http.MethodGet, "/roles", "").decode(t, http.StatusOK, &seeded)
		b3 := dev.bind(seeded.Data[1].ID, "user", "user-42")

		dev.do(http.MethodPost, "/role-bindings", fmt.Sprintf(`{"roleId":%q,"principalType":"user","principalId":"user-42"}`, editor.ID)).
			wantProblem(t, http.StatusConflict, "conflict", "Role binding already exists")
		for name, roleID := range map[string]string{"another project's role": foreign.ID, "unknown role": "role_missing"} {
			t.Run(name, func(t *testing.T) {
				dev.do(http.MethodPost, "/role-bindings", fmt.Sprintf(`{"roleId":%q,"principalType":"user","principalId":"u"}`, roleID)).
					wantProblem(t, http.StatusNotFound, "http-404", "Not found")
			})
		}
		for _, tc := range []struct {
			name, body string
			paths      []string
		}{
			{"expiry in the past", fmt.Sprintf(`{"roleId":%q,"principalType":"user","principalId":"u","expiresAt":%q}`,
				editor.ID, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)), []string{"body.expiresAt"}},
			{"expiry not a date", fmt.Sprintf(`{"roleId":%q,"principalType":"user","principalId":"u","expiresAt":"tomorrow"}`, editor.ID),
				[]string{"body.expiresAt"}},
			{"bad principal", `{"roleId":"","principalType":"group","principalId":"","other":true}`,
				[]string{"body.roleId", "body.principalType", "body.principalId", "body.other"}},
			{"missing members", `{}`, []string{"body.roleId", "body.principalType", "body.principalId"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := dev.do(http.MethodPost, "/role-bindings", tc.body).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				wantPaths(t, p.Errors, tc.paths...)
			})
		}

		// Lists: oldest first (the fixture's binding of "member" to fixture-user comes first),
		// filtered, paginated.
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"", []string{ten.bindingID, b1.ID, b2.Data.ID, b3.ID}},
			{"?principalType=user", []string{ten.bindingID, b1.ID, b3.ID}},
			{"?principalId=user-42", []string{b1.ID, b2.Data.ID, b3.ID}},
			{"?principalId=user-42&principalType=service_account", []string{b2.Data.ID}},
			{"?roleId=" + editor.ID, []string{b1.ID, b2.Data.ID}},
			{"?roleId=" + seeded.Data[1].ID + "&principalType=user", []string{ten.bindingID, b3.ID}},
			{"?roleId=" + foreign.ID, []string{}},
			{"?limit=2&offset=1", []string{b1.ID, b2.Data.ID}},
			{"?offset=5", []string{}},
		} {
			var list envelope[[]bindingJSON]
			rbacCaller{t, app, ten.members[RoleViewer], ten.project.ID}.do(http.MethodGet, "/role-bindings"+tc.query, "").decode(t, http.StatusOK, &list)
			got := []string{}
			for _, x := range list.Data {
				got = append(got, x.ID)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("list %q: %v, want %v", tc.query, got, tc.want)
			}
		}
		p := dev.do(http.MethodGet, "/role-bindings?limit=0&offset=-1&principalType=group", "").
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "query.limit", "query.offset", "query.principalType")
		dev.do(http.MethodGet, "/role-bindings?limit=201", "").wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")

		// Delete: only through its own project, once.
		rbacCaller{t, app, other.members[RoleOwner], other.project.ID}.do(http.MethodDelete, "/role-bindings/"+b1.ID, "").
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		rbacCaller{t, app, ten.members[RoleViewer], ten.project.ID}.do(http.MethodDelete, "/role-bindings/"+b1.ID, "").
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		var deleted envelope[bindingJSON]
		dev.do(http.MethodDelete, "/role-bindings/"+b1.ID, "").decode(t, http.StatusOK, &deleted)
		if deleted.Data != b1 {
			t.Fatalf("deleted %+v, want %+v", deleted.Data, b1)
		}
		dev.do(http.MethodDelete, "/role-bindings/"+b1.ID, "").wantProblem(t, http.StatusNotFound, "http-404", "Not found")
	})
}

func TestAuthorize(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		other := app.newTenancy(t)
		owner := rbacCaller{t, app, ten.members[RoleOwner], ten.project.ID}
		editor := owner.createRole(`{"name":"Editor","permissions":["document:read","document:write"]}`)
		billing := owner.createRole(`{"name":"Billing","permissions":["invoice:read"]}`)
		expired := owner.createRole(`{"name":"Expired","permissions":["document:delete"]}`)
		var roles envelope[[]roleJSON]
		owner.do(http.MethodGet, "/roles", "").decode(t, http.StatusOK, &roles)
		admin := roles.Data[0]
		owner.bind(editor.ID, "user", "alice")
		owner.bind(billing.ID, "user", "alice")
		owner.bind(admin.ID, "user", "root")
		owner.bind(billing.ID, "service_account", "alice")
		// The API refuses a past expiry; the store takes one, as time passing would make it.
		ctx := context.Background()
		past := time.Now().Add(-time.Minute)
		if err := app.store.InTx(ctx, func(tx *store.Tx) error {
			return tx.CreateRoleBinding(ctx, &store.RoleBinding{ProjectID: ten.project.ID, RoleID: expired.ID,
				PrincipalType: store.PrincipalUser, PrincipalID: "alice", ExpiresAt: &past})
		}); err != nil {
			t.Fatal(err)
		}
		// Another project's bindings never leak in.
		otherOwner := rbacCaller{t, app, other.members[RoleOwner], other.project.ID}
		otherOwner.bind(otherOwner.createRole(`{"name":"Everything","permissions":["*"]}`).ID, "user", "alice")

		auditBefore := owner.auditActions()
		viewer := rbacCaller{t, app, ten.members[RoleViewer], ten.project.ID}
		seen := map[string]bool{}
		for _, tc := range []struct {
			name                string
			typ, id, permission string
			wantAllowed         bool
			wantRoles           []string
		}{
			{"exact permission", "user", "alice", "document:write", true, []string{"billing", "editor"}},
			{"union across roles", "user", "alice", "invoice:read", true, []string{"billing", "editor"}},
			{"other permission", "user", "alice", "document:admin", false, []string{"billing", "editor"}},
			{"expired binding ignored", "user", "alice", "document:delete", false, []string{"billing", "editor"}},
			{"wildcard role", "user", "root", "anything:goes", true, []string{"project-admin"}},
			{"principal type is part of the principal", "service_account", "alice", "document:write", false, []string{"billing"}},
			{"unknown principal", "user", "bob", "document:read", false, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := viewer.authorize(tc.typ, tc.id, tc.permission)
				if d.Allowed != tc.wantAllowed || !reflect.DeepEqual(d.Roles, tc.wantRoles) {
					t.Errorf("allowed %v roles %v; want %v %v", d.Allowed, d.Roles, tc.wantAllowed, tc.wantRoles)
				}
				if !decisionIDFormat.MatchString(d.DecisionID) || seen[d.DecisionID] {
					t.Errorf("decisionId %q: malformed or repeated", d.DecisionID)
				}
				seen[d.DecisionID] = true
				if !strings.Contains(app.logs.String(), "decision_id="+d.DecisionID) {
					t.Errorf("access log lacks decision_id=%s", d.DecisionID)
				}
			})
		}
		// The roles array is present even when empty.
		res := app.do(viewer.user.as(request{method: http.MethodPost, path: "/api/v1/authorize",
			body: authorizeBody(ten.project.ID, "user", "nobody", "a:b")}))
		if !strings.Contains(res.Body.String(), `"roles":[]`) {
			t.Errorf("empty decision body %s", res.Body)
		}
		if got := owner.auditActions(); !reflect.DeepEqual(got, auditBefore) {
			t.Errorf("decisions wrote audit rows: %v, before %v", got, auditBefore)
		}

		// Validation, then the project named in the body: unknown or not the caller's is 404.
		for _, tc := range []struct {
			name, body string
			paths      []string
		}{
			{"bad grammar", authorizeBody(ten.project.ID, "group", "", "Document:Write"),
				[]string{"body.principalType", "body.principalId", "body.permission"}},
			{"missing members", `{"projectId":"` + ten.project.ID + `"}`, []string{"body.principalType", "body.principalId", "body.permission"}},
			{"unknown member", `{"projectId":"` + ten.project.ID + `","principalType":"user","principalId":"a","permission":"a:b","cache":true}`,
				[]string{"body.cache"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := app.do(viewer.user.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: tc.body})).
					wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				wantPaths(t, p.Errors, tc.paths...)
			})
		}
		for name, r := range map[string]request{
			"unknown project":      viewer.user.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: authorizeBody("prj_missing", "user", "alice", "a:b")}),
			"another organization": viewer.user.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: authorizeBody(other.project.ID, "user", "alice", "a:b")}),
			"stranger":             ten.stranger.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: authorizeBody(ten.project.ID, "user", "alice", "a:b")}),
		} {
			t.Run(name, func(t *testing.T) { app.do(r).wantProblem(t, http.StatusNotFound, "http-404", "Not found") })
		}
		app.do(request{method: http.MethodPost, path: "/api/v1/authorize", body: authorizeBody(ten.project.ID, "user", "alice", "a:b")}).
			wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")

		// A service account decides in its own project with project:read, nowhere else.
		reader := ten.readerKey // scope project:read
		_, _, writer := app.createKey(t, ten, `{"name":"writer","scopes":["usage:write"]}`)
		var d envelope[decisionJSON]
		app.do(withKey(reader, request{method: http.MethodPost, path: "/api/v1/authorize",
			body: authorizeBody(ten.project.ID, "user", "alice", "document:read")})).decode(t, http.StatusOK, &d)
		if !d.Data.Allowed {
			t.Errorf("service account decision %+v", d.Data)
		}
		app.do(withKey(reader, request{method: http.MethodPost, path: "/api/v1/authorize",
			body: authorizeBody(other.project.ID, "user", "alice", "document:read")})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		app.do(withKey(writer, request{method: http.MethodPost, path: "/api/v1/authorize",
			body: authorizeBody(ten.project.ID, "user", "alice", "document:read")})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
	})
}

// TestRBACChangesApplyAtOnce: every change shows in the very next decision, and every role or
// binding mutation writes exactly one audit row (failed ones none).
func TestRBACChangesApplyAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		dev := rbacCaller{t, app, ten.members[RoleDeveloper], ten.project.ID}
		auditBefore := len(dev.auditActions())
		check := func(step, permission string, want bool, wantRoles ...string) {
			t.Helper()
			d := dev.authorize("user", "alice", permission)
			if wantRoles == nil {
				wantRoles = []string{}
			}
			if d.Allowed != want || !reflect.DeepEqual(d.Roles, wantRoles) {
				t.Errorf("%s: %s → allowed %v roles %v; want %v %v", step, permission, d.Allowed, d.Roles, want, wantRoles)
			}
		}

		editor := dev.createRole(`{"name":"Editor","permissions":["document:read"]}`)
		bound := dev.bind(editor.ID, "user", "alice")
		check("bound", "document:read", true, "editor")
		check("bound", "document:write", false, "editor")

		dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"permissions":["document:write"]}`).decode(t, http.StatusOK, &envelope[roleJSON]{})
		check("role patched", "document:read", false, "editor")
		check("role patched", "document:write", true, "editor")
		dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"slug":"author"}`).decode(t, http.StatusOK, &envelope[roleJSON]{})
		check("role renamed", "document:write", true, "author")

		dev.do(http.MethodDelete, "/role-bindings/"+bound.ID, "").decode(t, http.StatusOK, &envelope[bindingJSON]{})
		check("binding deleted", "document:write", false)

		dev.bind(editor.ID, "user", "alice")
		dev.bind(editor.ID, "service_account", "robot")
		check("bound again", "document:write", true, "author")
		dev.do(http.MethodDelete, "/roles/"+editor.ID, "").
			wantProblem(t, http.StatusConflict, "conflict", "Project role is bound; delete its bindings or pass force=true")
		dev.do(http.MethodDelete, "/roles/"+editor.ID+"?force=false", "").
			wantProblem(t, http.StatusConflict, "conflict", "Project role is bound; delete its bindings or pass force=true")
		check("delete refused", "document:write", true, "author")
		var deleted envelope[roleJSON]
		dev.do(http.MethodDelete, "/roles/"+editor.ID+"?force=true", "").decode(t, http.StatusOK, &deleted)
		if deleted.Data.ID != editor.ID {
			t.Fatalf("force-deleted %+v", deleted.Data)
		}
		check("role force-deleted", "document:write", false)
		var list envelope[[]bindingJSON]
		dev.do(http.MethodGet, "/role-bindings?roleId="+editor.ID, "").decode(t, http.StatusOK, &list)
		if len(list.Data) != 0 {
			t.Fatalf("bindings left after a forced delete: %+v", list.Data)
		}

		want := []string{
			"project_role.create", "role_binding.create",
			"project_role.update", "project_role.update",
			"role_binding.delete",
			"role_binding.create", "role_binding.create",
			"project_role.delete",
		}
		got := dev.auditActions()[auditBefore:]
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("audit actions %v, want %v", got, want)
		}
		var logs envelope[[]auditBody]
		dev.do(http.MethodGet, "/audit-logs", "").decode(t, http.StatusOK, &logs)
		last := logs.Data[0]
		if last.Target.Type != "project_role" || last.Target.ID != editor.ID || last.Actor.ID != dev.user.ID ||
			last.ProjectID == nil || *last.ProjectID != ten.project.ID || last.OrganizationID == nil || *last.OrganizationID != ten.org.ID {
			t.Fatalf("audit row %+v", last)
		}
	})
}
