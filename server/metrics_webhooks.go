package server

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Webhook and outbox metric names.
const (
	metricWebhookAttempts = "gatehouse_webhook_delivery_attempts_total"
	metricWebhookSeconds  = "gatehouse_webhook_delivery_duration_seconds"
	metricOutboxPending   = "gatehouse_outbox_pending"
)

// webhookMetrics are the webhook delivery series, registered by NewMetrics.
type webhookMetrics struct {
	attempts *prometheus.CounterVec
	seconds  prometheus.Histogram
}

func newWebhookMetrics(reg *prometheus.Registry) webhookMetrics {
	w := webhookMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricWebhookAttempts,
			Help: "Webhook delivery attempts, by outcome: succeeded, failed or refused (an address the SSRF guard refuses).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricWebhookSeconds,
			Help:    "Time from sending a webhook delivery to its answer (or failure).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	reg.MustRegister(w.attempts, w.seconds)
	for _, o := range []string{webhook.OutcomeSucceeded, webhook.OutcomeFailed, webhook.OutcomeRefused} {
		w.attempts.WithLabelValues(o)
	}
	return w
}

// webhookAttempt counts one delivery attempt (webhook.DelivererConfig.Observe).
func (m *Metrics) webhookAttempt(outcome string, latency time.Duration) {
	m.webhooks.attempts.WithLabelValues(outcome).Inc()
	m.webhooks.seconds.Observe(latency.Seconds())
}

// ObserveOutbox adds the gauge of st's outbox depth: pending messages by kind (mail, webhook),
// read at each scrape.
func (m *Metrics) ObserveOutbox(st *store.Store) {
	m.registry.MustRegister(outboxCollector{st: st, desc: prometheus.NewDesc(metricOutboxPending,
		"Outbox messages not yet delivered or given up, by kind (mail, webhook).", []string{"kind"}, nil)})
}

type outboxCollector struct {
	st   *store.Store
	desc *prometheus.Desc
}

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depth, err := c.st.OutboxDepth(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, kind := range []string{"mail", webhook.Kind} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(depth[kind]), kind)
	}
}
