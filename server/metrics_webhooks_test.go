package server

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestWebhookMetrics: the outbox depth gauge counts queued webhook deliveries, and the
// attempts counter counts outcomes (a 503 is failed, a 2xx succeeded).
func TestWebhookMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		cfg := webhookTestConfig()
		app := newTestApp(t, st, cfg) // no worker yet: deliveries stay queued
		owner, _, project := app.newBareProject(t)
		prj := "/api/v1/projects/" + project.ID
		rcv := newHookReceiver(t)
		var first atomic.Bool
		rcv.status = func() int {
			if first.CompareAndSwap(false, true) {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		}
		app.do(owner.as(request{method: "POST", path: prj + "/webhook-endpoints",
			body: `{"url":"` + rcv.URL + `","eventTypes":["project.update"]}`})).decode(t, http.StatusCreated, &envelope[endpointBody]{})
		for _, name := range []string{"One", "Two"} {
			app.do(owner.as(request{method: "PATCH", path: prj, body: `{"name":"` + name + `"}`})).decode(t, http.StatusOK, &envelope[map[string]any]{})
		}
		m := scrapeMetrics(t, app.srv)
		if v, ok := sample(m[metricOutboxPending], map[string]string{"kind": "webhook"}); !ok || v != 2 {
			t.Fatalf("outbox depth %v (%v), want 2 webhook deliveries queued", v, ok)
		}
		startWebhookWorker(t, cfg, st, slog.New(slog.DiscardHandler), app.srv)
		waitFor(t, 10*time.Second, "both delivered", func() bool {
			v, _ := sample(scrapeMetrics(t, app.srv)[metricOutboxPending], map[string]string{"kind": "webhook"})
			return v == 0
		})
		m = scrapeMetrics(t, app.srv)
		for outcome, want := range map[string]float64{"succeeded": 2, "failed": 1, "refused": 0} {
			if v, ok := sample(m[metricWebhookAttempts], map[string]string{"outcome": outcome}); !ok || v != want {
				t.Errorf("attempts{outcome=%s} = %v (%v), want %v", outcome, v, ok, want)
			}
		}
		if h := m[metricWebhookSeconds]; h == nil || h.Metric[0].GetHistogram().GetSampleCount() != 3 {
			t.Errorf("latency histogram %v, want 3 samples", h)
		}
	})
}
