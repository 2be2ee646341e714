package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestCheckout runs checkouts against stripe-mock: validation before anything is reserved,
// the Stripe call's parameters, replays without a second call, a reused key with another body,
// and concurrent requests with one key making exactly one Stripe call.
func TestCheckout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		f := newBillingFixture(t, b)
		other := f.app.newTenancy(t)
		staging := f.ten.project.Environments[1].ID
		f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","stripePriceIds":{"`+
			f.env+`":"price_1ProMonthly","`+staging+`":"price_1ProStaging"},"entitlements":{"sso":true}}`)
		f.createPlan(t, `{"key":"lifetime","name":"Lifetime","amount":9900,"currency":"eur","interval":"one_time","stripePriceIds":{"`+f.env+`":"price_1Lifetime"}}`)
		f.createPlan(t, `{"key":"unpriced","name":"Unpriced","amount":100,"currency":"usd","interval":"year"}`)
		oldID := f.createPlan(t, `{"key":"old","name":"Old","amount":100,"currency":"usd","interval":"year","stripePriceIds":{"`+f.env+`":"price_1Old"}}`)
		f.call(RoleOwner, "POST", f.prj+"/billing/plans/"+oldID+"/archive", "")
		f.connect(t)

		checkout := f.prj + "/billing/checkout"
		body := func(env, plan, success, cancel string) string {
			return `{"environmentId":"` + env + `","subjectId":"usr_buyer1","planKey":"` + plan + `","successUrl":"` + success + `","cancelUrl":"` + cancel + `"}`
		}
		ok := body(f.env, "pro", "https://app.example.com/billing/done", testBaseURL+"/billing")
		key := "key-0123456789abcdef"
		var first string
		f.run(t, []billingStep{
			{name: "no idempotency key", who: RoleBilling, method: "POST", path: checkout, body: ok, status: 400, title: "Validation failed",
				paths: []string{"header.idempotency-key"}},
			{name: "idempotency key too short", who: RoleBilling, method: "POST", path: checkout, body: ok, headers: []string{"idempotency-key", "short-key-15chr"},
				status: 400, title: "Validation failed", paths: []string{"header.idempotency-key"}},
			{name: "idempotency key too long", who: RoleBilling, method: "POST", path: checkout, body: ok, headers: []string{"idempotency-key", strings.Repeat("k", 256)},
				status: 400, title: "Validation failed", paths: []string{"header.idempotency-key"}},
			{name: "return URLs off the allow-list", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(f.env, "pro", "https://evil.example.net/done", "https://app.example.com.evil.net/x"), status: 400, title: "Validation failed",
				paths: []string{"body.successUrl", "body.cancelUrl"}},
			{name: "return URL with credentials", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(f.env, "pro", "https://user@app.example.com/done", testBaseURL+"/x"), status: 400, title: "Validation failed",
				paths: []string{"body.successUrl"}},
			{name: "viewer may not", who: RoleViewer, method: "POST", path: checkout, body: ok, headers: []string{"idempotency-key", key},
				status: 403, title: "Permission denied"},
			{name: "environment of another project", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(other.project.Environments[0].ID, "pro", testBaseURL+"/a", testBaseURL+"/b"), status: 404, title: "Not found"},
			{name: "unknown plan", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(f.env, "gold", testBaseURL+"/a", testBaseURL+"/b"), status: 404, title: "Not found"},
			{name: "archived plan", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(f.env, "old", testBaseURL+"/a", testBaseURL+"/b"), status: 409, title: "The plan is archived"},
			{name: "plan without a price here", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(f.env, "unpriced", testBaseURL+"/a", testBaseURL+"/b"), status: 409, title: "The plan has no Stripe price for this environment"},
			{name: "environment not connected", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(staging, "pro", testBaseURL+"/a", testBaseURL+"/b"), status: 409, title: "The environment has no payment processor connection"},
			{name: "created", who: RoleBilling, method: "POST", path: checkout, body: ok, headers: []string{"idempotency-key", key}, status: 201,
				check: func(t *testing.T, res response) {
					first = res.Body.String()
					var out envelope[struct {
						ID, URL, ExpiresAt, Status, EnvironmentID, SubjectID, PlanKey string
					}]
					if err := json.Unmarshal(res.Body.Bytes(), &out); err != nil {
						t.Fatal(err)
					}
					d := out.Data
					if !strings.HasPrefix(d.ID, "cs_") || d.URL == "" || d.ExpiresAt == "" || d.Status == "" ||
						d.EnvironmentID != f.env || d.SubjectID != "usr_buyer1" || d.PlanKey != "pro" {
						t.Errorf("checkout %+v", d)
					}
					if n := f.transport.calls.Load(); n != 1 {
						t.Errorf("stripe calls = %d, want 1 (validation failures call nothing)", n)
					}
					gotKey, form := f.transport.last()
					v, _ := url.ParseQuery(form)
					if gotKey != key || v.Get("mode") != "subscription" || v.Get("client_reference_id") != "usr_buyer1" ||
						v.Get("line_items[0][price]") != "price_1ProMonthly" || v.Get("line_items[0][quantity]") != "1" ||
						v.Get("metadata[plan_key]") != "pro" || v.Get("metadata[subject_id]") != "usr_buyer1" ||
						v.Get("metadata[environment_id]") != f.env || v.Get("metadata[project_id]") != f.ten.project.ID ||
						v.Get("subscription_data[metadata][subject_id]") != "usr_buyer1" || v.Get("success_url") != "https://app.example.com/billing/done" {
						t.Errorf("stripe request key %q form %v", gotKey, v)
					}
				}},
			{name: "replay: same response, no second call", who: RoleBilling, method: "POST", path: checkout, body: ok, headers: []string{"idempotency-key", key}, status: 201,
				check: func(t *testing.T, res response) {
					if res.Body.String() != first {
						t.Errorf("replay body %s, want %s", res.Body, first)
					}
					if n := f.transport.calls.Load(); n != 1 {
						t.Errorf("stripe calls = %d, want 1", n)
					}
				}},
			{name: "same key, another body", who: RoleOwner, method: "POST", path: checkout, headers: []string{"idempotency-key", key},
				body: body(f.env, "pro", testBaseURL+"/other", testBaseURL+"/b"), status: 409, title: "Idempotency key already used with a different request",
				check: func(t *testing.T, res response) {
					if n := f.transport.calls.Load(); n != 1 {
						t.Errorf("stripe calls = %d, want 1", n)
					}
				}},
			{name: "the same key in another project is another request", who: RoleOwner, method: "POST", path: "/api/v1/projects/" + other.project.ID + "/billing/checkout",
				headers: []string{"idempotency-key", key}, body: ok, status: 404, title: "Not found"},
			{name: "one-time plan pays once", who: RoleBilling, method: "POST", path: checkout, headers: []string{"idempotency-key", "key-lifetime-000000001"},
				body: body(f.env, "lifetime", testBaseURL+"/a", testBaseURL+"/b"), status: 201, check: func(t *testing.T, res response) {
					_, form := f.transport.last()
					v, _ := url.ParseQuery(form)
					if v.Get("mode") != "payment" || v.Get("payment_intent_data[metadata][plan_key]") != "lifetime" || v.Has("subscription_data[metadata][plan_key]") {
						t.Errorf("stripe request form %v", v)
					}
				}},
		})

		t.Run("concurrent requests with one key make one Stripe call", func(t *testing.T) {
			before := f.transport.calls.Load()
			const n = 8
			var wg sync.WaitGroup
			results := make([]response, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = f.call(RoleBilling, "POST", checkout, body(f.env, "pro", testBaseURL+"/c", testBaseURL+"/c"), "idempotency-key", "key-concurrent-0000001")
				}()
			}
			wg.Wait()
			if calls := f.transport.calls.Load() - before; calls != 1 {
				t.Errorf("stripe calls = %d, want 1", calls)
			}
			created := ""
			for _, res := range results {
				switch res.Code {
				case http.StatusCreated:
					if created != "" && res.Body.String() != created {
						t.Errorf("two different answers:\n%s\n%s", created, res.Body)
					}
					created = res.Body.String()
				case http.StatusConflict:
					res.wantProblem(t, 409, kindConflict, "A request with this idempotency key is in progress")
				default:
					t.Errorf("status %d: %s", res.Code, res.Body)
				}
			}
			if created == "" {
				t.Error("no request created the session")
			}
			// Once the first finished, a retry gets its answer.
			res := f.call(RoleBilling, "POST", checkout, body(f.env, "pro", testBaseURL+"/c", testBaseURL+"/c"), "idempotency-key", "key-concurrent-0000001")
			if res.Code != 201 || res.Body.String() != created {
				t.Errorf("retry %d %s, want %s", res.Code, res.Body, created)
			}
		})
		t.Run("audited", func(t *testing.T) {
			if rows := auditActions(t, f.app, f.ten.project.ID, "billing.checkout"); rows != 3 {
				t.Errorf("billing.checkout rows = %d, want 3", rows)
			}
		})
	})
}

