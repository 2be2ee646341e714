package server

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestReadReplicaPolicy: which operations may read from a replica is declared in the spec
// (x-read: replica) and read at start-up: exactly analytics, the subject directory and the
// audit lists; nothing on the authorization path.
func TestReadReplicaPolicy(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	want := []string{
		"getAnalyticsActivity", "getAnalyticsSummary", "getSubjectActivity", "listAnalyticsSubjects",
		"listOrganizationAuditLogs", "listProjectAuditLogs",
	}
	var got []string
	for id, p := range app.srv.policies {
		if p.readReplica {
			got = append(got, id)
		}
	}
	slices.Sort(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operations with x-read: replica = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name, method string
		value        any
	}{
		{"unknown value", http.MethodGet, "sometimes"},
		{"not a string", http.MethodGet, true},
		{"a write", http.MethodPost, "replica"},
	} {
		op := &openapi3.Operation{OperationID: "op", Extensions: map[string]any{"x-permission": "usage:read", "x-read": tc.value}}
		if _, err := readPolicy(tc.method, "/api/v1/x", op); err == nil || !strings.Contains(err.Error(), "x-read") {
			t.Errorf("%s: readPolicy: %v, want an x-read error", tc.name, err)
		}
	}
	op := &openapi3.Operation{OperationID: "op", Extensions: map[string]any{"x-permission": "usage:read", "x-read": "primary"}}
	if p, err := readPolicy(http.MethodGet, "/api/v1/x", op); err != nil || p.readReplica {
		t.Errorf("x-read: primary: %+v %v, want no replica", p.readReplica, err)
	}
}

// postgresBackend is the PostgreSQL test backend; tests of replicas (PostgreSQL only) skip
// without GATEHOUSE_TEST_POSTGRES_URL, as every PostgreSQL-only test does.
func postgresBackend(t *testing.T) storetest.Backend {
	t.Helper()
	for _, b := range storetest.Backends(t) {
		if b.Name == string(store.Postgres) {
			return b
		}
	}
	t.Skip("read replicas need PostgreSQL: set " + storetest.PostgresURLEnv)
	return storetest.Backend{}
}

// openReplicaStore opens and migrates a store on primaryURL, with the usage tests' clock and
// the given read replicas, checked every interval.
func openReplicaStore(t *testing.T, primaryURL string, replicas []string, maxLag, every time.Duration) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, primaryURL, store.WithClock(storetest.NewClock(usageNow).Now),
		store.WithReadReplicas(replicas, maxLag), store.WithReplicaCheckInterval(every))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// poolCount is the number of requests to operation that pool served, from the metrics.
func poolCount(t testing.TB, srv *Server, operation string, pool store.Pool) float64 {
	t.Helper()
	v, _ := sample(scrapeMetrics(t, srv)[metricReadPool], map[string]string{"operation": operation, "pool": string(pool)})
	return v
}

// TestReadReplicaRouting, with a second, empty database as a stand-in replica (its own schema
// of the test PostgreSQL): analytics and audit lists answer from it (empty), authentication,
// authorization and ingest from the primary; an unreachable replica is skipped. The metrics
// count each request by the pool that served it.
func TestReadReplicaRouting(t *testing.T) {
	b := postgresBackend(t)
	replicaURL := b.URL(t)
	fake, err := store.Open(context.Background(), replicaURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	fake.Close()
	primaryURL := b.URL(t)
	st := openReplicaStore(t, primaryURL, []string{replicaURL}, 5*time.Second, time.Hour)
	if got := st.CheckReplicas(context.Background()); len(got) != 1 || !got[0].Usable || !got[0].Reachable {
		t.Fatalf("replica status %+v, want usable", got)
	}
	app := newTestApp(t, st, testConfig())
	prj, key := analyticsFixture(t, app, app.newTenancy(t))
	summary := func(app *testApp) summaryJSON {
		t.Helper()
		var s summaryJSON
		app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/projects/" + prj.project.ID + "/analytics/summary"})).
			decode(t, http.StatusOK, &s)
		return s
	}
	// The replica has no events: an answer from it is empty; the primary's has the fixture's.
	if s := summary(app); len(s.Data.Meters) != 0 || s.Data.ActiveSubjects.Last30Days != 0 {
		t.Errorf("summary %+v, want the empty replica's", s.Data)
	}
	var audit struct{ Data []any }
	app.do(prj.members[RoleOwner].as(request{method: http.MethodGet, path: "/api/v1/projects/" + prj.project.ID + "/audit-logs"})).
		decode(t, http.StatusOK, &audit)
	if len(audit.Data) != 0 {
		t.Errorf("audit list from the replica has %d entries, want 0 (the primary has the fixture's)", len(audit.Data))
	}
	for _, c := range []struct {
		operation string
		pool      store.Pool
		want      float64
	}{
		{"getAnalyticsSummary", store.PoolReplica, 1}, {"getAnalyticsSummary", store.PoolPrimary, 0},
		{"listProjectAuditLogs", store.PoolReplica, 1},
		{"ingestUsageEvent", store.PoolPrimary, 7}, {"ingestUsageEvent", store.PoolReplica, 0},
	} {
		if got := poolCount(t, app.srv, c.operation, c.pool); got != c.want {
			t.Errorf("%s served by %s: %v, want %v", c.operation, c.pool, got, c.want)
		}
	}

	mf := scrapeMetrics(t, app.srv)
	if v, ok := sample(mf[metricReplicaUsable], map[string]string{"replica": "0"}); !ok || v != 1 {
		t.Errorf("%s{replica=0} = %v (%v), want 1", metricReplicaUsable, v, ok)
	}
	if _, ok := sample(mf["go_sql_max_open_connections"], map[string]string{"db_name": "postgres-replica-0"}); !ok {
		t.Error("no pool statistics for postgres-replica-0")
	}

	// An unreachable replica (nothing listens on port 1) is skipped: the primary answers.
	down := openReplicaStore(t, primaryURL, []string{"postgres://postgres@127.0.0.1:1/none?sslmode=disable"}, 5*time.Second, time.Hour)
	if got := down.CheckReplicas(context.Background()); len(got) != 1 || got[0].Usable || got[0].Reachable {
		t.Fatalf("unreachable replica status %+v, want unreachable and unusable", got)
	}
	downApp := newTestApp(t, down, testConfig())
	if s := summary(downApp); !reflect.DeepEqual(s.Data.Meters, []meterJSON{{"api_call", 4, 7}, {"storage_gb", 2, 11.5}}) {
		t.Errorf("summary with the replica down: meters %+v, want the primary's", s.Data.Meters)
	}
	if v, ok := sample(scrapeMetrics(t, downApp.srv)[metricReplicaUsable], map[string]string{"replica": "0"}); !ok || v != 0 {
		t.Errorf("%s{replica=0} with the replica down = %v (%v), want 0", metricReplicaUsable, v, ok)
	}
	if got := poolCount(t, downApp.srv, "getAnalyticsSummary", store.PoolPrimary); got != 1 {
		t.Errorf("getAnalyticsSummary served by the primary with the replica down: %v, want 1", got)
	}
}
