package server

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// billingStep is one scenario step: who calls what, the status and (for problems) the title,
// the error paths expected, and an optional check of the body.
type billingStep struct {
	name               string
	who                string
	method, path, body string
	headers            []string
	status             int
	title              string
	paths              []string // "body.successUrl" for errors[].path
	check              func(t *testing.T, res response)
}

func (f *billingFixture) run(t *testing.T, steps []billingStep) {
	t.Helper()
	for _, s := range steps {
		if t.Failed() {
			return
		}
		t.Run(s.name, func(t *testing.T) {
			res := f.call(s.who, s.method, s.path, s.body, s.headers...)
			if s.status >= 400 {
				kind := map[int]string{400: kindValidation, 401: kindUnauthorized, 403: kindForbidden, 404: kindNotFound, 409: kindConflict, 502: "http-502"}[s.status]
				if s.title == "Invalid request" || s.title == "Invalid webhook signature" {
					kind = kindClientError
				}
				p := res.wantProblem(t, s.status, kind, s.title)
				var got []string
				for _, e := range p.Errors {
					got = append(got, strings.Join(e.Path, "."))
				}
				// The order of several errors is not part of the contract (kin-openapi walks
				// object properties in map order), so compare them as a set.
				want := slices.Sorted(slices.Values(s.paths))
				slices.Sort(got)
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("errors paths %v, want %v", got, s.paths)
				}
			} else if res.Code != s.status {
				t.Fatalf("status %d, want %d: %s", res.Code, s.status, res.Body)
			}
			if s.check != nil {
				s.check(t, res)
			}
		})
	}
}

// wantJSON compares a response's data member, re-encoded with sorted keys, to want.
func wantData(want string, drop ...string) func(t *testing.T, res response) {
	return func(t *testing.T, res response) {
		t.Helper()
		var body struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(res.Body.Bytes(), &body); err != nil {
			t.Fatalf("decode: %v: %s", err, res.Body)
		}
		for _, k := range drop {
			delete(body.Data, k)
		}
		got, _ := json.Marshal(body.Data)
		if string(got) != want {
			t.Errorf("data\n got %s\nwant %s", got, want)
		}
	}
}