// TestCheckoutProcessorFailure: when Stripe cannot be reached the answer is 502 and the key is
// freed, so a retry calls Stripe again.
func TestCheckoutProcessorFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		tr := &countingTransport{}
		cfg := testConfig()
		cfg.StripeAPIBase = "http://127.0.0.1:1" // nothing listens
		cfg.StripeHTTPClient = &http.Client{Transport: tr}
		app := newTestApp(t, b.Open(t), cfg)
		f := &billingFixture{app: app, ten: app.newTenancy(t), transport: tr}
		f.env, f.prj = f.ten.project.Environments[0].ID, "/api/v1/projects/"+f.ten.project.ID
		f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","stripePriceIds":{"`+f.env+`":"price_1Pro"}}`)
		f.connect(t)
		req := `{"environmentId":"` + f.env + `","subjectId":"usr_1","planKey":"pro","successUrl":"` + testBaseURL + `/a","cancelUrl":"` + testBaseURL + `/b"}`
		for i := range 2 {
			res := f.call(RoleOwner, "POST", f.prj+"/billing/checkout", req, "idempotency-key", "key-unreachable-0001")
			res.wantProblem(t, 502, "http-502", "The payment processor refused the request")
			if strings.Contains(res.Body.String(), "127.0.0.1") || strings.Contains(res.Body.String(), testStripeKey) {
				t.Errorf("problem leaks details: %s", res.Body)
			}
			if n := tr.calls.Load(); n < int64(i+1) {
				t.Errorf("attempt %d: stripe calls = %d; the key was not freed", i+1, n)
			}
		}
	})
}

