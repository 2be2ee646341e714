package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestBillingEventsEndToEnd: the processor webhook's changes reach a webhook endpoint as
// signed events — subscription.created/updated/canceled, invoice.paid and
// entitlements.changed — and an entitlement grant is an entitlements.changed too.
func TestBillingEventsEndToEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := webhookTestConfig()
		cfg.StripeAPIBase = startStripeMock(t)
		tr := &countingTransport{}
		cfg.StripeHTTPClient = &http.Client{Transport: tr, Timeout: 20 * time.Second}
		app := newTestAppWith(t, b.Open(t), cfg, testDeps{webhooks: true})
		ten := app.newTenancy(t)
		f := &billingFixture{app: app, ten: ten, env: ten.project.Environments[0].ID,
			prj: "/api/v1/projects/" + ten.project.ID, transport: tr}
		f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","stripePriceIds":{"`+
			f.env+`":"price_1ProMonthly"},"entitlements":{"sso":true}}`)
		f.connect(t)
		rcv := newHookReceiver(t)
		var ep envelope[endpointBody]
		f.call(RoleOwner, "POST", f.prj+"/webhook-endpoints", `{"url":"`+rcv.URL+`","eventTypes":["subscription.created",`+
			`"subscription.updated","subscription.canceled","invoice.paid","entitlements.changed"]}`).decode(t, http.StatusCreated, &ep)

		const subject = "usr_buyer9"
		send := func(id, typ string, created int64, object string) {
			t.Helper()
			res := f.webhook(f.env, testWebhookSecret, event(id, typ, created, object), time.Time{})
			if res.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", typ, res.Code, res.Body)
			}
		}
		meta := `{"project_id":"` + ten.project.ID + `","environment_id":"` + f.env + `","subject_id":"` + subject + `","plan_key":"pro"}`
		sub := func(status string) string {
			return fmt.Sprintf(`{"id":"sub_9","object":"subscription","customer":"cus_9","status":%q,"cancel_at_period_end":false,"metadata":%s,`+
				`"items":{"object":"list","data":[{"id":"si_9","price":{"id":"price_1ProMonthly"},"current_period_start":1764000000,"current_period_end":1766592000}]}}`,
				status, meta)
		}
		res := f.call(RoleBilling, "POST", f.prj+"/billing/checkout", `{"environmentId":"`+f.env+`","subjectId":"`+subject+
			`","planKey":"pro","successUrl":"https://app.example.com/ok","cancelUrl":"https://app.example.com/no"}`, "idempotency-key", "events-key-0000001")
		if res.Code != http.StatusCreated {
			t.Fatalf("checkout: %d %s", res.Code, res.Body)
		}
		const t0 = int64(1764000000)
		send("evt_c1", "checkout.session.completed", t0, `{"id":"cs_test_9","object":"checkout.session","mode":"subscription",`+
			`"client_reference_id":"`+subject+`","customer":"cus_9","subscription":"sub_9","payment_status":"paid","status":"complete","metadata":`+meta+`}`)
		send("evt_c2", "customer.subscription.updated", t0+10, sub("past_due"))
		send("evt_c3", "invoice.paid", t0+20, `{"id":"in_9","object":"invoice","customer":"cus_9","status":"paid","amount_paid":2900,"amount_due":2900,`+
			`"currency":"usd","created":1764000020,"status_transitions":{"paid_at":1764000020},`+
			`"parent":{"type":"subscription_details","subscription_details":{"subscription":"sub_9","metadata":`+meta+`}}}`)
		send("evt_c4", "customer.subscription.deleted", t0+30, sub("canceled"))
		f.call(RoleBilling, "POST", f.prj+"/subjects/"+subject+"/entitlement-grants", `{"featureKey":"seats","value":5}`).
			decode(t, http.StatusCreated, &envelope[map[string]any]{})

		want := []string{
			"subscription.created " + f.env + " status=active",
			"entitlements.changed " + f.env + " reason=subscription",
			"subscription.updated " + f.env + " status=past_due",
			"entitlements.changed " + f.env + " reason=subscription",
			"invoice.paid " + f.env + " amount=2900",
			"subscription.canceled " + f.env + " status=canceled",
			"entitlements.changed " + f.env + " reason=subscription",
			"entitlements.changed  reason=grant",
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("%d events", len(want)), func() bool { return len(rcv.received()) >= len(want) })
		var got []string
		for _, h := range rcv.received() {
			if !verifySignature(ep.Data.Secret, h) {
				t.Errorf("%s does not verify", h.ID)
			}
			e := decodeEvent(t, h)
			if e.Data["subjectId"] != subject || e.ID != h.ID || !strings.HasPrefix(e.ID, "evt_") {
				t.Errorf("event %s: %+v", h.Body, e)
			}
			detail := ""
			switch {
			case e.Data["status"] != nil:
				detail = fmt.Sprint("status=", e.Data["status"])
			case e.Data["reason"] != nil:
				detail = fmt.Sprint("reason=", e.Data["reason"])
			case e.Data["amount"] != nil:
				detail = fmt.Sprint("amount=", e.Data["amount"])
			}
			got = append(got, e.Type+" "+e.EnvironmentID+" "+detail)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
