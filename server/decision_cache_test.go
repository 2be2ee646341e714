package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestKeptDecisionsFollowChanges: an /authorize decision made with an API key is answered on the
// very next request after any change to what it read — through the API, by a statement written
// outside the store's code, or by the clock passing a binding's or the key's expiry — on both
// databases, where decisions are kept between requests (decision_cache.go). It also checks that
// an unchanged decision is served from what was kept, and that a touch of the key's last use
// does not end it.
func TestKeptDecisionsFollowChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		// Each step asks the single question and the batch; in one order the batch finds what
		// the single request kept, in the other the single request finds the batch's.
		for _, batchFirst := range []bool{false, true} {
			t.Run(map[bool]string{false: "single first", true: "batch first"}[batchFirst], func(t *testing.T) {
				f := newKeptFixture(t, b)
				ctx, start, clock, st, app, ten, dev, at, exec := f.ctx, f.start, f.clock, f.st, f.app, f.ten, f.dev, f.at, f.exec
				editor := dev.createRole(`{"name":"Editor","permissions":["document:read"]}`)
				binding := dev.bind(editor.ID, "user", "alice")
				askAbout := func(permission string) string {
					res := app.do(withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize",
						body: authorizeBody(ten.project.ID, store.PrincipalUser, "alice", permission)}))
					if res.Code != http.StatusOK {
						var p struct{ Title string }
						_ = json.Unmarshal(res.Body.Bytes(), &p)
						return fmt.Sprintf("%d %s", res.Code, p.Title)
					}
					var out envelope[decisionAnswer]
					res.decode(t, http.StatusOK, &out)
					return fmt.Sprintf("allowed %v roles %q", out.Data.Allowed, out.Data.Roles)
				}
				ask := func() string { return askAbout("document:read") }
				// The same question in a batch without explain, which answers from the same kept
				// answers (keptChecks), beside another check.
				askBatch := func() string {
					res := app.do(withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize/batch",
						body: fmt.Sprintf(`{"projectId":%q,"checks":[{"principalType":"user","principalId":"bob","permission":"document:read"},`+
							`{"principalType":"user","principalId":"alice","permission":"document:read"}]}`, ten.project.ID)}))
					if res.Code != http.StatusOK {
						var p struct{ Title string }
						_ = json.Unmarshal(res.Body.Bytes(), &p)
						return fmt.Sprintf("%d %s", res.Code, p.Title)
					}
					var out envelope[struct{ Results []decisionAnswer }]
					res.decode(t, http.StatusOK, &out)
					if len(out.Data.Results) != 2 {
						t.Fatalf("batch: %d results, want 2", len(out.Data.Results))
					}
					return fmt.Sprintf("allowed %v roles %q", out.Data.Results[1].Allowed, out.Data.Results[1].Roles)
				}
				step := func(name, want string) {
					t.Helper()
					if batchFirst {
						if got := askBatch(); got != want {
							t.Errorf("%s, in a batch: got %s, want %s", name, got, want)
						}
					}
					if got := ask(); got != want {
						t.Errorf("%s: got %s, want %s", name, got, want)
					}
					if !batchFirst {
						if got := askBatch(); got != want {
							t.Errorf("%s, in a batch: got %s, want %s", name, got, want)
						}
					}
				}
				const allowed, denied, unbound, refused = `allowed true roles ["editor"]`, `allowed false roles ["editor"]`,
					`allowed false roles []`, `401 Authentication required`

				step("bound", allowed)
				step("asked again", allowed)
				// A kept answer the store would not give shows that the next request is served it.
				q := authorizeQuestion{ten.project.ID, store.PrincipalUser, "alice", "document:read"}
				kept, ok := app.srv.kept.decisions.get(q)
				if !ok {
					t.Fatalf("no decision kept for %+v", q)
				}
				kept.decision = store.Decision{Allowed: false, Roles: []string{"kept"}}
				app.srv.kept.decisions.put(q, kept)
				step("kept", `allowed false roles ["kept"]`)
				if err := st.TouchAPIKey(ctx, ten.keyID, start.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
				step("after the key's use is recorded", `allowed false roles ["kept"]`)

				// The role's permission rows and their copy on the role's row (which the batch reads,
				// migration 35), changed as the store changes them, in two statements.
				exec(`UPDATE project_role_permissions SET permission = 'document:list' WHERE role_id = ?`, editor.ID)
				exec(`UPDATE project_roles SET permissions = '["document:list"]' WHERE id = ?`, editor.ID)
				// Another question first: it reads the key again, at the new epoch, with its own answer;
				// the next request finds the key kept at that epoch, and the first question's answer
				// kept at the old one, which it must not serve.
				if got := askAbout("document:list"); got != allowed {
					t.Errorf("another question after the change: got %s, want %s", got, allowed)
				}
				step("permission changed outside the store", denied)
				dev.do(http.MethodPatch, "/roles/"+editor.ID, `{"permissions":["document:read"]}`).decode(t, http.StatusOK, &struct{}{})
				step("permission restored", allowed)

				dev.do(http.MethodDelete, "/role-bindings/"+binding.ID, "").decode(t, http.StatusOK, &struct{}{})
				step("binding deleted", unbound)
				var expiring envelope[bindingJSON]
				dev.do(http.MethodPost, "/role-bindings", fmt.Sprintf(`{"roleId":%q,"principalType":"user","principalId":"alice","expiresAt":%q}`,
					editor.ID, start.Add(time.Hour).Format(time.RFC3339))).decode(t, http.StatusCreated, &expiring)
				step("bound until an hour from now", allowed)
				step("asked again before the binding expires", allowed)
				clock.Set(start.Add(time.Hour))
				step("the binding's expiry passed", unbound)
				dev.do(http.MethodDelete, "/role-bindings/"+expiring.Data.ID, "").decode(t, http.StatusOK, &struct{}{})
				dev.bind(editor.ID, "user", "alice")
				step("bound again", allowed)

				exec(`UPDATE api_keys SET expires_at = ? WHERE id = ?`, at(start.Add(2*time.Hour)), ten.keyID)
				step("key expiring in an hour", allowed)
				clock.Set(start.Add(2 * time.Hour))
				step("the key's expiry passed", refused)
				exec(`UPDATE api_keys SET expires_at = NULL WHERE id = ?`, ten.keyID)
				step("key without expiry", allowed)

				exec(`UPDATE service_accounts SET disabled_at = ? WHERE id = ?`, at(start), ten.accountID)
				step("account disabled outside the store", refused)
				exec(`UPDATE service_accounts SET disabled_at = NULL WHERE id = ?`, ten.accountID)
				step("account enabled", allowed)
				exec(`UPDATE organizations SET archived_at = ? WHERE id = ?`, at(start), ten.org.ID)
				step("organization archived outside the store", refused)
				exec(`UPDATE organizations SET archived_at = NULL WHERE id = ?`, ten.org.ID)
				step("organization restored", allowed)

				app.do(dev.user.as(request{method: http.MethodPost,
					path: "/api/v1/projects/" + ten.project.ID + "/service-accounts/" + ten.accountID + "/keys/" + ten.keyID + "/revoke"})).
					decode(t, http.StatusOK, &struct{}{})
				step("key revoked", refused)
			})
		}
	})
}