// auditActions counts the project's audit rows with action.
func auditActions(t *testing.T, app *testApp, projectID, action string) int {
	t.Helper()
	n := 0
	for _, e := range auditEntries(t, app.store, action) {
		if e.ProjectID == projectID {
			n++
		}
	}
	return n
}

// TestCheckoutStaleReservation: a key reserved by a process that died before Stripe answered
// is "in progress" until store.CheckoutReservationTimeout has passed, then taken over.
func TestCheckoutStaleReservation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		url := b.URL(t)
		f := newBillingFixtureOn(t, openURL(t, url))
		f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","stripePriceIds":{"`+f.env+`":"price_1Pro"}}`)
		f.connect(t)
		const key = "key-dead-process-0001"
		ctx := context.Background()
		if err := f.app.store.InTx(ctx, func(tx *store.Tx) error {
			_, _, err := tx.ReserveCheckout(ctx, f.ten.project.ID, key, "hash-of-the-dead-request")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		req := `{"environmentId":"` + f.env + `","subjectId":"usr_1","planKey":"pro","successUrl":"` + testBaseURL + `/a","cancelUrl":"` + testBaseURL + `/b"}`
		// The dead request's body is unknown: a different hash, so a conflict either way.
		f.call(RoleOwner, "POST", f.prj+"/billing/checkout", req, "idempotency-key", key).
			wantProblem(t, 409, kindConflict, "Idempotency key already used with a different request")
		stale := time.Now().Add(-store.CheckoutReservationTimeout - time.Minute).UTC().Format("2006-01-02T15:04:05.000000Z")
		db := rawDB(t, url)
		if _, err := db.Exec(db.Rebind("UPDATE checkout_requests SET reserved_at = ? WHERE idempotency_key = ?"), stale, key); err != nil {
			t.Fatal(err)
		}
		res := f.call(RoleOwner, "POST", f.prj+"/billing/checkout", req, "idempotency-key", key)
		if res.Code != 201 || f.transport.calls.Load() != 1 {
			t.Fatalf("after the timeout: %d %s, stripe calls %d", res.Code, res.Body, f.transport.calls.Load())
		}
	})
}

