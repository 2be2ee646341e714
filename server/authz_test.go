package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// tenancy is an organization with one project and a member in each fixed role, plus a user who
// belongs to no organization.
type tenancy struct {
	org      store.Organization
	project  store.Project
	members  map[string]testUser // by role
	stranger testUser
	// Made through the API by the owner, for operations that address them: a config entry in
	// the first environment, a service account with its key, an unbound project role and a
	// binding of the seeded member role.
	configKey, accountID, keyID, roleID, bindingID string
	// readerKey is the fixture account's API key (scope project:read); starKey has scope *.
	readerKey, starKey string
}

var fixedRoles = []string{RoleOwner, RoleAdmin, RoleDeveloper, RoleBilling, RoleViewer}

func (a *testApp) newTenancy(t *testing.T) tenancy {
	t.Helper()
	ctx := context.Background()
	n := strconv.Itoa(int(time.Now().UnixNano() % 1e9))
	ten := tenancy{members: map[string]testUser{}}
	for _, role := range fixedRoles {
		ten.members[role] = a.newFixtureUser(t, role, role+n+"@example.com")
	}
	ten.stranger = a.newFixtureUser(t, "Stranger", "stranger"+n+"@example.com")
	ten.org = store.Organization{Name: "Acme " + n, Slug: "acme-" + n}
	ten.project = store.Project{Name: "Storefront", Slug: "storefront"}
	err := a.store.InTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.CreateOrganization(ctx, &ten.org, ten.members[RoleOwner].ID); err != nil {
			return err
		}
		for _, role := range fixedRoles[1:] {
			if _, err := tx.AddMember(ctx, ten.org.ID, ten.members[role].ID, role); err != nil {
				return err
			}
		}
		ten.project.OrganizationID = ten.org.ID
		return tx.CreateProject(ctx, &ten.project)
	})
	if err != nil {
		t.Fatal(err)
	}
	ten.addFixtures(t, a)
	return ten
}

// addFixtures creates, through the API, what operations on a project's sub-resources address.
func (ten *tenancy) addFixtures(t *testing.T, a *testApp) {
	t.Helper()
	owner := ten.members[RoleOwner]
	prj := "/api/v1/projects/" + ten.project.ID
	call := func(method, path, body string, status int, v any) {
		t.Helper()
		a.do(owner.as(request{method: method, path: path, body: body})).decode(t, status, v)
	}
	var id struct {
		Data struct {
			ID     string `json:"id"`
			Key    string `json:"key"`
			APIKey string `json:"apiKey"`
			Keys   []struct {
				ID string `json:"id"`
			} `json:"keys"`
		} `json:"data"`
	}
	call("PUT", "/api/v1/environments/"+ten.project.Environments[0].ID+"/configs/FEATURE_FLAGS", `{"value":{"beta":true}}`, 201, &id)
	ten.configKey = id.Data.Key
	call("POST", prj+"/service-accounts", `{"name":"fixture","scopes":["project:read"]}`, 201, &id)
	ten.accountID, ten.keyID, ten.readerKey = id.Data.ID, id.Data.Keys[0].ID, id.Data.APIKey
	call("POST", prj+"/service-accounts", `{"name":"fixture-star","scopes":["*"]}`, 201, &id)
	ten.starKey = id.Data.APIKey
	call("POST", prj+"/roles", `{"name":"Fixture editor","permissions":["document:write"]}`, 201, &id)
	ten.roleID = id.Data.ID
	roles, err := a.store.ListProjectRoles(context.Background(), ten.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles {
		if r.Slug == store.ProjectMemberRole {
			call("POST", prj+"/role-bindings", `{"roleId":"`+r.ID+`","principalType":"user","principalId":"fixture-user"}`, 201, &id)
			ten.bindingID = id.Data.ID
		}
	}
}

// specOperation is one /api/v1 operation read from the document.
type specOperation struct {
	method, path string
	op           *openapi3.Operation
}

func v1Operations(doc *openapi3.T) []specOperation {
	var ops []specOperation
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		for method, op := range item.Operations() {
			ops = append(ops, specOperation{method, path, op})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].op.OperationID < ops[j].op.OperationID })
	return ops
}

// exampleRequest fills the path parameters from the fixture and uses the operation's own
// example body (with a fresh slug, so that repeated creations do not conflict).
func (ten tenancy) exampleRequest(t *testing.T, so specOperation, salt int) request {
	path := strings.NewReplacer(
		"{organizationId}", ten.org.ID,
		"{projectId}", ten.project.ID,
		"{environmentId}", ten.project.Environments[0].ID,
		"{key}", ten.configKey,
		"{accountId}", ten.accountID,
		"{keyId}", ten.keyID,
		"{roleId}", ten.roleID,
		"{bindingId}", ten.bindingID,
	).Replace(so.path)
	r := request{method: strings.ToUpper(so.method), path: path}
	if rb := so.op.RequestBody; rb != nil {
		mt := rb.Value.Content.Get("application/json")
		if mt == nil || mt.Example == nil {
			t.Fatalf("%s has a JSON body without an example", so.op.OperationID)
		}
		body, _ := mt.Example.(map[string]any)
		// Ids in the example point at the fixture's own records.
		copied := map[string]any{}
		for k, v := range body {
			if str, ok := v.(string); ok {
				switch {
				case strings.HasPrefix(str, "prj_"):
					v = ten.project.ID
				case strings.HasPrefix(str, "role_"):
					v = ten.roleID
				case strings.HasPrefix(str, "env_"):
					v = ten.project.Environments[0].ID
				}
			}
			copied[k] = v
		}
		if _, ok := mt.Schema.Value.Properties["slug"]; ok {
			copied["slug"] = fmt.Sprintf("slug-%d", salt) // a fresh slug: creations do not conflict
		}
		b, _ := json.Marshal(copied)
		r.body = string(b)
	}
	return r
}