// keptFixture is what the tests of kept keys and answers start from: a store on a clock the
// test moves (from start), an app and a tenancy over it, its owner as an RBAC caller, and exec,
// which writes as another program would, by statements on a pool of its own, with at to give a
// time as the store's dialect keeps it.
type keptFixture struct {
	ctx   context.Context
	start time.Time
	clock *storetest.Clock
	st    *store.Store
	app   *testApp
	ten   tenancy
	dev   rbacCaller
	at    func(time.Time) any
	exec  func(query string, args ...any)
}

func newKeptFixture(t *testing.T, b storetest.Backend) keptFixture {
	t.Helper()
	f := keptFixture{ctx: t.Context(), start: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	f.clock = storetest.NewClock(f.start)
	url := b.URL(t)
	f.st = openURL(t, url, store.WithClock(f.clock.Now))
	f.app = newTestApp(t, f.st, testConfig())
	f.ten = f.app.newTenancy(t)
	f.dev = rbacCaller{t, f.app, f.ten.members[RoleOwner], f.ten.project.ID}
	raw := rawDB(t, url)
	f.at = func(at time.Time) any {
		if f.st.Dialect() == store.SQLite {
			return at.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
		return at
	}
	f.exec = func(query string, args ...any) {
		t.Helper()
		if _, err := raw.ExecContext(f.ctx, raw.Rebind(query), args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	return f
}
