package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runWebhooks covers the webhook rows: endpoints per project, the audit hook in the entry's
// transaction, attempts recorded once per (outbox row, attempt) with the next one pending, and
// the newest-first paging of attempts.
func runWebhooks(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Endpoints", func(t *testing.T) { testWebhookEndpoints(t, open) })
	t.Run("AuditHook", func(t *testing.T) { testAuditHook(t, open) })
	t.Run("Attempts", func(t *testing.T) { testWebhookAttempts(t, open) })
}

func webhookProject(t *testing.T, s *store.Store) store.Project {
	t.Helper()
	ctx := testContext(t)
	owner := store.User{Name: "Owner", Email: "owner@hooks.example.com"}
	org := store.Organization{Name: "Hooks", Slug: "hooks"}
	prj := store.Project{Name: "Hooks", Slug: "hooks"}
	if err := s.InTx(ctx, func(tx *store.Tx) error {
		return CreateOwnedProject(ctx, tx, &owner, "!none", &org, &prj)
	}); err != nil {
		t.Fatal(err)
	}
	return prj
}

func testWebhookEndpoints(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	prj := webhookProject(t, s)
	e := store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), ProjectID: prj.ID, URL: "https://203.0.113.10/h",
		EventTypes: []string{"config.update", "subject.delete"}, Secret: "sealed", EnvironmentID: prj.Environments[0].ID}
	if err := s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateWebhookEndpoint(ctx, &e) }); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx *store.Tx) error {
		return tx.CreateWebhookEndpoint(ctx, &store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), ProjectID: prj.ID})
	}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("create without url: %v, want ErrInvalid", err)
	}
	got, err := s.WebhookEndpoint(ctx, prj.ID, e.ID)
	if err != nil || got.URL != e.URL || fmt.Sprint(got.EventTypes) != "[config.update subject.delete]" ||
		got.EnvironmentID != prj.Environments[0].ID || got.DisabledAt != nil || got.Secret != "sealed" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := s.WebhookEndpoint(ctx, "prj_other", e.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another project's endpoint: %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		typ, env string
		want     bool
	}{
		{"config.update", prj.Environments[0].ID, true}, {"config.update", prj.Environments[1].ID, false},
		{"config.update", "", false}, {"project.update", prj.Environments[0].ID, false},
	} {
		if got.Subscribes(c.typ, c.env) != c.want {
			t.Errorf("Subscribes(%s, %q) = %v", c.typ, c.env, !c.want)
		}
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	got.DisabledAt, got.DisabledReason, got.EventTypes, got.EnvironmentID = &now, store.WebhookDisabledManual, []string{"*"}, ""
	if err := s.InTx(ctx, func(tx *store.Tx) error { return tx.UpdateWebhookEndpoint(ctx, &got) }); err != nil {
		t.Fatal(err)
	}
	got, _ = s.WebhookEndpoint(ctx, prj.ID, e.ID)
	if got.DisabledAt == nil || !got.DisabledAt.Equal(now) || got.Subscribes("anything", "") {
		t.Errorf("after disabling %+v", got)
	}
	got.DisabledAt = nil
	if !got.Subscribes("anything", "") {
		t.Error("an enabled * endpoint without environment does not subscribe to everything")
	}
	e1, err := s.RecordWebhookEndpointOutcome(ctx, e.ID, false, now)
	if err != nil || e1.FailingSince == nil || !e1.FailingSince.Equal(now) {
		t.Fatalf("first failure: %+v, %v", e1.FailingSince, err)
	}
	e2, _ := s.RecordWebhookEndpointOutcome(ctx, e.ID, false, now.Add(time.Hour))
	if !e2.FailingSince.Equal(now) {
		t.Errorf("a second failure moved the start of the run to %v", e2.FailingSince)
	}
	if e3, _ := s.RecordWebhookEndpointOutcome(ctx, e.ID, true, now.Add(2*time.Hour)); e3.FailingSince != nil {
		t.Error("a success did not end the run of failures")
	}
	if err := s.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteWebhookEndpoint(ctx, prj.ID, e.ID) }); err != nil {
		t.Fatal(err)
	}
	if list, err := s.WebhookEndpoints(ctx, prj.ID); err != nil || len(list) != 0 {
		t.Errorf("after delete: %v, %v", list, err)
	}
}

