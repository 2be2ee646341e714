package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// scrapeMetrics GETs /metrics from a listener serving only srv.MetricsHandler (as main.go wires
// GATEHOUSE_METRICS_ADDR) and parses the text exposition.
func scrapeMetrics(t testing.TB, srv *Server) map[string]*dto.MetricFamily {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", srv.MetricsHandler())
	ts := httptest.NewServer(mux)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// labelNames is the sorted label names of a family's first series.
func labelNames(mf *dto.MetricFamily) []string {
	var out []string
	if len(mf.Metric) == 0 {
		return nil
	}
	for _, l := range mf.Metric[0].Label {
		out = append(out, l.GetName())
	}
	sort.Strings(out)
	return out
}

// sample is the value of the series of mf whose labels are exactly want, and whether it exists.
func sample(mf *dto.MetricFamily, want map[string]string) (float64, bool) {
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		match := true
		for _, l := range m.Label {
			if want[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// Label values that would be an id (prefix_ULID), an API key, an email or a path.
var (
	idLike    = regexp.MustCompile(`(?i)[a-z]+_[0-9a-hjkmnp-tv-z]{26}`)
	apiKeyish = regexp.MustCompile(`svc_sk_`)
)

// TestMetrics drives requests of every kind the series count through the app, scrapes the
// metrics listener and checks names, label sets and counts, that the app itself does not serve
// /metrics, and that no label value carries an id, a key, an email or a path.
func TestMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		authorize := func(key, perm string) response {
			return app.do(withKey(key, request{method: http.MethodPost, path: "/api/v1/authorize",
				body: authorizeBody(ten.project.ID, store.PrincipalUser, "alice", perm)}))
		}
		// The fixture's binding gives its user the seeded member role; alice gets the editor role.
		var role envelope[roleJSON]
		app.do(owner.as(request{method: http.MethodPost, path: "/api/v1/projects/" + ten.project.ID + "/roles",
			body: `{"name":"Editor","permissions":["document:read"]}`})).decode(t, http.StatusCreated, &role)
		app.do(owner.as(request{method: http.MethodPost, path: "/api/v1/projects/" + ten.project.ID + "/role-bindings",
			body: `{"roleId":"` + role.Data.ID + `","principalType":"user","principalId":"alice"}`})).decode(t, http.StatusCreated, &struct{}{})

		if res := authorize(ten.readerKey, "document:read"); res.Code != http.StatusOK || !strings.Contains(res.Body.String(), `"allowed":true`) {
			t.Fatalf("allowed decision: %d %s", res.Code, res.Body)
		}
		for range 2 {
			if res := authorize(ten.readerKey, "document:write"); res.Code != http.StatusOK || !strings.Contains(res.Body.String(), `"allowed":false`) {
				t.Fatalf("denied decision: %d %s", res.Code, res.Body)
			}
		}
		publicID := ten.readerKey[len("svc_sk_") : len("svc_sk_")+12]
		wrongSecret := flipSecret(ten.readerKey)
		unknown := "svc_sk_" + strings.Repeat("Z", len(publicID)) + ten.readerKey[len("svc_sk_")+12:]
		authorize("not-a-key", "document:read").wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		authorize(wrongSecret, "document:read").wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		authorize(unknown, "document:read").wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		app.do(owner.as(request{method: http.MethodPost,
			path: "/api/v1/projects/" + ten.project.ID + "/service-accounts/" + ten.accountID + "/keys/" + ten.keyID + "/revoke"})).
			decode(t, http.StatusOK, &struct{}{})
		authorize(ten.readerKey, "document:read").wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		// A body over the limit is refused before the operation is matched, and still counted
		// under it.
		if res := app.do(request{method: http.MethodPost, path: "/api/v1/authorize", body: strings.Repeat(" ", 1<<20+1)}); res.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("oversized body: %d", res.Code)
		}
		// Unknown paths, and the app's own /metrics, are not operations.
		for _, path := range []string{"/no/such/path", "/metrics"} {
			if res := app.do(request{method: http.MethodGet, path: path}); res.Code != http.StatusNotFound || strings.Contains(res.Body.String(), "gatehouse_") {
				t.Errorf("GET %s on the app: %d %s, want 404 without metrics", path, res.Code, res.Body)
			}
		}
		// Six failed sign-ins for one unknown account: the sixth is throttled.
		for i := range accountFailureLimit + 1 {
			res := app.do(signInRequest("nobody@example.com", "wrong-password"))
			if want := map[bool]int{true: 429, false: 401}[i == accountFailureLimit]; res.Code != want {
				t.Fatalf("sign-in %d: %d, want %d", i, res.Code, want)
			}
		}

		mf := scrapeMetrics(t, app.srv)
		for name, want := range map[string][]string{
			metricRequests:                 {"method", "operation", "status"},
			metricRequestSeconds:           {"method", "operation", "status"},
			metricDecisions:                {"decision"},
			metricAPIKeyAuth:               {"outcome"},
			metricThrottled:                {"throttle"},
			metricKept:                     {"kind", "outcome"},
			"go_sql_open_connections":      {"db_name"},
			"go_sql_wait_count_total":      {"db_name"},
			"go_goroutines":                nil,
			"go_memstats_heap_alloc_bytes": nil,
			"process_cpu_seconds_total":    nil,
		} {
			if mf[name] == nil {
				t.Errorf("%s: not served", name)
				continue
			}
			if got := labelNames(mf[name]); !slices.Equal(got, want) {
				t.Errorf("%s: labels %v, want %v", name, got, want)
			}
		}
		if got := mf[metricRequestSeconds].GetType(); got != dto.MetricType_HISTOGRAM {
			t.Errorf("%s is a %v, want a histogram", metricRequestSeconds, got)
		}
		pools := map[store.Dialect][]string{store.SQLite: {"sqlite-reader", "sqlite-writer"}, store.Postgres: {"postgres"}}[app.store.Dialect()]
		for _, pool := range pools {
			if _, ok := sample(mf["go_sql_max_open_connections"], map[string]string{"db_name": pool}); !ok {
				t.Errorf("no pool statistics for %s", pool)
			}
		}
		for _, c := range []struct {
			metric string
			labels map[string]string
			want   float64
		}{
			{metricDecisions, map[string]string{"decision": "allowed"}, 1},
			{metricDecisions, map[string]string{"decision": "denied"}, 2},
			{metricAPIKeyAuth, map[string]string{"outcome": "ok"}, 3},
			{metricAPIKeyAuth, map[string]string{"outcome": "malformed"}, 1},
			{metricAPIKeyAuth, map[string]string{"outcome": "wrong_secret"}, 1},
			{metricAPIKeyAuth, map[string]string{"outcome": "unknown"}, 1},
			{metricAPIKeyAuth, map[string]string{"outcome": "revoked"}, 1},
			{metricAPIKeyAuth, map[string]string{"outcome": "disabled"}, 0},
			{metricThrottled, map[string]string{"throttle": "account"}, 1},
			{metricThrottled, map[string]string{"throttle": "ip"}, 0},
			{metricThrottled, map[string]string{"throttle": "sign_up"}, 0},
			{metricRequests, map[string]string{"operation": "authorize", "method": "POST", "status": "200"}, 3},
			{metricRequests, map[string]string{"operation": "authorize", "method": "POST", "status": "401"}, 4},
			{metricRequests, map[string]string{"operation": "unmatched", "method": "GET", "status": "404"}, 2},
			{metricRequests, map[string]string{"operation": "authorize", "method": "POST", "status": "413"}, 1},
			{metricRequests, map[string]string{"operation": "signInEmail", "method": "POST", "status": "429"}, 1},
			{metricRequestSeconds, map[string]string{"operation": "authorize", "method": "POST", "status": "200"}, 3},
			// SQLite keeps keys and decisions at the decision epoch: the key is read for the first
			// request, the unknown key and after the revocation (which moves the epoch), and kept
			// for the two denials and the wrong secret; the two questions are decided once each.
			// Keys: missed by the first request and after the revocation (which moved the epoch),
			// and for the unknown key; found for the second question, its repeat and the wrong
			// secret. Decisions: the first read with the key, the second decided in the handler,
			// its repeat served as kept.
			{metricKept, map[string]string{"kind": "key", "outcome": "miss"}, 3},
			{metricKept, map[string]string{"kind": "key", "outcome": "hit"}, 3},
			{metricKept, map[string]string{"kind": "decision", "outcome": "miss"}, 2},
			{metricKept, map[string]string{"kind": "decision", "outcome": "hit"}, 1},
		} {
			if got, ok := sample(mf[c.metric], c.labels); !ok || got != c.want {
				t.Errorf("%s%v = %v (present %v), want %v", c.metric, c.labels, got, ok, c.want)
			}
		}

		// No label value is an id, a key, an email, a path or a secret of the fixture.
		secrets := []string{ten.readerKey, ten.starKey, publicID, ten.project.ID, ten.org.ID, ten.accountID, ten.keyID, owner.Email, owner.ID}
		for name, fam := range mf {
			for _, m := range fam.Metric {
				for _, l := range m.Label {
					v := l.GetValue()
					bad := idLike.MatchString(v) || apiKeyish.MatchString(v) || strings.Contains(v, "@") || strings.Contains(v, "/")
					for _, s := range secrets {
						bad = bad || strings.Contains(v, s)
					}
					if bad {
						t.Errorf("%s: label %s=%q carries an id, a key, an email or a path", name, l.GetName(), v)
					}
				}
			}
		}
	})
}