// TestProcessorConnection: GET never shows a secret; PUT validates the key shapes, derives the
// mode, is user-only and needs billing:manage; DELETE disconnects; every change is audited
// and no secret reaches a response, an audit row or the log.
func TestProcessorConnection(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		f := &billingFixture{app: app, ten: app.newTenancy(t)}
		f.env = f.ten.project.Environments[1].ID
		path := "/api/v1/environments/" + f.env + "/processor-connection"
		hook := testBaseURL + "/api/v1/webhooks/processor/" + f.env
		notConnected := `{"connected":false,"environmentId":"` + f.env + `","mode":null,"provider":"stripe","secretKeyLast4":null,"updatedAt":null,"webhookEndpointUrl":"` + hook + `"}`
		connected := func(mode, last4 string) string {
			return `{"connected":true,"environmentId":"` + f.env + `","mode":"` + mode + `","provider":"stripe","secretKeyLast4":"` + last4 + `","webhookEndpointUrl":"` + hook + `"}`
		}
		const liveKey = "sk_live_LiveCanary0000Zq91"
		f.run(t, []billingStep{
			{name: "not connected", who: RoleViewer, method: "GET", path: path, status: 200, check: wantData(notConnected)},
			{name: "stranger", who: "stranger", method: "GET", path: path, status: 404, title: "Not found"},
			{name: "developer may not connect", who: RoleDeveloper, method: "PUT", path: path,
				body: `{"secretKey":"` + testStripeKey + `","webhookSecret":"` + testWebhookSecret + `"}`, status: 403, title: "Permission denied"},
			{name: "bad key shapes", who: RoleOwner, method: "PUT", path: path,
				body: `{"secretKey":"pk_test_51CanaryPublishable","webhookSecret":"secret_canary_value"}`, status: 400, title: "Validation failed",
				paths: []string{"body.secretKey", "body.webhookSecret"}, check: func(t *testing.T, res response) {
					if strings.Contains(res.Body.String(), "Canary") || strings.Contains(res.Body.String(), "canary") {
						t.Errorf("problem echoes the submitted secret: %s", res.Body)
					}
				}},
			{name: "missing webhook secret", who: RoleOwner, method: "PUT", path: path, body: `{"secretKey":"` + testStripeKey + `"}`,
				status: 400, title: "Validation failed", paths: []string{"body.webhookSecret"}},
			{name: "billing role connects (test key)", who: RoleBilling, method: "PUT", path: path,
				body: `{"secretKey":"` + testStripeKey + `","webhookSecret":"` + testWebhookSecret + `"}`, status: 201,
				check: wantData(connected("test", "9f3a"), "updatedAt")},
			{name: "replace with a live key", who: RoleOwner, method: "PUT", path: path,
				body: `{"secretKey":"` + liveKey + `","webhookSecret":"` + testWebhookSecret + `"}`, status: 200,
				check: wantData(connected("live", "Zq91"), "updatedAt")},
			{name: "restricted test key", who: RoleOwner, method: "PUT", path: path,
				body: `{"secretKey":"rk_test_RestrictedCanary0042","webhookSecret":"` + testWebhookSecret + `"}`, status: 200,
				check: wantData(connected("test", "0042"), "updatedAt")},
			{name: "read", who: RoleViewer, method: "GET", path: path, status: 200, check: wantData(connected("test", "0042"), "updatedAt")},
			{name: "viewer may not disconnect", who: RoleViewer, method: "DELETE", path: path, status: 403, title: "Permission denied"},
			{name: "disconnect", who: RoleBilling, method: "DELETE", path: path, status: 200, check: wantData(notConnected)},
			{name: "disconnect again", who: RoleOwner, method: "DELETE", path: path, status: 404, title: "Not found"},
		})
		t.Run("service accounts are refused", func(t *testing.T) {
			res := app.do(request{method: "PUT", path: path, body: `{"secretKey":"` + testStripeKey + `","webhookSecret":"` + testWebhookSecret + `"}`,
				headers: map[string]string{"X-API-Key": f.ten.starKey}})
			res.wantProblem(t, 403, kindForbidden, "A user session is required")
		})
		t.Run("audited without secrets", func(t *testing.T) {
			entries, err := app.store.ListAudit(context.Background(), store.AuditFilter{ProjectID: f.ten.project.ID})
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, e := range entries {
				if strings.HasPrefix(e.Action, "processor_connection.") {
					actions = append(actions, e.Action)
				}
				raw, _ := json.Marshal(e)
				for _, secret := range []string{testStripeKey, testWebhookSecret, liveKey, "rk_test_RestrictedCanary0042", "Canary", "canary"} {
					if strings.Contains(string(raw), secret) {
						t.Errorf("audit row %s holds a secret: %s", e.Action, raw)
					}
				}
			}
			want := "processor_connection.delete,processor_connection.update,processor_connection.update,processor_connection.update"
			if strings.Join(actions, ",") != want {
				t.Errorf("actions %v, want %s", actions, want)
			}
			if logs := app.logs.String(); strings.Contains(logs, "anary") {
				t.Errorf("a secret reached the log:\n%s", logs)
			}
		})
	})
}

