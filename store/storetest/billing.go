package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runBilling(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("ProcessorConnection", func(t *testing.T) { testProcessorConnection(t, open) })
	t.Run("ProcessorSecretsResealed", func(t *testing.T) { testProcessorReseal(t, open) })
	t.Run("PlanKeyUnique", func(t *testing.T) { testPlanKeyUnique(t, open) })
	t.Run("CheckoutReservation", func(t *testing.T) { testCheckoutReservation(t, open) })
	t.Run("SubscriptionOrder", func(t *testing.T) { testSubscriptionOrder(t, open) })
	t.Run("InvoicePaidIsFinal", func(t *testing.T) { testInvoicePaidIsFinal(t, open) })
	t.Run("EventDedupe", func(t *testing.T) { testEventDedupe(t, open) })
	t.Run("Entitlements", func(t *testing.T) { testEntitlements(t, open) })
}

func testProcessorConnection(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	c := store.ProcessorConnection{EnvironmentID: f.env(0), Provider: store.ProviderStripe, Mode: store.ModeTest,
		KeyLast4: "4242", SecretKey: fakeSealed(1), WebhookSecret: fakeSealed(2)}
	for _, bad := range []store.ProcessorConnection{
		{EnvironmentID: c.EnvironmentID, Provider: "paypal", Mode: "test", KeyLast4: "1", SecretKey: fakeSealed(1), WebhookSecret: fakeSealed(2)},
		{EnvironmentID: c.EnvironmentID, Provider: "stripe", Mode: "test", KeyLast4: "1", SecretKey: "sk_test_plaintext", WebhookSecret: fakeSealed(2)},
		{EnvironmentID: c.EnvironmentID, Provider: "stripe", Mode: "test", KeyLast4: "1", SecretKey: fakeSealed(1), WebhookSecret: "whsec_plaintext"},
	} {
		wantErr(t, f.s, store.ErrInvalid, "invalid connection", func(tx *store.Tx) error {
			_, _, err := tx.PutProcessorConnection(ctx, bad)
			return err
		})
	}
	wantErr(t, f.s, store.ErrNotFound, "unknown environment", func(tx *store.Tx) error {
		x := c
		x.EnvironmentID = "env_nope"
		_, _, err := tx.PutProcessorConnection(ctx, x)
		return err
	})
	var created1, created2 bool
	var first store.ProcessorConnection
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		first, created1, err = tx.PutProcessorConnection(ctx, c)
		return err
	})
	c.Mode, c.KeyLast4 = store.ModeLive, "9999"
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		_, created2, err = tx.PutProcessorConnection(ctx, c)
		return err
	})
	got, err := f.s.ProcessorConnection(ctx, f.env(0))
	if err != nil || !created1 || created2 || got.ID != first.ID || got.Mode != "live" || got.KeyLast4 != "9999" {
		t.Errorf("connection %+v created %v %v err %v", got, created1, created2, err)
	}
	mustTx(t, f.s, func(tx *store.Tx) error { _, err := tx.DeleteProcessorConnection(ctx, f.env(0)); return err })
	if _, err := f.s.ProcessorConnection(ctx, f.env(0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	wantErr(t, f.s, store.ErrNotFound, "delete twice", func(tx *store.Tx) error {
		_, err := tx.DeleteProcessorConnection(ctx, f.env(0))
		return err
	})
}

func testPlanKeyUnique(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	other := newProject(t, f.s, f.project.OrganizationID, "other")
	plan := func(project string) *store.Plan {
		return &store.Plan{ProjectID: project, Key: "pro", Name: "Pro", Amount: 100, Currency: "usd", Interval: store.IntervalMonth,
			Entitlements: map[string]any{"sso": true, "seats": 3}}
	}
	p := plan(f.project.ID)
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreatePlan(ctx, p) })
	wantErr(t, f.s, store.ErrConflict, "duplicate key", func(tx *store.Tx) error { return tx.CreatePlan(ctx, plan(f.project.ID)) })
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreatePlan(ctx, plan(other.ID)) })
	wantErr(t, f.s, store.ErrInvalid, "bad value", func(tx *store.Tx) error {
		x := plan(f.project.ID)
		x.Key, x.Entitlements = "x", map[string]any{"a": "yes"}
		return tx.CreatePlan(ctx, x)
	})
	mustTx(t, f.s, func(tx *store.Tx) error { _, _, err := tx.SetPlanArchived(ctx, f.project.ID, p.ID, true); return err })
	wantErr(t, f.s, store.ErrConflict, "archived keys stay taken", func(tx *store.Tx) error { return tx.CreatePlan(ctx, plan(f.project.ID)) })
	wantErr(t, f.s, store.ErrArchived, "update archived", func(tx *store.Tx) error { return tx.UpdatePlan(ctx, p) })
	got, err := f.s.PlanByKey(ctx, f.project.ID, "pro")
	if err != nil || got.ArchivedAt == nil || got.Entitlements["sso"] != true || got.Entitlements["seats"].(interface{ String() string }).String() != "3" {
		t.Errorf("plan %+v %v", got, err)
	}
}

