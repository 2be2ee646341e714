package server

import (
	"database/sql"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatehouse-dev/gatehouse/identity"
)

// Prometheus metrics. Each Server owns its registry (never the process-wide default one), served
// by MetricsHandler on a listener of its own (GATEHOUSE_METRICS_ADDR; main.go), never by the
// public app. Every label takes its values from a fixed set: spec operation ids, HTTP methods,
// status codes and the outcome names below; never an id, a key, an email or a path.

// Metric names, for the tests and the example dashboard.
const (
	metricRequests       = "gatehouse_http_requests_total"
	metricRequestSeconds = "gatehouse_http_request_duration_seconds"
	metricDecisions      = "gatehouse_authorize_decisions_total"
	metricAPIKeyAuth     = "gatehouse_api_key_authentications_total"
	metricThrottled      = "gatehouse_throttle_refusals_total"
	metricKept           = "gatehouse_authorize_kept_total"
)

// operationUnmatched labels requests that matched no spec operation: unknown paths, and the
// explorer's static assets.
const operationUnmatched = "unmatched"

// API-key authentication outcomes, the values of the outcome label.
const (
	apiKeyOK          = "ok"
	apiKeyMalformed   = "malformed"    // not a Gatehouse key: refused before any database access
	apiKeyUnknown     = "unknown"      // no key has its public id
	apiKeyWrongSecret = "wrong_secret" // the public id exists, the secret does not match
	apiKeyRevoked     = "revoked"
	apiKeyExpired     = "expired"
	apiKeyDisabled    = "disabled" // the service account is disabled
	apiKeyArchived    = "archived" // the key's project or organization is archived
)

// Throttle kinds, the values of the throttle label.
const (
	throttleAccount = "account" // failed password checks per account
	throttleIP      = "ip"      // failed password checks per client IP
	throttleSignUp  = "sign_up" // sign-ups per client IP
	throttleMail    = "mail"    // messages over a mail send limit (not sent, not answered 429)
	throttleOther   = "other"   // a throttle this list does not name
)

// Metrics holds the Server's collectors and the registry that serves them.
type Metrics struct {
	registry    *prometheus.Registry
	requests    *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	decisions   *prometheus.CounterVec
	apiKeyAuths *prometheus.CounterVec
	throttled   *prometheus.CounterVec
	kept        *prometheus.CounterVec
	readPools   *prometheus.CounterVec
	webhooks    webhookMetrics
	// The series the decision paths count, resolved once: WithLabelValues hashes its labels and
	// looks the series up on every call, which was about 4 % of a pinned batch of 100's CPU when
	// counted per check (client_golang's documentation recommends keeping the child when one is
	// used often).
	allowed, denied prometheus.Counter
	keptSeries      [len(keptKindLabels)][2]prometheus.Counter // by keptKind, then hit (1) or miss (0)
}

// keptKind is what was looked up among the kept (decision_cache.go): an API key or a decision,
// the values of the kind label of metricKept.
type keptKind int

const (
	keptAKey keptKind = iota
	keptADecision
)

var keptKindLabels = [...]string{keptAKey: "key", keptADecision: "decision"}

// NewMetrics registers the request, decision, API-key and throttle series, the database pools'
// statistics (one db label per pool, see store.Store.Pools), and the Go runtime and process
// collectors on a new registry.
func NewMetrics(pools map[string]*sql.DB) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricRequests,
			Help: "HTTP requests answered, by spec operation id (\"unmatched\" for none), method and status code.",
		}, []string{"operation", "method", "status"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricRequestSeconds,
			Help:    "Time from receiving a request to its last byte written, by spec operation id, method and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation", "method", "status"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricDecisions,
			Help: "POST /api/v1/authorize decisions made, by decision (allowed or denied).",
		}, []string{"decision"}),
		apiKeyAuths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricAPIKeyAuth,
			Help: "X-API-Key authentications, by outcome: ok, malformed, unknown, wrong_secret, revoked, expired, disabled, archived.",
		}, []string{"outcome"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricThrottled,
			Help: "Requests refused with 429 by a throttle, by throttle: account, ip or sign_up.",
		}, []string{"throttle"}),
		kept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricKept,
			Help: "/authorize API keys and decisions looked up among those kept at the decision epoch, by kind (key, decision) and outcome (hit: served as kept; miss: read again).",
		}, []string{"kind", "outcome"}),
	}
	m.readPools = newReadPoolCounter()
	m.registry.MustRegister(m.requests, m.seconds, m.decisions, m.apiKeyAuths, m.throttled, m.kept, m.readPools,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.webhooks = newWebhookMetrics(m.registry)
	for name, db := range pools {
		m.registry.MustRegister(collectors.NewDBStatsCollector(db, name))
	}
	// Series that exist from the start, so dashboards and alerts see zeros rather than nothing.
	m.allowed, m.denied = m.decisions.WithLabelValues("allowed"), m.decisions.WithLabelValues("denied")
	for _, o := range []string{apiKeyOK, apiKeyMalformed, apiKeyUnknown, apiKeyWrongSecret, apiKeyRevoked, apiKeyExpired, apiKeyDisabled, apiKeyArchived} {
		m.apiKeyAuths.WithLabelValues(o)
	}
	for _, k := range []string{throttleAccount, throttleIP, throttleSignUp, throttleMail} {
		m.throttled.WithLabelValues(k)
	}
	for kind, label := range keptKindLabels {
		m.keptSeries[kind][0] = m.kept.WithLabelValues(label, "miss")
		m.keptSeries[kind][1] = m.kept.WithLabelValues(label, "hit")
	}
	return m
}

// observeRequest records one answered request.
func (m *Metrics) observeRequest(operation, method string, status int, latency time.Duration) {
	code := strconv.Itoa(status)
	method = metricMethod(method)
	m.requests.WithLabelValues(operation, method, code).Inc()
	m.seconds.WithLabelValues(operation, method, code).Observe(latency.Seconds())
}

// metricMethod keeps the method label to the standard methods: anything else is "other".
func metricMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// decided records /authorize decisions: allowed of them allowed, denied denied.
func (m *Metrics) decided(allowed, denied int) {
	if allowed > 0 {
		m.allowed.Add(float64(allowed))
	}
	if denied > 0 {
		m.denied.Add(float64(denied))
	}
}

// apiKeyAuth records one API-key authentication's outcome (one of the apiKey* constants).
func (m *Metrics) apiKeyAuth(outcome string) { m.apiKeyAuths.WithLabelValues(outcome).Inc() }

// keptLookups records lookups of kept keys or decisions (decision_cache.go): hits served as
// kept, misses read again.
func (m *Metrics) keptLookups(kind keptKind, hits, misses int) {
	if hits > 0 {
		m.keptSeries[kind][1].Add(float64(hits))
	}
	if misses > 0 {
		m.keptSeries[kind][0].Add(float64(misses))
	}
}

// throttleRefused records a 429 from throttle kind (one of the throttle* constants).
func (m *Metrics) throttleRefused(kind string) { m.throttled.WithLabelValues(kind).Inc() }

// throttleKind names one of the server's throttles for the throttle label.
func (s *Server) throttleKind(t *identity.Throttle) string {
	switch t {
	case s.accountThrottle:
		return throttleAccount
	case s.ipThrottle:
		return throttleIP
	case s.signUpThrottle:
		return throttleSignUp
	}
	return throttleOther
}

// MetricsHandler serves the server's metrics in the Prometheus exposition format. Serve it on
// its own listener (GATEHOUSE_METRICS_ADDR), never on the public one: the app itself has no
// /metrics route.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{Registry: s.metrics.registry})
}