// TestGrafanaDashboard parses the example dashboard (testdata/grafana-dashboard.json, linked
// from docs/operations.md, "Metrics") and checks that every metric its queries name is one the server serves.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("testdata/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard has no title or no panels")
	}
	st, err := store.Open(t.Context(), "sqlite:"+t.TempDir()+"/metrics.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	app := newTestApp(t, st, testConfig())
	app.do(request{method: http.MethodGet, path: "/api/v1/health"})
	served := scrapeMetrics(t, app.srv)
	name := regexp.MustCompile(`\b(gatehouse|go|process)_[a-z_]+\b`)
	seen := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, n := range name.FindAllString(q.Expr, -1) {
				seen++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
				if served[base] == nil && served[n] == nil {
					t.Errorf("panel %q queries %s, which the server does not serve", p.Title, n)
				}
			}
		}
	}
	if seen == 0 {
		t.Error("the dashboard queries no Gatehouse metric")
	}
}

// TestBatchDecisionsCounted: a batch counts each of its checks once in the decisions series, by
// outcome, and each check's lookup among the kept decisions. The batch is the eleven questions
// of decisionCases, five allowed and six denied, sent three times with the reader's key: read
// the first time (eleven misses), kept the second (eleven hits), and the third time explained,
// which is never answered as kept (no lookup). On PostgreSQL the batch's key is kept too
// (store.KeepsBatchKeys): read by the first batch, kept for the other two; on SQLite it is read
// on its own every time, and never looked up among the kept.
func TestBatchDecisionsCounted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newDecisionApp(t, b)
		var checks []string
		for _, c := range decisionCases {
			checks = append(checks, c.checkJSON())
		}
		series := []map[string]string{
			{"decision": "allowed"}, {"decision": "denied"},
			{"kind": "decision", "outcome": "miss"}, {"kind": "decision", "outcome": "hit"},
			{"kind": "key", "outcome": "miss"}, {"kind": "key", "outcome": "hit"},
		}
		keys := map[store.Dialect][3][2]float64{ // each step's key misses and hits
			store.Postgres: {{1, 0}, {0, 1}, {0, 1}},
			store.SQLite:   {{0, 0}, {0, 0}, {0, 0}},
		}[app.store.Dialect()]
		counts := func() []float64 {
			mf := scrapeMetrics(t, app.srv)
			var out []float64
			for i, labels := range series {
				metric := metricDecisions
				if i >= 2 {
					metric = metricKept
				}
				v, ok := sample(mf[metric], labels)
				if !ok {
					t.Fatalf("%s%v: no series", metric, labels)
				}
				out = append(out, v)
			}
			return out
		}
		for i, step := range []struct {
			name    string
			explain string
			want    []float64 // allowed, denied, kept decision misses and hits: added by the batch
		}{
			{"first", "", []float64{5, 6, 11, 0}},
			{"again, kept", "", []float64{5, 6, 0, 11}},
			{"explained", `,"explain":true`, []float64{5, 6, 0, 0}},
		} {
			step.want = append(step.want, keys[i][:]...)
			before := counts()
			app.do(withKey(ten.readerKey, request{method: http.MethodPost, path: "/api/v1/authorize/batch",
				body: fmt.Sprintf(`{"projectId":%q,"checks":[%s]%s}`, ten.project.ID, strings.Join(checks, ","), step.explain)})).
				decode(t, http.StatusOK, &struct{}{})
			after := counts()
			for i := range series {
				if got := after[i] - before[i]; got != step.want[i] {
					t.Errorf("%s batch: %v grew by %v, want %v", step.name, series[i], got, step.want[i])
				}
			}
		}
	})
}