func testCheckoutReservation(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	reserve := func(hash string) (store.CheckoutRequest, bool) {
		var r store.CheckoutRequest
		var ok bool
		mustTx(t, f.s, func(tx *store.Tx) error {
			var err error
			r, ok, err = tx.ReserveCheckout(ctx, f.project.ID, "key-0123456789abcdef", hash)
			return err
		})
		return r, ok
	}
	if _, ok := reserve("h1"); !ok {
		t.Fatal("first reservation refused")
	}
	if r, ok := reserve("h1"); ok || r.Response != nil || r.RequestHash != "h1" {
		t.Errorf("second reservation %+v %v, want the pending record", r, ok)
	}
	mustTx(t, f.s, func(tx *store.Tx) error {
		return tx.CompleteCheckout(ctx, f.project.ID, "key-0123456789abcdef", `{"id":"cs_1"}`)
	})
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.ReleaseCheckout(ctx, f.project.ID, "key-0123456789abcdef") }) // completed: kept
	if r, ok := reserve("h2"); ok || r.Response == nil || *r.Response != `{"id":"cs_1"}` || r.RequestHash != "h1" || r.CompletedAt == nil {
		t.Errorf("after completion %+v %v", r, ok)
	}
	wantErr(t, f.s, store.ErrNotFound, "complete twice", func(tx *store.Tx) error {
		return tx.CompleteCheckout(ctx, f.project.ID, "key-0123456789abcdef", `{}`)
	})
	// A released reservation can be taken again.
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, _, err := tx.ReserveCheckout(ctx, f.project.ID, "key-released-00000001", "h")
		return err
	})
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.ReleaseCheckout(ctx, f.project.ID, "key-released-00000001") })
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, ok, err := tx.ReserveCheckout(ctx, f.project.ID, "key-released-00000001", "h")
		if err == nil && !ok {
			t.Error("a released key stays reserved")
		}
		return err
	})
}