// successStatus is the operation's first documented 2xx status.
func successStatus(op *openapi3.Operation) int {
	best := 0
	for code := range op.Responses.Map() {
		if n, err := strconv.Atoi(code); err == nil && n >= 200 && n < 300 && (best == 0 || n < best) {
			best = n
		}
	}
	return best
}

// TestRoleOperationMatrix runs every /api/v1 operation for each fixed role, a non-member and two
// service accounts (scopes `*` and `project:read`) and asserts the exact status and title that
// its x-permission, x-service-account-permission and x-user-only imply. Each call gets a fresh
// organization, so that mutations do not disturb the next case.
func TestRoleOperationMatrix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		salt := 0
		for _, so := range v1Operations(app.srv.doc) {
			pol := app.srv.policies[so.op.OperationID]
			if pol.public {
				continue
			}
			callers := append(append([]string{}, fixedRoles...), "non-member", "key:*", "key:project:read")
			for _, who := range callers {
				t.Run(so.op.OperationID+"/"+who, func(t *testing.T) {
					ten := app.newTenancy(t)
					salt++
					r := ten.exampleRequest(t, so, salt)
					var res response
					switch who {
					case "non-member":
						res = app.do(ten.stranger.as(r))
					case "key:*", "key:project:read":
						key, scopes := ten.starKey, []string{"*"}
						if who == "key:project:read" {
							key, scopes = ten.readerKey, []string{PermProjectRead}
						}
						res = app.do(withKey(key, r))
						sa := &ServiceAccountPrincipal{Scopes: scopes}
						perms := pol.permissions
						if pol.saPermissions != nil {
							perms = pol.saPermissions
						}
						switch {
						case pol.userOnly || pol.session:
							res.wantProblem(t, http.StatusForbidden, "http-403", "A user session is required")
						case !allowsAll(sa, perms):
							res.wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
						case res.Code != successStatus(so.op):
							t.Fatalf("status %d, want %d: %s", res.Code, successStatus(so.op), res.Body)
						}
						return
					default:
						res = app.do(ten.members[who].as(r))
					}
					switch {
					case pol.session:
						if res.Code != successStatus(so.op) {
							t.Fatalf("status %d, want %d: %s", res.Code, successStatus(so.op), res.Body)
						}
					case who == "non-member":
						res.wantProblem(t, http.StatusNotFound, "http-404", "Not found")
					case !grantsAll(who, pol.permissions):
						res.wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
					default:
						if res.Code != successStatus(so.op) {
							t.Fatalf("status %d, want %d: %s", res.Code, successStatus(so.op), res.Body)
						}
					}
				})
			}
		}
	})
}

func allowsAll(sa *ServiceAccountPrincipal, perms []string) bool {
	for _, p := range perms {
		if !sa.allows(p) {
			return false
		}
	}
	return true
}

func grantsAll(role string, perms []string) bool {
	for _, p := range perms {
		if !roleGrants(role, p) {
			return false
		}
	}
	return true
}

// TestUnauthenticated: every non-public /api/v1 operation answers 401 without a credential,
// with a malformed or unknown cookie, and with an API key even when a valid cookie is sent.
func TestUnauthenticated(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ten := app.newTenancy(t)
	owner := ten.members[RoleOwner]
	for _, so := range v1Operations(app.srv.doc) {
		if app.srv.policies[so.op.OperationID].public {
			continue
		}
		r := ten.exampleRequest(t, so, 0)
		for name, headers := range map[string]map[string]string{
			"no credential":          {"Origin": testBaseURL},
			"forged cookie":          {"Origin": testBaseURL, "Cookie": app.srv.sessionCookieName + "=" + owner.Token + ".AAAA"},
			"api key beats cookie":   {"Origin": testBaseURL, "Cookie": owner.Cookie, "X-API-Key": "svc_sk_abcdefghijkl_" + strings.Repeat("a", 43)},
			"unsigned session token": {"Origin": testBaseURL, "Cookie": app.srv.sessionCookieName + "=" + owner.Token},
		} {
			t.Run(so.op.OperationID+"/"+name, func(t *testing.T) {
				r.headers = headers
				app.do(r).wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
			})
		}
	}
}
