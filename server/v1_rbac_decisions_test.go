package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The decision scenarios of issue 24 (batch, explain, effective permissions, who holds a
// permission) run over one hand-written fixture, written through the store with literal ids
// under a clock pinned at decisionNow, so that every expected answer below is written out
// literally, ids and times included:
//
//	role            id               permissions
//	editor          role_editor      document:read, document:write
//	commenter       role_commenter   comment:write, document:read
//	superuser       role_superuser   *, document:delete
//	auditor         role_auditor     audit:read
//	billing         role_billing     invoice:read
//	placeholder     role_placeholder (none)
//
//	binding              role        principal               expires
//	rb_alice_editor      editor      user alice              never
//	rb_alice_commenter   commenter   user alice              2026-12-01T00:00:00Z
//	rb_root_superuser    superuser   user root               never
//	rb_carol_auditor     auditor     user carol              2026-11-20T11:59:59Z (a second ago)
//	rb_carol_editor      editor      user carol              never
//	rb_dave_billing      billing     user dave               2026-11-20T11:59:59Z (a second ago)
//	rb_robot_auditor     auditor     service_account alice   never
//	rb_frank_placeholder placeholder user frank              never
//
// user erin has no binding. The tenancy's own fixtures add user fixture-user bound to the
// seeded member role (profile:read).

// decisionNow is the pinned time of the decision scenarios.
var decisionNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// newDecisionApp returns a test app whose store clock reads decisionNow, a tenancy, and the
// fixture above written into the tenancy's project.
func newDecisionApp(t *testing.T, b storetest.Backend) (*testApp, tenancy) {
	t.Helper()
	ctx := context.Background()
	app := newTestApp(t, openURL(t, b.URL(t), store.WithClock(storetest.NewClock(decisionNow).Now)), testConfig())
	ten := app.newTenancy(t)
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	roles := []store.ProjectRole{
		{ID: "role_editor", Slug: "editor", Permissions: []string{"document:read", "document:write"}},
		{ID: "role_commenter", Slug: "commenter", Permissions: []string{"comment:write", "document:read"}},
		{ID: "role_superuser", Slug: "superuser", Permissions: []string{"*", "document:delete"}},
		{ID: "role_auditor", Slug: "auditor", Permissions: []string{"audit:read"}},
		{ID: "role_billing", Slug: "billing", Permissions: []string{"invoice:read"}},
		{ID: "role_placeholder", Slug: "placeholder", Permissions: []string{}},
	}
	bindings := []store.RoleBinding{
		{ID: "rb_alice_editor", RoleID: "role_editor", PrincipalType: "user", PrincipalID: "alice"},
		{ID: "rb_alice_commenter", RoleID: "role_commenter", PrincipalType: "user", PrincipalID: "alice", ExpiresAt: at("2026-12-01T00:00:00Z")},
		{ID: "rb_root_superuser", RoleID: "role_superuser", PrincipalType: "user", PrincipalID: "root"},
		{ID: "rb_carol_auditor", RoleID: "role_auditor", PrincipalType: "user", PrincipalID: "carol", ExpiresAt: at("2026-11-20T11:59:59Z")},
		{ID: "rb_carol_editor", RoleID: "role_editor", PrincipalType: "user", PrincipalID: "carol"},
		{ID: "rb_dave_billing", RoleID: "role_billing", PrincipalType: "user", PrincipalID: "dave", ExpiresAt: at("2026-11-20T11:59:59Z")},
		{ID: "rb_robot_auditor", RoleID: "role_auditor", PrincipalType: "service_account", PrincipalID: "alice"},
		{ID: "rb_frank_placeholder", RoleID: "role_placeholder", PrincipalType: "user", PrincipalID: "frank"},
	}
	err := app.store.InTx(ctx, func(tx *store.Tx) error {
		for _, r := range roles {
			r.ProjectID, r.Name = ten.project.ID, "Role "+r.Slug
			if err := tx.CreateProjectRole(ctx, &r); err != nil {
				return err
			}
		}
		for _, b := range bindings {
			b.ProjectID = ten.project.ID
			if err := tx.CreateRoleBinding(ctx, &b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return app, ten
}

// decisionCase is one check of the fixture and its whole expected answer; explanation is the
// literal JSON of the answer's explanation.
type decisionCase struct {
	name                string
	typ, id, permission string
	allowed             bool
	roles               []string
	explanation         string
}

// decisionCases are the fixture's checks, answered by hand from the table above.
var decisionCases = []decisionCase{
	{"two roles, one grants", "user", "alice", "document:write", true, []string{"commenter", "editor"},
		`{"grantedBy":[{"bindingId":"rb_alice_editor","roleId":"role_editor","roleSlug":"editor","matched":"document:write","expiresAt":null}]}`},
	{"two roles, both grant", "user", "alice", "document:read", true, []string{"commenter", "editor"},
		`{"grantedBy":[
			{"bindingId":"rb_alice_commenter","roleId":"role_commenter","roleSlug":"commenter","matched":"document:read","expiresAt":"2026-12-01T00:00:00Z"},
			{"bindingId":"rb_alice_editor","roleId":"role_editor","roleSlug":"editor","matched":"document:read","expiresAt":null}]}`},
	{"two roles, neither grants", "user", "alice", "invoice:read", false, []string{"commenter", "editor"},
		`{"reason":"permission_not_granted","considered":[
			{"bindingId":"rb_alice_commenter","roleSlug":"commenter","expiresAt":"2026-12-01T00:00:00Z","expired":false},
			{"bindingId":"rb_alice_editor","roleSlug":"editor","expiresAt":null,"expired":false}]}`},
	{"a * role", "user", "root", "report:export", true, []string{"superuser"},
		`{"grantedBy":[{"bindingId":"rb_root_superuser","roleId":"role_superuser","roleSlug":"superuser","matched":"*","expiresAt":null}]}`},
	{"a * role that also holds the exact string", "user", "root", "document:delete", true, []string{"superuser"},
		`{"grantedBy":[{"bindingId":"rb_root_superuser","roleId":"role_superuser","roleSlug":"superuser","matched":"document:delete","expiresAt":null}]}`},
	{"held only through a binding that expired a second ago", "user", "carol", "audit:read", false, []string{"editor"},
		`{"reason":"bindings_expired","considered":[
			{"bindingId":"rb_carol_auditor","roleSlug":"auditor","expiresAt":"2026-11-20T11:59:59Z","expired":true},
			{"bindingId":"rb_carol_editor","roleSlug":"editor","expiresAt":null,"expired":false}]}`},
	{"an expired binding beside a granting one", "user", "carol", "document:write", true, []string{"editor"},
		`{"grantedBy":[{"bindingId":"rb_carol_editor","roleId":"role_editor","roleSlug":"editor","matched":"document:write","expiresAt":null}]}`},
	{"only an expired binding, which would have granted", "user", "dave", "invoice:read", false, []string{},
		`{"reason":"bindings_expired","considered":[
			{"bindingId":"rb_dave_billing","roleSlug":"billing","expiresAt":"2026-11-20T11:59:59Z","expired":true}]}`},
	{"only an expired binding, which would not have granted", "user", "dave", "document:read", false, []string{},
		`{"reason":"permission_not_granted","considered":[
			{"bindingId":"rb_dave_billing","roleSlug":"billing","expiresAt":"2026-11-20T11:59:59Z","expired":true}]}`},
	{"no bindings", "user", "erin", "document:read", false, []string{},
		`{"reason":"no_bindings","considered":[]}`},
	{"the principal type is part of the principal", "service_account", "alice", "document:read", false, []string{"auditor"},
		`{"reason":"permission_not_granted","considered":[
			{"bindingId":"rb_robot_auditor","roleSlug":"auditor","expiresAt":null,"expired":false}]}`},
}

// decisionAnswer is one decision as answered, its explanation kept as raw JSON (nil when the
// member is absent).
type decisionAnswer struct {
	Allowed     bool            `json:"allowed"`
	Roles       []string        `json:"roles"`
	DecisionID  string          `json:"decisionId"`
	Explanation json.RawMessage `json:"explanation"`
}

// check compares an answer with the case: allowed, roles, a well-formed decision id, and the
// explanation (as JSON values) when explained, its absence otherwise.
func (c decisionCase) check(t *testing.T, got decisionAnswer, explained bool) {
	t.Helper()
	if got.Allowed != c.allowed || !reflect.DeepEqual(got.Roles, c.roles) {
		t.Errorf("%s: allowed %v roles %q; want %v %q", c.name, got.Allowed, got.Roles, c.allowed, c.roles)
	}
	if !decisionIDFormat.MatchString(got.DecisionID) {
		t.Errorf("%s: decisionId %q", c.name, got.DecisionID)
	}
	switch {
	case !explained && got.Explanation != nil:
		t.Errorf("%s: unasked explanation %s", c.name, got.Explanation)
	case explained:
		wantJSONEqual(t, c.name+": explanation", got.Explanation, c.explanation)
	}
}

// wantJSONEqual fails unless got and the literal want are the same JSON value.
func wantJSONEqual(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the expected JSON is broken: %v", what, err)
	}
	if err := json.Unmarshal(got, &g); err != nil || !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func (c decisionCase) checkJSON() string {
	return fmt.Sprintf(`{"principalType":%q,"principalId":%q,"permission":%q}`, c.typ, c.id, c.permission)
}

// TestAuthorizeExplain: explain adds exactly the fixture's explanation to each decision; without
// it (absent or false) the answer is the three members it always was, byte for byte.
func TestAuthorizeExplain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newDecisionApp(t, b)
		viewer := ten.members[RoleViewer]
		for _, c := range decisionCases {
			t.Run(c.name, func(t *testing.T) {
				body := func(explain string) string {
					return fmt.Sprintf(`{"projectId":%q,"principalType":%q,"principalId":%q,"permission":%q%s}`,
						ten.project.ID, c.typ, c.id, c.permission, explain)
				}
				var out envelope[decisionAnswer]
				app.do(viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: body(`,"explain":true`)})).
					decode(t, http.StatusOK, &out)
				c.check(t, out.Data, true)
				if !strings.Contains(app.logs.String(), "decision_id="+out.Data.DecisionID) {
					t.Errorf("access log lacks decision_id=%s", out.Data.DecisionID)
				}
				// With an API key too (on PostgreSQL the key is then read without the decision).
				out = envelope[decisionAnswer]{}
				app.do(withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize", body: body(`,"explain":true`)})).
					decode(t, http.StatusOK, &out)
				c.check(t, out.Data, true)

				for _, explain := range []string{"", `,"explain":false`} {
					for _, r := range []request{viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize", body: body(explain)}),
						withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize", body: body(explain)})} {
						res := app.do(r)
						out = envelope[decisionAnswer]{}
						res.decode(t, http.StatusOK, &out)
						roles, _ := json.Marshal(c.roles)
						want := fmt.Sprintf(`{"data":{"allowed":%v,"decisionId":%q,"roles":%s}}`+"\n", c.allowed, out.Data.DecisionID, roles)
						if got := res.Body.String(); got != want {
							t.Errorf("explain %q: body\n%q, want\n%q", explain, got, want)
						}
					}
				}
			})
		}
	})
}

// TestAuthorizeBatch: a batch answers each check as /authorize does, in order, explained when
// asked; 100 checks are one batch, 101 are refused, and one bad check refuses the whole batch
// with its index in the error path. Nothing is audited.
func TestAuthorizeBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newDecisionApp(t, b)
		other := app.newTenancy(t)
		viewer := ten.members[RoleViewer]
		owner := rbacCaller{t, app, ten.members[RoleOwner], ten.project.ID}
		auditBefore := owner.auditActions()
		batchBody := func(projectID string, checks []string, explain string) string {
			return fmt.Sprintf(`{"projectId":%q,"checks":[%s]%s}`, projectID, strings.Join(checks, ","), explain)
		}
		batch := func(t *testing.T, r request, want []decisionCase, explained bool) {
			t.Helper()
			var out envelope[struct {
				Results []decisionAnswer `json:"results"`
			}]
			app.do(r).decode(t, http.StatusOK, &out)
			if len(out.Data.Results) != len(want) {
				t.Fatalf("%d results, want %d", len(out.Data.Results), len(want))
			}
			seen := map[string]bool{}
			for i, c := range want {
				c.name = fmt.Sprintf("result %d (%s)", i, c.name)
				c.check(t, out.Data.Results[i], explained)
				if seen[out.Data.Results[i].DecisionID] {
					t.Errorf("%s: decisionId %s repeated", c.name, out.Data.Results[i].DecisionID)
				}
				seen[out.Data.Results[i].DecisionID] = true
			}
		}
		var checks []string
		for _, c := range decisionCases {
			checks = append(checks, c.checkJSON())
		}

		t.Run("every case, explained", func(t *testing.T) {
			batch(t, viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch",
				body: batchBody(ten.project.ID, checks, `,"explain":true`)}), decisionCases, true)
		})
		t.Run("every case, not explained", func(t *testing.T) {
			batch(t, viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch",
				body: batchBody(ten.project.ID, checks, "")}), decisionCases, false)
			batch(t, viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch",
				body: batchBody(ten.project.ID, checks, `,"explain":false`)}), decisionCases, false)
		})
		// 100 checks: the cases over and over, in order.
		var hundred []string
		var hundredWant []decisionCase
		for i := range 100 {
			hundred = append(hundred, checks[i%len(checks)])
			hundredWant = append(hundredWant, decisionCases[i%len(decisionCases)])
		}
		t.Run("100 checks", func(t *testing.T) {
			batch(t, viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch",
				body: batchBody(ten.project.ID, hundred, `,"explain":true`)}), hundredWant, true)
		})
		t.Run("100 checks with an API key", func(t *testing.T) {
			batch(t, withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize/batch",
				body: batchBody(ten.project.ID, hundred, "")}), hundredWant, false)
		})

		refused := func(t *testing.T, body string, want ...FieldError) {
			t.Helper()
			p := app.do(viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch", body: body})).
				wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
			if !reflect.DeepEqual(p.Errors, want) {
				t.Errorf("errors %+v, want %+v", p.Errors, want)
			}
		}
		t.Run("101 checks are refused", func(t *testing.T) {
			refused(t, batchBody(ten.project.ID, append(hundred, checks[0]), ""),
				FieldError{Path: []string{"body", "checks"}, Message: "must have at most 100 items"})
		})
		t.Run("no checks are refused", func(t *testing.T) {
			refused(t, batchBody(ten.project.ID, nil, ""),
				FieldError{Path: []string{"body", "checks"}, Message: "must have at least 1 item"})
		})
		t.Run("a bad permission at index 37 refuses the batch", func(t *testing.T) {
			bad := append([]string{}, hundred...)
			bad[37] = `{"principalType":"user","principalId":"alice","permission":"Document:Write"}`
			refused(t, batchBody(ten.project.ID, bad, `,"explain":true`), FieldError{Path: []string{"body", "checks", "37", "permission"},
				Message: `must match the pattern ^(\*|[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*)$`})
		})
		t.Run("several bad checks are each named", func(t *testing.T) {
			bad := append([]string{}, checks...)
			bad[2] = `{"principalType":"group","principalId":"alice","permission":"a:b"}`
			bad[5] = `{"principalType":"user","principalId":"","permission":"a:b","cache":true}`
			refused(t, batchBody(ten.project.ID, bad, ""),
				FieldError{Path: []string{"body", "checks", "2", "principalType"}, Message: "must be one of user, service_account"},
				FieldError{Path: []string{"body", "checks", "5", "cache"}, Message: "is not allowed"},
				FieldError{Path: []string{"body", "checks", "5", "principalId"}, Message: "must be at least 1 character long"})
		})

		for name, r := range map[string]request{
			"unknown project":      viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch", body: batchBody("prj_missing", checks, "")}),
			"another organization": viewer.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch", body: batchBody(other.project.ID, checks, "")}),
			"stranger":             ten.stranger.as(request{method: http.MethodPost, path: "/api/v1/authorize/batch", body: batchBody(ten.project.ID, checks, "")}),
		} {
			t.Run(name, func(t *testing.T) { app.do(r).wantProblem(t, http.StatusNotFound, "http-404", "Not found") })
		}
		app.do(withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize/batch", body: batchBody(other.project.ID, checks, "")})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		if got := owner.auditActions(); !reflect.DeepEqual(got, auditBefore) {
			t.Errorf("batch decisions wrote audit rows: %v, before %v", got, auditBefore)
		}
	})
}
