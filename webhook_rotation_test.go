package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestWebhookRotationWithReferenceLibrary: through a running serve, an endpoint's secret is
// rotated by its owner; afterwards every delivery verifies, with the Standard Webhooks
// reference library, under the new secret and under the old one (the 24-hour overlap).
func TestWebhookRotationWithReferenceLibrary(t *testing.T) {
	node := receiverNode(t)
	f := newRotationFixture(t)
	keyText, key := newKey(t)
	withKeys := f.withKeys(keyText, "")
	env := func(k string) string {
		switch k {
		case "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE":
			return "true"
		case "GATEHOUSE_WEBHOOK_RETRY_SCHEDULE":
			return "1s,1s,1s"
		}
		return withKeys(k)
	}
	st, err := store.Open(context.Background(), f.env("GATEHOUSE_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	projectID, err := st.EnvironmentProject(context.Background(), f.envID)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	rport := reserveReceiverPort(t)
	serveWith(t, env, func(base string) {
		var ep struct {
			Data struct{ ID, Secret string }
		}
		code, body := f.call(t, base, key, http.MethodPost, "/api/v1/projects/"+projectID+"/webhook-endpoints",
			`{"url":"`+rport.url()+`","eventTypes":["config.update"]}`)
		if code != http.StatusCreated || json.Unmarshal(body, &ep) != nil {
			t.Fatalf("create endpoint: %d %s", code, body)
		}
		put := func(name string) {
			t.Helper()
			if code, body := f.call(t, base, key, http.MethodPut, "/api/v1/environments/"+f.envID+"/configs/"+name, `{"value":1}`); code != http.StatusCreated {
				t.Fatalf("put %s: %d %s", name, code, body)
			}
		}
		waitOne := func(r *receiver) receivedEvent {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for len(r.events()) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no delivery within 20 s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			return r.events()[0]
		}

		r := startReceiver(t, node, rport, ep.Data.Secret)
		put("BEFORE_ROTATION")
		if e := waitOne(r); !slices.Equal(e.Verified, []int{0}) || e.Type != "config.update" {
			t.Fatalf("before rotation: %+v", e)
		}
		r.stop()

		var rotated struct {
			Data struct{ Secret string }
		}
		code, body = f.call(t, base, key, http.MethodPost, "/api/v1/projects/"+projectID+"/webhook-endpoints/"+ep.Data.ID+"/rotate-secret", "")
		if code != http.StatusOK || json.Unmarshal(body, &rotated) != nil || rotated.Data.Secret == ep.Data.Secret {
			t.Fatalf("rotate: %d %s", code, body)
		}
		// The receiver knows both: index 0 the new secret, 1 the old one.
		r = startReceiver(t, node, rport, rotated.Data.Secret, ep.Data.Secret)
		put("AFTER_ROTATION")
		if e := waitOne(r); !slices.Equal(e.Verified, []int{0, 1}) {
			t.Fatalf("after rotation: verified with secrets %v, want both [0 1]", e.Verified)
		}
	})
}
