package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gatehouse-dev/gatehouse/openapi"
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
	// binding of the seeded member role; a web OIDC client.
	configKey, accountID, keyID, roleID, bindingID, clientID string
	// subjectID is a user who signed in to the fixture's OIDC client (it holds a refresh token
	// from them), so that the project may delete them.
	subjectID string
	// readerKey is the fixture account's API key (scope project:read); starKey has scope *.
	readerKey, starKey string
	// planID and planKey name a billing plan priced in the first environment, which is
	// connected to Stripe (written through the store: no audit rows).
	planID, planKey string
	// endpointID is a webhook endpoint (invoice.paid, on a public address nothing listens on) and
	// deliveryID the pending delivery of its ping.
	endpointID, deliveryID string
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
	call("POST", prj+"/oidc-clients", `{"name":"Fixture web","type":"web","redirectUris":["https://app.example.com/cb"],"grantTypes":["authorization_code"],"scopes":["openid"]}`, 201, &id)
	ten.clientID = id.Data.ID
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
	ten.addBillingFixtures(t, a)
	call("POST", prj+"/webhook-endpoints", `{"url":"https://203.0.113.10/fixture","eventTypes":["invoice.paid"]}`, 201, &id)
	ten.endpointID = id.Data.ID
	call("POST", prj+"/webhook-endpoints/"+ten.endpointID+"/test", "", 202, &id)
	ds, _, err := a.store.WebhookDeliveries(context.Background(), ten.endpointID, nil, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fixture delivery: %v %v", ds, err)
	}
	ten.deliveryID = ds[0].ID
	subject := a.newFixtureUser(t, "Subject", "subject-"+ten.org.Slug+"@example.com")
	ten.subjectID = subject.ID
	a.grantRefreshToken(t, ten.clientID, subject.ID)
	// Usage: the ingest example's event, so that the example is a replay (200), and an event of
	// the subject, so that its activity exists (200).
	_, err = a.store.IngestUsage(context.Background(), []store.UsageEvent{
		{ProjectID: ten.project.ID, EnvironmentID: ten.project.Environments[0].ID, EventID: "evt_2026-11-22_000123",
			SubjectID: "usr_01JD3M3Z5Y4X3W2V1T0S9R8Q7P", Meter: "api_call"},
		{ProjectID: ten.project.ID, EnvironmentID: ten.project.Environments[0].ID, EventID: "fixture-subject-event",
			SubjectID: ten.subjectID, Meter: "api_call"},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// grantRefreshToken stores an active refresh token of clientID for subject, as the provider
// does at a code exchange with offline_access.
// It returns the token's signature.
func (a *testApp) grantRefreshToken(t *testing.T, clientID, subject string) string {
	t.Helper()
	ctx := context.Background()
	now := a.store.Now()
	signature := store.NewID("sig")
	err := a.store.InTx(ctx, func(tx *store.Tx) error {
		return tx.CreateOAuthToken(ctx, store.OAuthToken{
			Kind: store.OAuthRefresh, Signature: signature, RequestID: store.NewID("req"),
			ClientID: clientID, Subject: subject, Active: true,
			Scopes: `["openid","offline_access"]`, GrantedScopes: `["openid","offline_access"]`,
			RequestedAudience: "[]", GrantedAudience: "[]", Session: []byte("{}"),
			RequestedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return signature
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

// exampleRequest fills the path parameters from the fixture, sends the required query
// parameters with their spec examples and uses the operation's own example body (with a fresh
// slug, so that repeated creations do not conflict).
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
		"{clientId}", ten.clientID,
		"{subjectId}", ten.subjectID,
		"{planId}", ten.planID,
		"{endpointId}", ten.endpointID,
		"{deliveryId}", ten.deliveryID,
		"{principalType}", store.PrincipalUser,
		"{principalId}", "fixture-user",
	).Replace(so.path)
	r := request{method: strings.ToUpper(so.method), path: path}
	query := url.Values{}
	for _, p := range so.op.Parameters {
		switch {
		case p.Value.In == "header" && p.Value.Required:
			r.headers = map[string]string{p.Value.Name: fmt.Sprint(p.Value.Example)}
		case p.Value.In == "query" && p.Value.Required:
			query.Set(p.Value.Name, fmt.Sprint(p.Value.Example))
		}
	}
	if len(query) > 0 {
		r.path += "?" + query.Encode()
	}
	if rb := so.op.RequestBody; rb != nil {
		mt := rb.Value.Content.Get("application/json")
		if mt == nil || mt.Example == nil {
			t.Fatalf("%s has a JSON body without an example", so.op.OperationID)
		}
		example, _ := mt.Example.(map[string]any)
		copied := ten.withFixtureIDs(example)
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

// contractGrants is the fixed control-plane grant table, written out by hand permission by
// permission from the contract (ARCHITECTURE.md "Control-plane roles (fixed)" and interface.md
// "Control-plane roles"), never computed from server code:
//
//	owner     all
//	admin     all but organization:delete
//	developer every :read but config:reveal; project:create/update/delete,
//	          config:update/delete, usage:write (not credential:manage, billing:manage,
//	          no organization or member mutation)
//	billing   every :read but config:reveal; billing:manage
//	viewer    every :read but config:reveal
var contractGrants = map[string][]string{
	"organization:update": {"owner", "admin"},
	"organization:delete": {"owner"},
	"member:manage":       {"owner", "admin"},
	"project:read":        {"owner", "admin", "developer", "billing", "viewer"},
	"project:create":      {"owner", "admin", "developer"},
	"project:update":      {"owner", "admin", "developer"},
	"project:delete":      {"owner", "admin", "developer"},
	"credential:read":     {"owner", "admin", "developer", "billing", "viewer"},
	"credential:manage":   {"owner", "admin"},
	"config:read":         {"owner", "admin", "developer", "billing", "viewer"},
	"config:reveal":       {"owner", "admin"},
	"config:update":       {"owner", "admin", "developer"},
	"config:delete":       {"owner", "admin", "developer"},
	"usage:read":          {"owner", "admin", "developer", "billing", "viewer"},
	"usage:write":         {"owner", "admin", "developer"},
	"billing:read":        {"owner", "admin", "developer", "billing", "viewer"},
	"billing:manage":      {"owner", "admin", "billing"},
	"audit:read":          {"owner", "admin", "developer", "billing", "viewer"},
}

// contractRoleHolds reports whether the contract's table gives role every one of perms. A
// permission the table does not know fails the test: the spec may only name the 18.
func contractRoleHolds(t *testing.T, role string, perms []string) bool {
	t.Helper()
	for _, p := range perms {
		holders, ok := contractGrants[p]
		if !ok {
			t.Fatalf("the spec names permission %q, which is not one of the contract's 18", p)
		}
		if !slices.Contains(holders, role) {
			return false
		}
	}
	return true
}

// contractScopesHold reports whether API key scopes cover every one of perms: per the contract a
// scope is a permission string and `*` covers every permission.
func contractScopesHold(scopes, perms []string) bool {
	for _, p := range perms {
		if !slices.Contains(scopes, "*") && !slices.Contains(scopes, p) {
			return false
		}
	}
	return true
}

// specAuth is an operation's authorization as its spec extensions state it, read here
// independently of the server's own policy loader.
type specAuth struct {
	public, session, userOnly bool
	// perms are all required of users; saPerms of service accounts.
	perms, saPerms []string
}

func readSpecAuth(t *testing.T, op *openapi3.Operation) specAuth {
	t.Helper()
	var a specAuth
	switch v := op.Extensions["x-permission"].(type) {
	case string:
		switch v {
		case "none":
			a.public = true
		case "session":
			a.session = true
		default:
			a.perms = []string{v}
		}
	case []any:
		for _, x := range v {
			a.perms = append(a.perms, x.(string))
		}
	default:
		t.Fatalf("%s: x-permission is %T", op.OperationID, v)
	}
	a.userOnly, _ = op.Extensions["x-user-only"].(bool)
	a.saPerms = a.perms
	if sa, ok := op.Extensions["x-service-account-permission"].(string); ok {
		a.saPerms = []string{sa}
	}
	return a
}

// TestContractGrantsAreComplete: the literal table names exactly the contract's 18 permissions
// and its per-role counts match the prose (owner 18, admin 17, developer 12, billing 7, viewer 6).
func TestContractGrantsAreComplete(t *testing.T) {
	if len(contractGrants) != 18 {
		t.Fatalf("contract table has %d permissions, want 18", len(contractGrants))
	}
	count := map[string]int{}
	for _, holders := range contractGrants {
		for _, r := range holders {
			count[r]++
		}
	}
	want := map[string]int{"owner": 18, "admin": 17, "developer": 12, "billing": 7, "viewer": 6}
	for r, n := range want {
		if count[r] != n {
			t.Errorf("%s holds %d permissions in the table, want %d", r, count[r], n)
		}
	}
}

// TestRoleOperationMatrix runs every /api/v1 operation for each fixed role, a non-member and two
// service accounts (scopes `*` and `project:read`) and asserts the exact status and title that
// the operation's x-permission, x-service-account-permission and x-user-only imply under the
// contract's literal role table (contractGrants), never under the server's own table. A caller
// the contract lets through gets a fresh organization, so that its mutation does not disturb the
// next case; the callers it refuses share one organization per operation, since a refusal writes
// nothing (if one were let through, its own case fails).
func TestRoleOperationMatrix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.StripeAPIBase = startStripeMock(t) // checkouts succeed against a Stripe double
		app := newTestApp(t, b.Open(t), cfg)
		salt := 0
		for _, so := range v1Operations(loadTestSpec(t)) {
			auth := readSpecAuth(t, so.op)
			if auth.public {
				continue
			}
			var refusedTenancy *tenancy // made on the operation's first refusal
			callers := append(append([]string{}, fixedRoles...), "non-member", "key:*", "key:project:read")
			for _, who := range callers {
				want := matrixWant(t, so.op, auth, who)
				tenancyFor := func(t *testing.T) tenancy { return app.newTenancy(t) }
				if want.refused() {
					if refusedTenancy == nil {
						shared := app.newTenancy(t)
						refusedTenancy = &shared
					}
					tenancyFor = func(*testing.T) tenancy { return *refusedTenancy }
				}
				t.Run(so.op.OperationID+"/"+who, func(t *testing.T) {
					ten := tenancyFor(t)
					salt++
					r := ten.exampleRequest(t, so, salt)
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
					if want.refused() {
						res.wantProblem(t, want.status, "http-"+strconv.Itoa(want.status), want.title)
					} else if res.Code != want.status {
						t.Fatalf("status %d, want %d: %s", res.Code, want.status, res.Body)
					}
				})
			}
		}
	})
}

// matrixOutcome is what one caller of TestRoleOperationMatrix must get: the operation's success
// status (title empty), or a refusal's status and title.
type matrixOutcome struct {
	status int
	title  string
}

// refused reports whether the contract refuses the caller: a problem with this title is due.
func (o matrixOutcome) refused() bool { return o.title != "" }

// matrixWant reads who's outcome off the contract: a key is refused a user-only or session
// operation and any permission outside its scopes; a session operation lets every user through;
// a non-member of the organization is told it is not found; a role is refused what
// contractGrants does not give it.
func matrixWant(t *testing.T, op *openapi3.Operation, auth specAuth, who string) matrixOutcome {
	t.Helper()
	forbidden := matrixOutcome{http.StatusForbidden, "Permission denied"}
	switch who {
	case "key:*", "key:project:read":
		scopes := []string{"*"}
		if who == "key:project:read" {
			scopes = []string{"project:read"}
		}
		switch {
		case auth.userOnly || auth.session:
			return matrixOutcome{http.StatusForbidden, "A user session is required"}
		case !contractScopesHold(scopes, auth.saPerms):
			return forbidden
		}
	case "non-member":
		if !auth.session {
			return matrixOutcome{http.StatusNotFound, "Not found"}
		}
	default:
		if !auth.session && !contractRoleHolds(t, who, auth.perms) {
			return forbidden
		}
	}
	return matrixOutcome{status: successStatus(op)}
}

// loadTestSpec loads the hand-written OpenAPI document afresh, independently of the server.
func loadTestSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML)
	if err != nil {
		t.Fatal(err)
	}
	return doc
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

// withFixtureIDs copies a spec example body with the ids it names (by their prefixes) pointing
// at the tenancy's own organization, project, role and first environment.
func (ten *tenancy) withFixtureIDs(example map[string]any) map[string]any {
	out := make(map[string]any, len(example))
	for k, v := range example {
		if str, ok := v.(string); ok {
			switch {
			case strings.HasPrefix(str, "org_"):
				v = ten.org.ID
			case strings.HasPrefix(str, "prj_"):
				v = ten.project.ID
			case strings.HasPrefix(str, "role_"):
				v = ten.roleID
			case strings.HasPrefix(str, "env_"):
				v = ten.project.Environments[0].ID
			}
			if k == "planKey" {
				v = ten.planKey
			}
		}
		if m, ok := v.(map[string]any); ok && k == "stripePriceIds" {
			prices := map[string]any{}
			for _, price := range m {
				prices[ten.project.Environments[0].ID] = price
			}
			v = prices
		}
		out[k] = v
	}
	return out
}