func testSubscriptionOrder(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p1, p2 := t0.Add(30*24*time.Hour), t0.Add(60*24*time.Hour)
	apply := func(status string, periodEnd *time.Time, event time.Time) (store.Subscription, bool) {
		t.Helper()
		var s store.Subscription
		var applied bool
		mustTx(t, f.s, func(tx *store.Tx) error {
			var err error
			s, applied, err = tx.ApplySubscription(ctx, store.Subscription{ProjectID: f.project.ID, EnvironmentID: f.env(0),
				ProcessorID: "sub_1", SubjectID: "subj", PlanKey: "pro", Status: status, CurrentPeriodEnd: periodEnd, EventCreated: event})
			return err
		})
		return s, applied
	}
	steps := []struct {
		name       string
		status     string
		periodEnd  *time.Time
		event      time.Time
		applied    bool
		wantStatus string
	}{
		{"created", "incomplete", &p1, t0, true, "incomplete"},
		{"paid", "active", &p1, t0.Add(time.Second), true, "active"},
		{"an older event of the period", "incomplete", &p1, t0.Add(-time.Second), false, "active"},
		{"same second, status further along", "past_due", &p1, t0.Add(time.Second), true, "past_due"},
		{"same second, status behind", "active", &p1, t0.Add(time.Second), false, "past_due"},
		{"next period", "active", &p2, t0.Add(time.Minute), true, "active"},
		{"a late event of the previous period, newer timestamp", "past_due", &p1, t0.Add(time.Hour), false, "active"},
		{"no period: a later event", "past_due", nil, t0.Add(2 * time.Hour), true, "past_due"},
		{"canceled", "canceled", &p2, t0.Add(3 * time.Hour), true, "canceled"},
		{"nothing revives it", "active", &p2, t0.Add(4 * time.Hour), false, "canceled"},
	}
	for _, s := range steps {
		got, applied := apply(s.status, s.periodEnd, s.event)
		if applied != s.applied || got.Status != s.wantStatus {
			t.Errorf("%s: applied %v status %s, want %v %s", s.name, applied, got.Status, s.applied, s.wantStatus)
		}
	}
	if got, _ := f.s.SubscriptionByProcessorID(ctx, f.env(0), "sub_1"); got.CurrentPeriodEnd == nil || !got.CurrentPeriodEnd.Equal(p2) {
		t.Errorf("period end %v, want %v (an update without a period keeps it)", got.CurrentPeriodEnd, p2)
	}
	wantErr(t, f.s, store.ErrInvalid, "a new row without a subject", func(tx *store.Tx) error {
		_, _, err := tx.ApplySubscription(ctx, store.Subscription{ProjectID: f.project.ID, EnvironmentID: f.env(0),
			ProcessorID: "sub_2", PlanKey: "pro", Status: "active"})
		return err
	})
}

func testInvoicePaidIsFinal(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	record := func(id, status string) bool {
		var newly bool
		mustTx(t, f.s, func(tx *store.Tx) error {
			var err error
			newly, err = tx.RecordInvoice(ctx, store.Invoice{ProjectID: f.project.ID, EnvironmentID: f.env(0), ProcessorID: id,
				SubjectID: "subj", Status: status, Amount: 500, Currency: "eur"})
			return err
		})
		return newly
	}
	for _, s := range []struct {
		id, status string
		newlyPaid  bool
	}{
		{"in_1", store.InvoicePaid, true},
		{"in_1", store.InvoicePaid, false},
		{"in_1", store.InvoicePaymentFailed, false},
		{"in_2", store.InvoicePaymentFailed, false},
		{"in_2", store.InvoicePaymentFailed, false},
		{"in_2", store.InvoicePaid, true},
		{"in_2", store.InvoicePaid, false},
	} {
		if got := record(s.id, s.status); got != s.newlyPaid {
			t.Errorf("%s %s: newly paid %v, want %v", s.id, s.status, got, s.newlyPaid)
		}
	}
	invoices, err := f.s.ListSubjectInvoices(ctx, f.project.ID, "subj")
	if err != nil || len(invoices) != 2 || invoices[0].Status != "paid" || invoices[1].Status != "paid" {
		t.Errorf("invoices %+v %v", invoices, err)
	}
}

func testEventDedupe(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	for i, want := range []bool{true, false} {
		mustTx(t, f.s, func(tx *store.Tx) error {
			fresh, err := tx.RecordProcessorEvent(ctx, f.env(0), "evt_1", "invoice.paid", time.Now())
			if err == nil && fresh != want {
				t.Errorf("delivery %d: fresh %v, want %v", i+1, fresh, want)
			}
			return err
		})
	}
	// The same event id in another environment is another event.
	mustTx(t, f.s, func(tx *store.Tx) error {
		fresh, err := tx.RecordProcessorEvent(ctx, f.env(1), "evt_1", "invoice.paid", time.Now())
		if err == nil && !fresh {
			t.Error("another environment's event counted as a replay")
		}
		return err
	})
	// A rolled-back application leaves no dedupe row: the retry applies.
	_ = f.s.InTx(ctx, func(tx *store.Tx) error {
		_, _ = tx.RecordProcessorEvent(ctx, f.env(0), "evt_2", "invoice.paid", time.Now())
		return errors.New("apply failed")
	})
	mustTx(t, f.s, func(tx *store.Tx) error {
		fresh, err := tx.RecordProcessorEvent(ctx, f.env(0), "evt_2", "invoice.paid", time.Now())
		if err == nil && !fresh {
			t.Error("a rolled-back event counted as applied")
		}
		return err
	})
}