// disconnectingTransport plays a client that goes away in the middle of its checkout: armed
// with the request's cancel function, it cancels the request's context on the Checkout Session
// creation, before the call goes out (the Stripe call fails) or once Stripe's answer has been
// read (the call succeeds and its result is still to be recorded).
type disconnectingTransport struct {
	next        http.RoundTripper
	afterAnswer bool
	mu          sync.Mutex
	cancel      context.CancelFunc
}

func (d *disconnectingTransport) arm(cancel context.CancelFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancel = cancel
}

func (d *disconnectingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	d.mu.Lock()
	cancel := d.cancel
	d.cancel = nil
	d.mu.Unlock()
	if cancel == nil || r.Method != http.MethodPost || r.URL.Path != "/v1/checkout/sessions" {
		return d.next.RoundTrip(r)
	}
	if !d.afterAnswer {
		cancel()
		return d.next.RoundTrip(r)
	}
	res, err := d.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	cancel()
	return res, nil
}

// TestCheckoutClientDisconnects: a client that disconnects during its checkout leaves no
// reservation behind for store.CheckoutReservationTimeout. When the Stripe call failed, the key
// is released and a retry calls Stripe again; when it succeeded, the session is recorded (and
// audited) and a retry gets it without a second call.
func TestCheckoutClientDisconnects(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		for _, afterAnswer := range []bool{false, true} {
			name := "during the Stripe call"
			if afterAnswer {
				name = "after Stripe answered"
			}
			t.Run(name, func(t *testing.T) {
				counting := &countingTransport{}
				tr := &disconnectingTransport{next: counting, afterAnswer: afterAnswer}
				cfg := testConfig()
				cfg.StripeAPIBase = startStripeMock(t)
				cfg.StripeHTTPClient = &http.Client{Transport: tr, Timeout: 20 * time.Second}
				app := newTestApp(t, b.Open(t), cfg)
				f := &billingFixture{app: app, ten: app.newTenancy(t), transport: counting}
				f.env, f.prj = f.ten.project.Environments[0].ID, "/api/v1/projects/"+f.ten.project.ID
				f.createPlan(t, `{"key":"pro","name":"Pro","amount":2900,"currency":"usd","interval":"month","stripePriceIds":{"`+f.env+`":"price_1Pro"}}`)
				f.connect(t)
				const key = "key-client-went-away-01"
				body := `{"environmentId":"` + f.env + `","subjectId":"usr_1","planKey":"pro","successUrl":"` + testBaseURL + `/a","cancelUrl":"` + testBaseURL + `/b"}`

				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				tr.arm(cancel)
				r := f.ten.members[RoleOwner].as(request{method: "POST", path: f.prj + "/billing/checkout", body: body,
					headers: map[string]string{"idempotency-key": key}})
				req := httptest.NewRequestWithContext(ctx, r.method, r.path, strings.NewReader(r.body))
				req.RemoteAddr = "192.0.2.10:51234"
				req.Header.Set("Content-Type", "application/json")
				for k, v := range r.headers {
					req.Header.Set(k, v)
				}
				app.srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
				if ctx.Err() == nil {
					t.Fatal("the request's context was never cancelled: the transport did not see the checkout")
				}
				calls := counting.calls.Load()
				if calls == 0 {
					t.Fatal("no Checkout Session creation reached the transport")
				}

				// The client retries with the same key at once, well within the takeover timeout.
				res := f.call(RoleOwner, "POST", f.prj+"/billing/checkout", body, "idempotency-key", key)
				if res.Code != http.StatusCreated {
					t.Fatalf("retry: %d %s; the reservation was left behind", res.Code, res.Body)
				}
				retried := counting.calls.Load() - calls
				switch {
				case afterAnswer && retried != 0:
					t.Errorf("retry called Stripe %d times; the first session was not recorded", retried)
				case !afterAnswer && retried == 0:
					t.Error("retry did not call Stripe again")
				}
				if afterAnswer {
					if rows := auditActions(t, app, f.ten.project.ID, "billing.checkout"); rows != 1 {
						t.Errorf("billing.checkout rows = %d, want 1", rows)
					}
				}
			})
		}
	})
}