// TestBillingPlans: create, unique key per project, currency and amount rules, price ids keyed
// by the project's environments, entitlement values, PATCH, archive and restore.
func TestBillingPlans(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		f := &billingFixture{app: app, ten: app.newTenancy(t)}
		other := app.newTenancy(t)
		f.prj = "/api/v1/projects/" + f.ten.project.ID
		env := f.ten.project.Environments[2].ID
		plans := f.prj + "/billing/plans"
		pro := `{"key":"pro","name":"Pro","description":"For teams","amount":2900,"currency":"usd","interval":"month",` +
			`"stripePriceIds":{"` + env + `":"price_1ProMonthly"},"entitlements":{"sso":true,"seats":10}}`
		var planID string
		keep := func(t *testing.T, res response) {
			var out envelope[struct {
				ID string `json:"id"`
			}]
			_ = json.Unmarshal(res.Body.Bytes(), &out)
			planID = out.Data.ID
		}
		proJSON := func(amount, ents, archived string) string {
			return `{"amount":` + amount + `,"archived":` + archived + `,"currency":"usd","description":"For teams","entitlements":` + ents +
				`,"interval":"month","key":"pro","name":"Pro","projectId":"` + f.ten.project.ID + `","stripePriceIds":{"` + env + `":"price_1ProMonthly"}}`
		}
		drop := []string{"id", "createdAt", "updatedAt", "archivedAt"}
		f.run(t, []billingStep{
			{name: "viewer may not create", who: RoleViewer, method: "POST", path: plans, body: pro, status: 403, title: "Permission denied"},
			{name: "create", who: RoleBilling, method: "POST", path: plans, body: pro, status: 201,
				check: func(t *testing.T, res response) {
					wantData(proJSON("2900", `{"seats":10,"sso":true}`, "false"), drop...)(t, res)
					keep(t, res)
				}},
			{name: "duplicate key", who: RoleOwner, method: "POST", path: plans, body: pro, status: 409, title: "A plan with this key already exists"},
			{name: "upper-case currency", who: RoleOwner, method: "POST", path: plans,
				body: `{"key":"a","name":"A","amount":1,"currency":"USD","interval":"month"}`, status: 400, title: "Validation failed", paths: []string{"body.currency"}},
			{name: "unknown currency", who: RoleOwner, method: "POST", path: plans,
				body: `{"key":"a","name":"A","amount":1,"currency":"abc","interval":"month"}`, status: 400, title: "Validation failed", paths: []string{"body.currency"}},
			{name: "negative amount", who: RoleOwner, method: "POST", path: plans,
				body: `{"key":"a","name":"A","amount":-1,"currency":"eur","interval":"month"}`, status: 400, title: "Validation failed", paths: []string{"body.amount"}},
			{name: "fractional amount", who: RoleOwner, method: "POST", path: plans,
				body: `{"key":"a","name":"A","amount":1.5,"currency":"eur","interval":"month"}`, status: 400, title: "Validation failed", paths: []string{"body.amount"}},
			{name: "unknown interval", who: RoleOwner, method: "POST", path: plans,
				body: `{"key":"a","name":"A","amount":1,"currency":"eur","interval":"week"}`, status: 400, title: "Validation failed", paths: []string{"body.interval"}},
			{name: "entitlement value not boolean or number", who: RoleOwner, method: "POST", path: plans,
				body: `{"key":"a","name":"A","amount":1,"currency":"eur","interval":"year","entitlements":{"sso":"yes"}}`, status: 400, title: "Validation failed", paths: []string{"body.entitlements.sso"}},
			{name: "price id of another project's environment", who: RoleOwner, method: "POST", path: plans,
				body:   `{"key":"a","name":"A","amount":1,"currency":"eur","interval":"year","stripePriceIds":{"` + other.project.Environments[0].ID + `":"price_1X"}}`,
				status: 400, title: "Validation failed", paths: []string{"body.stripePriceIds." + other.project.Environments[0].ID}},
			{name: "price id shape", who: RoleOwner, method: "POST", path: plans,
				body:   `{"key":"a","name":"A","amount":1,"currency":"eur","interval":"year","stripePriceIds":{"` + env + `":"prod_1X"}}`,
				status: 400, title: "Validation failed", paths: []string{"body.stripePriceIds." + env}},
			{name: "the same key in another project", who: RoleOwner, method: "POST", path: "/api/v1/projects/" + other.project.ID + "/billing/plans",
				body: `{"key":"pro","name":"Pro","amount":0,"currency":"jpy","interval":"one_time"}`, status: 404, title: "Not found"},
			{name: "list", who: RoleViewer, method: "GET", path: plans, status: 200, check: func(t *testing.T, res response) {
				if n := strings.Count(res.Body.String(), `"key":"pro"`); n != 1 {
					t.Errorf("list %s", res.Body)
				}
			}},
		})
		item := func() string { return plans + "/" + planID }
		f.run(t, []billingStep{
			{name: "patch", who: RoleOwner, method: "PATCH", path: item(), body: `{"amount":3900,"entitlements":{"sso":true,"seats":25}}`, status: 200,
				check: wantData(proJSON("3900", `{"seats":25,"sso":true}`, "false"), drop...)},
			{name: "patch key refused", who: RoleOwner, method: "PATCH", path: item(), body: `{"key":"team"}`, status: 400, title: "Validation failed", paths: []string{"body.key"}},
			{name: "patch unknown plan", who: RoleOwner, method: "PATCH", path: plans + "/pln_nope", body: `{"amount":1}`, status: 404, title: "Not found"},
			{name: "archive", who: RoleBilling, method: "POST", path: item() + "/archive", status: 200,
				check: wantData(proJSON("3900", `{"seats":25,"sso":true}`, "true"), drop...)},
			{name: "archived plans are not listed", who: RoleViewer, method: "GET", path: plans, status: 200, check: func(t *testing.T, res response) {
				// Only the tenancy fixture's plan is left.
				if strings.Contains(res.Body.String(), `"key":"pro"`) || strings.Count(res.Body.String(), `"key":`) != 1 {
					t.Errorf("list %s", res.Body)
				}
			}},
			{name: "listed with state=archived", who: RoleViewer, method: "GET", path: plans + "?state=archived", status: 200, check: func(t *testing.T, res response) {
				if !strings.Contains(res.Body.String(), `"archived":true`) {
					t.Errorf("list %s", res.Body)
				}
			}},
			{name: "patch archived", who: RoleOwner, method: "PATCH", path: item(), body: `{"amount":1}`, status: 409, title: "Plan is archived; restore it first"},
			{name: "restore", who: RoleOwner, method: "POST", path: item() + "/restore", status: 200,
				check: wantData(proJSON("3900", `{"seats":25,"sso":true}`, "false"), drop...)},
		})
		t.Run("audited", func(t *testing.T) {
			entries, err := app.store.ListAudit(context.Background(), store.AuditFilter{ProjectID: f.ten.project.ID})
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, e := range entries {
				if strings.HasPrefix(e.Action, "billing_plan.") {
					actions = append(actions, e.Action)
				}
			}
			if got := strings.Join(actions, ","); got != "billing_plan.restore,billing_plan.archive,billing_plan.update,billing_plan.create" {
				t.Errorf("actions %s", got)
			}
		})
	})
}