func testEntitlements(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	now := f.s.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	mustTx(t, f.s, func(tx *store.Tx) error {
		for _, p := range []*store.Plan{
			{ProjectID: f.project.ID, Key: "pro", Name: "Pro", Currency: "usd", Interval: "month", Entitlements: map[string]any{"sso": true}},
			{ProjectID: f.project.ID, Key: "team", Name: "Team", Currency: "usd", Interval: "month", Entitlements: map[string]any{"seats": 10}},
		} {
			if err := tx.CreatePlan(ctx, p); err != nil {
				return err
			}
		}
		for _, s := range []store.Subscription{
			{ProcessorID: "sub_pro", EnvironmentID: f.env(0), PlanKey: "pro", Status: store.StatusTrialing},
			{ProcessorID: "sub_team", EnvironmentID: f.env(1), PlanKey: "team", Status: store.StatusCanceled},
		} {
			s.ProjectID, s.SubjectID = f.project.ID, "subj"
			if _, _, err := tx.ApplySubscription(ctx, s); err != nil {
				return err
			}
		}
		for _, g := range []store.EntitlementGrant{
			{FeatureKey: "beta", Value: true, ExpiresAt: &future},
			{FeatureKey: "old", Value: true, ExpiresAt: &past},
			{FeatureKey: "seats", Value: 2},
		} {
			g.ProjectID, g.SubjectID, g.ActorType = f.project.ID, "subj", store.ActorSystem
			if err := tx.CreateEntitlementGrant(ctx, &g); err != nil {
				return err
			}
		}
		return nil
	})
	keys := func(env string) string {
		ents, err := f.s.SubjectEntitlements(ctx, f.project.ID, "subj", env, now)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, e := range ents {
			out += e.SourceType + ":" + e.FeatureKey + " "
		}
		return out
	}
	if got := keys(""); got != "plan:sso grant:beta grant:seats " {
		t.Errorf("entitlements %q", got)
	}
	if got := keys(f.env(1)); got != "grant:beta grant:seats " {
		t.Errorf("entitlements in env 1 %q", got)
	}
	st, ok, err := f.s.SubjectBillingState(ctx, f.project.ID, "subj", "")
	if err != nil || !ok || st.PlanKey != "pro" || st.Status != "trialing" {
		t.Errorf("billing state %+v %v %v (the entitled subscription wins)", st, ok, err)
	}
	if _, ok, err := f.s.SubjectBillingState(ctx, f.project.ID, "nobody", ""); ok || err != nil {
		t.Errorf("nobody: %v %v", ok, err)
	}
}

// testProcessorReseal: a key rotation re-seals both processor secrets, each with its own
// additional data.
func testProcessorReseal(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env := f.env(2)
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, _, err := tx.PutProcessorConnection(ctx, store.ProcessorConnection{EnvironmentID: env, Provider: store.ProviderStripe,
			Mode: store.ModeLive, KeyLast4: "abcd", SecretKey: "v1.old.c2s", WebhookSecret: "v1.old.d2g"})
		return err
	})
	seen := map[string]string{}
	mustTx(t, f.s, func(tx *store.Tx) error {
		n, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			if v.Table != "processor_connections" {
				return v.Sealed, false, nil
			}
			seen[string(v.AAD)] = v.Sealed
			return "v1.new." + v.Sealed[len("v1.old."):], true, nil
		})
		if err == nil && n != 2 {
			t.Errorf("replaced %d, want 2", n)
		}
		return err
	})
	want := map[string]string{"processor-secret-key:" + env: "v1.old.c2s", "processor-webhook-secret:" + env: "v1.old.d2g"}
	if len(seen) != 2 || seen["processor-secret-key:"+env] != want["processor-secret-key:"+env] ||
		seen["processor-webhook-secret:"+env] != want["processor-webhook-secret:"+env] {
		t.Errorf("fn saw %v, want %v", seen, want)
	}
	c, err := f.s.ProcessorConnection(ctx, env)
	if err != nil || c.SecretKey != "v1.new.c2s" || c.WebhookSecret != "v1.new.d2g" {
		t.Errorf("after reseal %+v %v", c, err)
	}
}