func testAuditHook(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	var seen []string
	refuse := errors.New("refused by the hook")
	s.OnAudit(func(_ context.Context, tx *store.Tx, e store.AuditEntry) error {
		if e.Action == "test.refused" {
			return refuse
		}
		// The hook writes in the entry's transaction.
		seen = append(seen, e.ID)
		return tx.InsertWebhookEvent(ctx, &store.WebhookEvent{ID: e.ID, ProjectID: "prj_x", Type: e.Action, Body: "{}"})
	})
	ok := store.AuditEntry{ActorType: store.ActorSystem, Action: "test.accepted"}
	if err := s.InTx(ctx, func(tx *store.Tx) error { return tx.AppendAudit(ctx, &ok) }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != ok.ID {
		t.Fatalf("the hook saw %v, want [%s]", seen, ok.ID)
	}
	if ev, err := s.WebhookEvent(ctx, ok.ID); err != nil || ev.Type != "test.accepted" {
		t.Fatalf("the hook's write: %+v, %v", ev, err)
	}
	bad := store.AuditEntry{ActorType: store.ActorSystem, Action: "test.refused"}
	if err := s.InTx(ctx, func(tx *store.Tx) error { return tx.AppendAudit(ctx, &bad) }); !errors.Is(err, refuse) {
		t.Fatalf("a refusing hook: %v", err)
	}
	if got, _ := s.ListAudit(ctx, store.AuditFilter{Action: "test.refused"}); len(got) != 0 {
		t.Fatal("the entry the hook refused was committed")
	}
}

func testWebhookAttempts(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	prj := webhookProject(t, s)
	e := store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), ProjectID: prj.ID, URL: "https://203.0.113.10/h",
		EventTypes: []string{"*"}, Secret: "sealed"}
	first := time.Now().UTC().Truncate(time.Microsecond)
	d := store.WebhookDelivery{EndpointID: e.ID, EventID: "aud_1", EventType: "config.update", OutboxID: "out_1", Attempt: 1, NextAttemptAt: &first}
	if err := s.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateWebhookEndpoint(ctx, &e); err != nil {
			return err
		}
		return tx.InsertWebhookDelivery(ctx, &d)
	}); err != nil {
		t.Fatal(err)
	}
	retry := first.Add(5 * time.Second)
	if err := s.RecordWebhookAttempt(ctx, store.WebhookDelivery{EndpointID: e.ID, EventID: "aud_1", EventType: "config.update",
		OutboxID: "out_1", Attempt: 1, Status: store.DeliveryFailed, ResponseCode: 503, LatencyMs: 12, Error: "503"}, &retry); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordWebhookAttempt(ctx, store.WebhookDelivery{EndpointID: e.ID, EventID: "aud_1", EventType: "config.update",
		OutboxID: "out_1", Attempt: 2, Status: store.DeliverySucceeded, ResponseCode: 200, LatencyMs: 7}, nil); err != nil {
		t.Fatal(err)
	}
	// An attempt with no pending row (its worker died before writing one) is written.
	if err := s.RecordWebhookAttempt(ctx, store.WebhookDelivery{EndpointID: e.ID, EventID: "aud_2", EventType: "config.update",
		OutboxID: "out_2", Attempt: 3, Status: store.DeliverySucceeded, ResponseCode: 204, LatencyMs: 1}, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after *store.DeliveryPosition
	for range 5 {
		ds, more, err := s.WebhookDeliveries(ctx, e.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			next := "-"
			if d.NextAttemptAt != nil {
				next = d.NextAttemptAt.Sub(first).String()
			}
			got = append(got, fmt.Sprintf("%s#%d:%s:%d:%s", d.OutboxID, d.Attempt, d.Status, d.ResponseCode, next))
		}
		if !more {
			break
		}
		after = &store.DeliveryPosition{CreatedAt: ds[len(ds)-1].CreatedAt, ID: ds[len(ds)-1].ID}
	}
	want := "[out_2#3:succeeded:204:- out_1#2:succeeded:200:- out_1#1:failed:503:5s]"
	if fmt.Sprint(got) != want {
		t.Errorf("attempts newest first %v, want %s", got, want)
	}
	// History: nothing is older than an hour ago; everything is older than an hour ahead.
	if n, err := s.DeleteOldWebhookHistory(ctx, time.Now().Add(-time.Hour), 100); err != nil || n != 0 {
		t.Errorf("sweep an hour ago: %d, %v", n, err)
	}
	if n, err := s.DeleteOldWebhookHistory(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 3 {
		t.Errorf("sweep an hour ahead: %d rows, %v; want the 3 attempts", n, err)
	}
}
