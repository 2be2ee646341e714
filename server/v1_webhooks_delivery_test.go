package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// webhookTestConfig allows the test receivers on 127.0.0.1 and retries after 50, 100 and
// 200 ms.
func webhookTestConfig() Config {
	cfg := testConfig()
	cfg.WebhookAllowPrivate = true
	cfg.WebhookRetrySchedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	return cfg
}

type eventBody struct {
	ID, Type, Timestamp, ProjectID, EnvironmentID string
	Data                                          map[string]any
}

func decodeEvent(t *testing.T, h receivedHook) eventBody {
	t.Helper()
	var e eventBody
	if err := json.Unmarshal(h.Body, &e); err != nil {
		t.Fatalf("event body %s: %v", h.Body, err)
	}
	return e
}

type deliveryBody struct {
	ID, EventID, EventType, Status string
	ResponseCode, LatencyMs        *int
	Attempt                        int
	NextAttemptAt                  *string
}

func TestWebhookDelivery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestAppWith(t, b.Open(t), webhookTestConfig(), testDeps{webhooks: true})
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		prj := "/api/v1/projects/" + ten.project.ID
		rcv := newHookReceiver(t)
		var ep envelope[endpointBody]
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints",
			body: `{"url":"` + rcv.URL + `/hook","eventTypes":["*"]}`})).decode(t, http.StatusCreated, &ep)
		secret := ep.Data.Secret

		// Three mutations: each audit entry is an event with the entry's id.
		env := ten.project.Environments[0].ID
		for _, r := range []request{
			{method: "PATCH", path: prj, body: `{"name":"Renamed"}`},
			{method: "PUT", path: "/api/v1/environments/" + env + "/configs/DB_PASSWORD", body: `{"value":"hunter2-secret","secret":true}`},
			{method: "DELETE", path: prj + "/subjects/" + ten.subjectID},
		} {
			if res := app.do(owner.as(r)); res.Code >= 300 {
				t.Fatalf("%s %s: %d %s", r.method, r.path, res.Code, res.Body)
			}
		}
		var logs envelope[[]auditBody]
		app.do(owner.as(request{method: "GET", path: prj + "/audit-logs"})).decode(t, http.StatusOK, &logs)
		// The newest four: the endpoint's creation is older than the three, and is an event too
		// (it was committed with the endpoint, which subscribes to every type).
		waitFor(t, 10*time.Second, "4 deliveries", func() bool { return len(rcv.received()) >= 4 })
		got := rcv.received()
		byID := map[string]eventBody{}
		for _, h := range got {
			if !verifySignature(secret, h) {
				t.Errorf("delivery %s does not verify with the endpoint's secret", h.ID)
			}
			e := decodeEvent(t, h)
			if e.ID != h.ID || e.ProjectID != ten.project.ID {
				t.Errorf("event %+v under webhook-id %s", e, h.ID)
			}
			byID[h.ID] = e
		}
		wantTypes := map[string]string{}
		for _, l := range logs.Data[:4] {
			wantTypes[l.ID] = l.Action
		}
		if len(byID) != 4 {
			t.Fatalf("got events %v, want the audit ids %v", byID, wantTypes)
		}
		for id, typ := range wantTypes {
			if byID[id].Type != typ {
				t.Errorf("event %s: type %q, want %q", id, byID[id].Type, typ)
			}
		}
		// Order per endpoint: oldest first.
		var order []string
		for _, h := range got {
			order = append(order, byID[h.ID].Type)
		}
		if strings.Join(order, ",") != "webhook_endpoint.create,project.update,config.update,subject.delete" {
			t.Errorf("delivery order %v", order)
		}
		for _, e := range byID {
			raw, _ := json.Marshal(e)
			if strings.Contains(string(raw), "hunter2") {
				t.Errorf("event %s carries the config value: %s", e.Type, raw)
			}
			switch e.Type {
			case "subject.delete":
				if fmt.Sprint(e.Data) != fmt.Sprint(map[string]any{"subjectId": ten.subjectID}) {
					t.Errorf("subject.delete data %v, want only the subject id", e.Data)
				}
			case "config.update":
				if e.EnvironmentID != env {
					t.Errorf("config.update environmentId %q, want %q", e.EnvironmentID, env)
				}
			}
		}

		// Deliveries: one succeeded attempt each, newest first.
		var ds envelope[[]deliveryBody]
		app.do(owner.as(request{method: "GET", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/deliveries"})).decode(t, http.StatusOK, &ds)
		if len(ds.Data) != 4 || ds.Data[0].EventType != "subject.delete" || ds.Data[3].EventType != "webhook_endpoint.create" {
			t.Fatalf("deliveries %+v", ds.Data)
		}
		for _, d := range ds.Data {
			if d.Status != "succeeded" || d.ResponseCode == nil || *d.ResponseCode != 204 || d.Attempt != 1 || d.LatencyMs == nil || d.NextAttemptAt != nil {
				t.Errorf("delivery %+v", d)
			}
		}

		// A failing receiver: attempts per the schedule, each one an item, then success.
		var failures atomic.Int32
		rcv.mu.Lock()
		rcv.status = func() int {
			if failures.Add(1) <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}
		rcv.mu.Unlock()
		before := len(rcv.received())
		if res := app.do(owner.as(request{method: "PATCH", path: prj, body: `{"name":"Again"}`})); res.Code != 200 {
			t.Fatal(res.Code)
		}
		waitFor(t, 10*time.Second, "three attempts", func() bool { return len(rcv.received()) >= before+3 })
		retried := rcv.received()[before:]
		if retried[0].ID != retried[1].ID || retried[1].ID != retried[2].ID {
			t.Fatalf("retries carry webhook-ids %s %s %s, want one id", retried[0].ID, retried[1].ID, retried[2].ID)
		}
		waitFor(t, 5*time.Second, "the last attempt recorded", func() bool {
			app.do(owner.as(request{method: "GET", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/deliveries?limit=3"})).decode(t, http.StatusOK, &ds)
			return ds.Data[0].Status == "succeeded"
		})
		var states []string
		for _, d := range ds.Data {
			code := 0
			if d.ResponseCode != nil {
				code = *d.ResponseCode
			}
			states = append(states, fmt.Sprintf("%d:%s:%d:%v", d.Attempt, d.Status, code, d.NextAttemptAt != nil))
		}
		if strings.Join(states, " ") != "3:succeeded:200:false 2:failed:503:true 1:failed:503:true" {
			t.Errorf("attempts %v", states)
		}

		// Rotation: deliveries verify with the new secret and, during the overlap, the old.
		var rotated envelope[endpointBody]
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/rotate-secret"})).decode(t, http.StatusOK, &rotated)
		before = len(rcv.received())
		waitFor(t, 10*time.Second, "the rotation's event", func() bool { return len(rcv.received()) > before })
		h := rcv.received()[before]
		if decodeEvent(t, h).Type != "webhook_endpoint.rotate_secret" || !verifySignature(rotated.Data.Secret, h) || !verifySignature(secret, h) {
			t.Errorf("after rotation: type %s, verifies with new %v, old %v", decodeEvent(t, h).Type,
				verifySignature(rotated.Data.Secret, h), verifySignature(secret, h))
		}
		// Past the overlap the old secret no longer signs.
		expireOverlap(t, app, ten.project.ID, ep.Data.ID)
		var ping struct{ Data struct{ EventID string } }
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/test"})).decode(t, http.StatusAccepted, &ping)
		waitFor(t, 10*time.Second, "the ping", func() bool {
			return slices.ContainsFunc(rcv.received(), func(h receivedHook) bool { return h.ID == ping.Data.EventID })
		})
		for _, h := range rcv.received() {
			if h.ID == ping.Data.EventID {
				if decodeEvent(t, h).Type != "ping" || !verifySignature(rotated.Data.Secret, h) || verifySignature(secret, h) {
					t.Errorf("ping %s: verifies with new %v, old %v (want true, false)", h.Body,
						verifySignature(rotated.Data.Secret, h), verifySignature(secret, h))
				}
			}
		}

		// Redeliver: the same event again, 202.
		app.do(owner.as(request{method: "GET", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/deliveries"})).decode(t, http.StatusOK, &ds)
		last := ds.Data[len(ds.Data)-1]
		var queued struct{ Data struct{ EventID string } }
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/deliveries/" + last.ID + "/redeliver"})).
			decode(t, http.StatusAccepted, &queued)
		if queued.Data.EventID != last.EventID {
			t.Fatalf("redeliver queued %s, want %s", queued.Data.EventID, last.EventID)
		}
		waitFor(t, 10*time.Second, "the redelivery", func() bool {
			n := 0
			for _, h := range rcv.received() {
				if h.ID == last.EventID {
					n++
				}
			}
			return n == 2
		})
		// Disabled: redeliver is 409, and events are not queued for it.
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/disable"})).decode(t, http.StatusOK, &rotated)
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/deliveries/" + last.ID + "/redeliver"})).
			wantProblem(t, http.StatusConflict, "conflict", "The webhook endpoint is disabled")
		app.do(owner.as(request{method: "GET", path: prj + "/webhook-endpoints/" + ep.Data.ID + "/deliveries?cursor=bad"})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
	})
}

// expireOverlap ends the endpoint's rotation overlap now, as 24 hours passing would.
func expireOverlap(t *testing.T, app *testApp, projectID, id string) {
	t.Helper()
	err := app.store.InTx(t.Context(), func(tx *store.Tx) error {
		e, err := tx.WebhookEndpointForUpdate(t.Context(), projectID, id)
		if err != nil {
			return err
		}
		past := app.store.Now().Add(-time.Second)
		e.PreviousSecretExpiresAt = &past
		return tx.UpdateWebhookEndpoint(t.Context(), &e)
	})
	if err != nil {
		t.Fatal(err)
	}
}