// TestSubjectDeletionKeepsBilling: DELETE /subjects/{subjectId} removes the identity, not its
// subscriptions, invoices or grants.
func TestSubjectDeletionKeepsBilling(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		f := &billingFixture{app: app, ten: app.newTenancy(t)}
		f.prj, f.env = "/api/v1/projects/"+f.ten.project.ID, f.ten.project.Environments[0].ID
		subject := f.ten.subjectID // holds a refresh token of the project's client
		ctx := context.Background()
		f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","entitlements":{"sso":true}}`)
		err := app.store.InTx(ctx, func(tx *store.Tx) error {
			if _, _, err := tx.ApplySubscription(ctx, store.Subscription{ProjectID: f.ten.project.ID, EnvironmentID: f.env,
				ProcessorID: "sub_kept", SubjectID: subject, PlanKey: "pro", CustomerID: "cus_kept", Status: store.StatusActive}); err != nil {
				return err
			}
			_, err := tx.RecordInvoice(ctx, store.Invoice{ProjectID: f.ten.project.ID, EnvironmentID: f.env, ProcessorID: "in_kept",
				SubjectID: subject, SubscriptionID: "sub_kept", Status: store.InvoicePaid, Amount: 2900, Currency: "usd"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if res := f.call(RoleBilling, "POST", f.prj+"/subjects/"+subject+"/entitlement-grants", `{"featureKey":"beta","value":true}`); res.Code != 201 {
			t.Fatalf("grant: %d %s", res.Code, res.Body)
		}
		before := f.entitlementsOf(t, subject)
		if res := f.call(RoleOwner, "DELETE", f.prj+"/subjects/"+subject, ""); res.Code != 200 {
			t.Fatalf("delete subject: %d %s", res.Code, res.Body)
		}
		if _, err := app.store.User(ctx, subject); err == nil {
			t.Fatal("the identity is still there")
		}
		if after := f.entitlementsOf(t, subject); after != before || !strings.Contains(after, `"source":{"id":"pro","type":"plan"}`) ||
			!strings.Contains(after, `"featureKey":"beta"`) {
			t.Errorf("entitlements after deletion %s, before %s", after, before)
		}
		invoices, err := app.store.ListSubjectInvoices(ctx, f.ten.project.ID, subject)
		if err != nil || len(invoices) != 1 {
			t.Errorf("invoices after deletion %v %v", invoices, err)
		}
		if st, ok, err := app.store.SubjectBillingState(ctx, f.ten.project.ID, subject, ""); err != nil || !ok || st.PlanKey != "pro" || st.Status != "active" {
			t.Errorf("billing state after deletion %+v %v %v", st, ok, err)
		}
	})
}

// TestEntitlementGrants: grant validation and permissions; an unknown subject simply has no
// entitlements.
func TestEntitlementGrants(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		f := &billingFixture{app: app, ten: app.newTenancy(t)}
		f.prj = "/api/v1/projects/" + f.ten.project.ID
		grants := f.prj + "/subjects/usr_grantee/entitlement-grants"
		f.run(t, []billingStep{
			{name: "unknown subject has none", who: RoleViewer, method: "GET", path: f.prj + "/subjects/usr_grantee/entitlements", status: 200,
				check: wantData(`{"entitlements":[],"features":{},"subjectId":"usr_grantee"}`)},
			{name: "viewer may not grant", who: RoleViewer, method: "POST", path: grants, body: `{"featureKey":"beta","value":true}`, status: 403, title: "Permission denied"},
			{name: "developer may not grant", who: RoleDeveloper, method: "POST", path: grants, body: `{"featureKey":"beta","value":true}`, status: 403, title: "Permission denied"},
			{name: "value is a string", who: RoleBilling, method: "POST", path: grants, body: `{"featureKey":"beta","value":"yes"}`, status: 400, title: "Validation failed", paths: []string{"body.value"}},
			{name: "negative limit", who: RoleBilling, method: "POST", path: grants, body: `{"featureKey":"seats","value":-1}`, status: 400, title: "Validation failed", paths: []string{"body.value"}},
			{name: "feature key shape", who: RoleBilling, method: "POST", path: grants, body: `{"featureKey":"Beta Feature","value":true}`, status: 400, title: "Validation failed", paths: []string{"body.featureKey"}},
			{name: "subject id shape", who: RoleBilling, method: "POST", path: f.prj + "/subjects/usr%20x/entitlement-grants", body: `{"featureKey":"beta","value":true}`, status: 400, title: "Validation failed", paths: []string{"path.subjectId"}},
			{name: "expired already", who: RoleBilling, method: "POST", path: grants, body: `{"featureKey":"beta","value":true,"expiresAt":"2020-01-01T00:00:00Z"}`, status: 400, title: "Validation failed", paths: []string{"body.expiresAt"}},
			{name: "granted", who: RoleBilling, method: "POST", path: grants, body: `{"featureKey":"seats","value":3,"expiresAt":"2099-01-01T00:00:00Z","reason":"Trial"}`, status: 201,
				check: wantData(`{"createdBy":{"id":"`+f.ten.members[RoleBilling].ID+`","type":"user"},"expiresAt":"2099-01-01T00:00:00Z","featureKey":"seats","projectId":"`+f.ten.project.ID+`","reason":"Trial","subjectId":"usr_grantee","value":3}`, "id", "createdAt")},
		})
		t.Run("service account", func(t *testing.T) {
			res := app.do(request{method: "POST", path: grants, body: `{"featureKey":"beta","value":true}`, headers: map[string]string{"X-API-Key": f.ten.starKey}})
			if res.Code != 201 {
				t.Fatalf("%d %s", res.Code, res.Body)
			}
			got := f.entitlementsOf(t, "usr_grantee")
			if !strings.Contains(got, `"features":{"beta":true,"seats":3}`) {
				t.Errorf("entitlements %s", got)
			}
		})
	})
}
