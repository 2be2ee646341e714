package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestProcessorWebhookSignatures: only an event signed with the environment's own webhook
// secret, stamped within 300 s of now (before or after), over the exact body, is accepted (any one of several v1 signatures may
// match); everything else is a 400 problem, never a 500; unknown or unconnected environments
// are 404.
func TestProcessorWebhookSignatures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		f := &billingFixture{app: app, ten: app.newTenancy(t)}
		f.env = f.ten.project.Environments[0].ID
		f.connect(t)
		other := app.newTenancy(t)
		otherEnv := other.project.Environments[0].ID
		res := app.do(other.members[RoleOwner].as(request{method: "PUT", path: "/api/v1/environments/" + otherEnv + "/processor-connection",
			body: `{"secretKey":"sk_test_OtherAccount000001","webhookSecret":"whsec_otherEnvironmentSecret01"}`}))
		if res.Code != 200 {
			t.Fatalf("connect other: %d %s", res.Code, res.Body)
		}
		payload := event("evt_sig_1", "customer.created", time.Now().Unix(), `{"id":"cus_1","object":"customer"}`)
		post := func(env, body, header string) response {
			h := map[string]string{}
			if header != "" {
				h["Stripe-Signature"] = header
			}
			return app.do(request{method: "POST", path: webhookPath(env), body: body, headers: h})
		}
		sign := func(secret, body string, ts time.Time) string {
			return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: ts}).Header
		}
		now := time.Now()
		good := hex.EncodeToString(webhook.ComputeSignature(now, []byte(payload), testWebhookSecret))
		bad := hex.EncodeToString(webhook.ComputeSignature(now, []byte(payload), "whsec_wrong"))
		ts := strconv.FormatInt(now.Unix(), 10)
		// Cases whose signature time is an offset from the moment of the request (signedIn):
		// signed once at the start, a timestamp meant just inside or outside the tolerance would
		// drift across it while the cases before run (a slow machine takes over a second).
		cases := []struct {
			name, env, body, header string
			signedIn                time.Duration
			status                  int
			title                   string
		}{
			{"missing signature", f.env, payload, "", 0, 400, "Invalid webhook signature"},
			{"garbage header", f.env, payload, "v1=zz", 0, 400, "Invalid webhook signature"},
			{"another secret", f.env, payload, sign("whsec_notTheRightOne", payload, now), 0, 400, "Invalid webhook signature"},
			{"another environment's secret", otherEnv, payload, sign(testWebhookSecret, payload, now), 0, 400, "Invalid webhook signature"},
			{"stale timestamp", f.env, payload, sign(testWebhookSecret, payload, now.Add(-301*time.Second)), 0, 400, "Invalid webhook signature"},
			{"tampered body", f.env, strings.Replace(payload, "cus_1", "cus_2", 1), sign(testWebhookSecret, payload, now), 0, 400, "Invalid webhook signature"},
			{"v0 signature only", f.env, payload, "t=" + ts + ",v0=" + good, 0, 400, "Invalid webhook signature"},
			{"not JSON", f.env, "not json", sign(testWebhookSecret, "not json", now), 0, 400, "Validation failed"},
			{"unknown environment", "env_nope", payload, sign(testWebhookSecret, payload, now), 0, 404, "Not found"},
			{"environment not connected", f.ten.project.Environments[1].ID, payload, sign(testWebhookSecret, payload, now), 0, 404, "Not found"},
			{"the second of two v1 signatures matches", f.env, payload, "t=" + ts + ",v1=" + bad + ",v1=" + good, 0, 200, ""},
			{"within the tolerance", f.env, event("evt_sig_2", "customer.created", now.Unix(), `{"id":"cus_1"}`), "", -290 * time.Second, 200, ""},
			// The tolerance holds both ways: a timestamp from the future is as suspect as a stale one.
			{"timestamp 400 s ahead", f.env, payload, sign(testWebhookSecret, payload, now.Add(400*time.Second)), 0, 400, "Invalid webhook signature"},
			{"timestamp 301 s ahead", f.env, payload, "", 301 * time.Second, 400, "Invalid webhook signature"},
			{"timestamp 200 s ahead", f.env, event("evt_sig_3", "customer.created", now.Unix(), `{"id":"cus_1"}`), "", 200 * time.Second, 200, ""},
			// The event is Stripe's document, not fields of the caller's: the text rule does not
			// apply to it (x-arbitrary-text), so a NUL in a string the service never reads is fine.
			{"a NUL in an event string", f.env, event("evt_sig_4", "customer.created", now.Unix(), `{"id":"cus_1","description":"a\u0000b"}`),
				sign(testWebhookSecret, event("evt_sig_4", "customer.created", now.Unix(), `{"id":"cus_1","description":"a\u0000b"}`), now), 0, 200, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				header := c.header
				if c.signedIn != 0 {
					header = sign(testWebhookSecret, c.body, time.Now().Add(c.signedIn))
				}
				res := post(c.env, c.body, header)
				switch c.status {
				case 200:
					if res.Code != 200 || strings.TrimSpace(res.Body.String()) != `{"received":true,"duplicate":false}` {
						t.Fatalf("%d %s", res.Code, res.Body)
					}
				default:
					kind := map[int]string{400: kindClientError, 404: kindNotFound}[c.status]
					if c.title == "Validation failed" {
						kind = kindValidation
					}
					res.wantProblem(t, c.status, kind, c.title)
				}
			})
		}
		if logs := app.logs.String(); strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "whsec_") {
			t.Errorf("log:\n%s", logs)
		}
	})
}

// TestBillingLifecycle is the story through real handlers, stripe-mock and genuinely
// signed events: no plan → checkout → checkout.session.completed → the plan's entitlements →
// a grant adds a feature → out-of-order and replayed subscription events change nothing →
// customer.subscription.deleted → plan entitlements gone, the grant still there; invoices are
// recorded once and paid is final; unknown event types are ignored.
func TestBillingLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		f := newBillingFixture(t, b)
		ctx := context.Background()
		f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","stripePriceIds":{"`+
			f.env+`":"price_1ProMonthly"},"entitlements":{"sso":true,"seats":10}}`)
		f.connect(t)
		const subject = "usr_buyer1"
		state := func() store.BillingState {
			t.Helper()
			st, _, err := f.app.store.SubjectBillingState(ctx, f.ten.project.ID, subject, "")
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		send := func(id, typ string, created int64, object string, wantDuplicate bool) {
			t.Helper()
			res := f.webhook(f.env, testWebhookSecret, event(id, typ, created, object), time.Time{})
			want := fmt.Sprintf(`{"received":true,"duplicate":%v}`, wantDuplicate)
			if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != want {
				t.Fatalf("%s %s: %d %s, want %s", typ, id, res.Code, res.Body, want)
			}
		}
		meta := `{"project_id":"` + f.ten.project.ID + `","environment_id":"` + f.env + `","subject_id":"` + subject + `","plan_key":"pro"}`
		sub := func(status string, periodStart, periodEnd int64) string {
			return fmt.Sprintf(`{"id":"sub_1","object":"subscription","customer":"cus_1","status":%q,"cancel_at_period_end":false,"metadata":%s,`+
				`"items":{"object":"list","data":[{"id":"si_1","price":{"id":"price_1ProMonthly"},"current_period_start":%d,"current_period_end":%d}]}}`,
				status, meta, periodStart, periodEnd)
		}
		const t0 = int64(1764000000)       // 2025-11-24T16:00:00Z
		const p1, p2 = t0, t0 + 30*24*3600 // two billing periods
		const p1End, p2End = p2, p2 + 30*24*3600
		empty := `{"data":{"entitlements":[],"features":{},"subjectId":"` + subject + `"}}`

		if got := f.entitlementsOf(t, subject); got != empty {
			t.Fatalf("before: %s", got)
		}
		res := f.call(RoleBilling, "POST", f.prj+"/billing/checkout", `{"environmentId":"`+f.env+`","subjectId":"`+subject+
			`","planKey":"pro","successUrl":"https://app.example.com/ok","cancelUrl":"https://app.example.com/no"}`, "idempotency-key", "lifecycle-key-000001")
		if res.Code != http.StatusCreated {
			t.Fatalf("checkout: %d %s", res.Code, res.Body)
		}
		send("evt_1", "checkout.session.completed", t0, `{"id":"cs_test_1","object":"checkout.session","mode":"subscription",`+
			`"client_reference_id":"`+subject+`","customer":"cus_1","subscription":"sub_1","payment_status":"paid","status":"complete","metadata":`+meta+`}`, false)
		planOnly := `{"data":{"entitlements":[{"expiresAt":null,"featureKey":"seats","source":{"id":"pro","type":"plan"},"value":10},` +
			`{"expiresAt":null,"featureKey":"sso","source":{"id":"pro","type":"plan"},"value":true}],"features":{"seats":10,"sso":true},"subjectId":"` + subject + `"}}`
		if got := f.entitlementsOf(t, subject); got != planOnly {
			t.Fatalf("after checkout:\n got %s\nwant %s", got, planOnly)
		}
		if st := state(); st.PlanKey != "pro" || st.Status != "active" || st.CurrentPeriodEnd != nil {
			t.Errorf("state after checkout %+v", st)
		}

		var grant envelope[struct {
			ID string `json:"id"`
		}]
		f.call(RoleBilling, "POST", f.prj+"/subjects/"+subject+"/entitlement-grants",
			`{"featureKey":"seats","value":25,"reason":"Pilot"}`).decode(t, http.StatusCreated, &grant)
		f.call(RoleBilling, "POST", f.prj+"/subjects/"+subject+"/entitlement-grants",
			`{"featureKey":"beta","value":true,"expiresAt":"2020-01-01T00:00:00Z"}`).wantProblem(t, 400, kindValidation, "Validation failed")
		grantItem := `{"expiresAt":null,"featureKey":"seats","source":{"id":"` + grant.Data.ID + `","type":"grant"},"value":25}`
		withGrant := `{"data":{"entitlements":[{"expiresAt":null,"featureKey":"seats","source":{"id":"pro","type":"plan"},"value":10},` +
			`{"expiresAt":null,"featureKey":"sso","source":{"id":"pro","type":"plan"},"value":true},` + grantItem +
			`],"features":{"seats":25,"sso":true},"subjectId":"` + subject + `"}}`
		if got := f.entitlementsOf(t, subject); got != withGrant {
			t.Fatalf("with grant:\n got %s\nwant %s", got, withGrant)
		}

		send("evt_2", "customer.subscription.updated", t0+20, sub("past_due", p2, p2End), false)
		if st := state(); st.Status != "past_due" || st.CurrentPeriodEnd == nil || st.CurrentPeriodEnd.Unix() != p2End {
			t.Errorf("after evt_2 %+v", st)
		}
		// Out of order: the creation event of the first period arrives late.
		send("evt_0", "customer.subscription.created", t0-5, sub("incomplete", p1, p1End), false)
		// An earlier event of the same period.
		send("evt_1b", "customer.subscription.updated", t0+10, sub("active", p2, p2End), false)
		if st := state(); st.Status != "past_due" || st.CurrentPeriodEnd.Unix() != p2End {
			t.Errorf("a late event rolled the subscription back: %+v", st)
		}
		send("evt_3", "customer.subscription.updated", t0+30, sub("active", p2, p2End), false)
		send("evt_3", "customer.subscription.updated", t0+30, sub("canceled", p2, p2End), true) // a replay: no effect
		if st := state(); st.Status != "active" {
			t.Errorf("after evt_3 and its replay %+v", st)
		}

		inv := func(status string) string {
			return `{"id":"in_1","object":"invoice","customer":"cus_1","status":"` + status + `","amount_paid":2900,"amount_due":2900,"currency":"usd","created":` +
				strconv.FormatInt(t0+31, 10) + `,"status_transitions":{"paid_at":` + strconv.FormatInt(t0+32, 10) + `},` +
				`"parent":{"type":"subscription_details","subscription_details":{"subscription":"sub_1","metadata":` + meta + `}}}`
		}
		send("evt_6", "invoice.paid", t0+32, inv("paid"), false)
		send("evt_6", "invoice.paid", t0+32, inv("paid"), true)
		send("evt_7", "invoice.payment_failed", t0+33, inv("open"), false)
		invoices, err := f.app.store.ListSubjectInvoices(ctx, f.ten.project.ID, subject)
		if err != nil {
			t.Fatal(err)
		}
		if len(invoices) != 1 || invoices[0].Status != "paid" || invoices[0].Amount != 2900 || invoices[0].Currency != "usd" ||
			invoices[0].SubscriptionID != "sub_1" || invoices[0].PaidAt == nil || invoices[0].PaidAt.Unix() != t0+32 {
			t.Errorf("invoices %+v", invoices)
		}
		// The paid invoice entered the revenue rollup once (the replay and the late failure did not).
		revenue, err := f.app.store.RevenueDays(ctx, f.ten.project.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantRevenue := []store.RevenueDay{{EnvironmentID: f.env, Day: "2025-11-24", SubjectID: subject, Currency: "usd", Amount: 2900, Invoices: 1}}
		if !reflect.DeepEqual(revenue, wantRevenue) {
			t.Errorf("revenue rollup %+v, want %+v", revenue, wantRevenue)
		}
		// The subject's activity carries its billing state and lifetime revenue.
		res = f.call(RoleViewer, "GET", f.prj+"/subjects/"+subject+"/activity", "")
		var activity struct {
			Data struct {
				Revenue map[string]int64 `json:"revenue"`
				Billing map[string]any   `json:"billing"`
			} `json:"data"`
		}
		if res.Code != http.StatusOK || json.Unmarshal(res.Body.Bytes(), &activity) != nil {
			t.Fatalf("subject activity: %d %s", res.Code, res.Body)
		}
		wantBilling := map[string]any{"status": "active", "plan": "pro", "environmentId": f.env, "currentPeriodEnd": "2026-01-23T16:00:00Z"}
		if !reflect.DeepEqual(activity.Data.Billing, wantBilling) || activity.Data.Revenue["usd"] != 2900 {
			t.Errorf("subject activity revenue %v billing %v, want usd 2900 and %v", activity.Data.Revenue, activity.Data.Billing, wantBilling)
		}

		send("evt_8", "customer.created", t0+34, `{"id":"cus_1","object":"customer"}`, false) // ignored
		send("evt_4", "customer.subscription.deleted", t0+40, sub("canceled", p2, p2End), false)
		grantOnly := `{"data":{"entitlements":[` + grantItem + `],"features":{"seats":25},"subjectId":"` + subject + `"}}`
		if got := f.entitlementsOf(t, subject); got != grantOnly {
			t.Fatalf("after deletion:\n got %s\nwant %s", got, grantOnly)
		}
		// Nothing revives a canceled subscription.
		send("evt_5", "customer.subscription.updated", t0+50, sub("active", p2+1, p2End+1), false)
		if st := state(); st.Status != "canceled" {
			t.Errorf("after evt_5 %+v", st)
		}
		if got := f.entitlementsOf(t, subject); got != grantOnly {
			t.Errorf("after evt_5: %s", got)
		}
		if n := auditActions(t, f.app, f.ten.project.ID, "entitlement_grant.create"); n != 1 {
			t.Errorf("entitlement_grant.create rows = %d, want 1", n)
		}
		if logs := f.app.logs.String(); strings.Contains(logs, testStripeKey) || strings.Contains(logs, testWebhookSecret) ||
			strings.Contains(logs, "level=ERROR") {
			t.Errorf("log:\n%s", logs)
		}
	})
}
