package server

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/pgcluster"
)

// TestReadReplicaCluster runs read replicas on a real PostgreSQL 15 primary and streaming
// standby (store/pgcluster): an analytics request is served by the standby; with the standby's
// replay paused, a /authorize request right after a binding's deletion is denied (the primary
// answers) although the standby still holds the binding, while analytics still come, stale,
// from the standby; once the paused standby lags beyond the maximum it is skipped; resumed, it
// serves again; stopped, a request that was sent to it is answered by the primary.
func TestReadReplicaCluster(t *testing.T) {
	top := pgcluster.Start(t, pgcluster.Options{})
	const maxLag = 5 * time.Second
	st := openReplicaStore(t, top.PrimaryURL, []string{top.StandbyURL}, maxLag, 100*time.Millisecond)
	app := newTestApp(t, st, testConfig())
	prj, key := analyticsFixture(t, app, app.newTenancy(t))
	owner := prj.members[RoleOwner]
	prjPath := "/api/v1/projects/" + prj.project.ID
	_, _, decider := app.createKey(t, prj, `{"name":"decider","scopes":["project:read"]}`)
	var role, binding envelope[struct {
		ID string `json:"id"`
	}]
	app.do(owner.as(request{method: http.MethodPost, path: prjPath + "/roles", body: `{"name":"Editor","permissions":["document:write"]}`})).
		decode(t, http.StatusCreated, &role)
	app.do(owner.as(request{method: http.MethodPost, path: prjPath + "/role-bindings",
		body: `{"roleId":"` + role.Data.ID + `","principalType":"user","principalId":"alice"}`})).decode(t, http.StatusCreated, &binding)
	decide := func() bool {
		t.Helper()
		var d envelope[struct {
			Allowed bool `json:"allowed"`
		}]
		app.do(withKey(decider, request{method: http.MethodPost, path: "/api/v1/authorize",
			body: `{"projectId":"` + prj.project.ID + `","principalType":"user","principalId":"alice","permission":"document:write"}`})).
			decode(t, http.StatusOK, &d)
		return d.Data.Allowed
	}
	if !decide() {
		t.Fatal("alice bound to Editor: denied, want allowed")
	}
	meters := func(app *testApp) []meterJSON {
		t.Helper()
		var s summaryJSON
		app.do(withKey(key, request{method: http.MethodGet, path: prjPath + "/analytics/summary"})).decode(t, http.StatusOK, &s)
		return s.Data.Meters
	}
	fixture := []meterJSON{{"api_call", 4, 7}, {"storage_gb", 2, 11.5}}
	withE8 := []meterJSON{{"api_call", 5, 8}, {"storage_gb", 2, 11.5}}

	top.WaitReplayed()
	waitUsable(t, st, true)
	if got := meters(app); !reflect.DeepEqual(got, fixture) {
		t.Errorf("summary from the standby: %+v, want %+v", got, fixture)
	}
	wantPool(t, app, "getAnalyticsSummary", map[store.Pool]float64{store.PoolReplica: 1, store.PoolPrimary: 0})

	// Replay paused: the standby keeps the binding and misses the next event.
	top.Standby.PauseReplay()
	app.do(owner.as(request{method: http.MethodDelete, path: prjPath + "/role-bindings/" + binding.Data.ID})).decode(t, http.StatusOK, new(any))
	if decide() {
		t.Error("/authorize right after the binding's deletion: allowed, want denied (from the primary)")
	}
	postEvent(app, key, prj.project.ID, `{"eventId":"e8","subjectId":"alice","environmentId":"`+prj.project.Environments[0].ID+`","meter":"api_call","timestamp":"2026-11-20T10:00:00Z"}`).decode(t, http.StatusCreated, new(any))
	if got := meters(app); !reflect.DeepEqual(got, fixture) {
		t.Errorf("summary with the standby's replay paused, within the max lag: %+v, want the standby's stale %+v", got, fixture)
	}
	wantPool(t, app, "getAnalyticsSummary", map[store.Pool]float64{store.PoolReplica: 2, store.PoolPrimary: 0})
	wantPool(t, app, "authorize", map[store.Pool]float64{store.PoolReplica: 0, store.PoolPrimary: 2})
	standby := top.Standby.DB(pgcluster.Database)
	defer standby.Close()
	var held int
	if err := standby.QueryRow("SELECT count(*) FROM role_bindings WHERE id = $1", binding.Data.ID).Scan(&held); err != nil || held != 1 {
		t.Errorf("the paused standby holds the deleted binding %d times (%v), want 1", held, err)
	}

	// The paused standby's lag grows past the maximum: it is skipped, the primary answers.
	status := waitUsable(t, st, false)
	if !status.Reachable || status.Lag <= maxLag {
		t.Errorf("lagging standby status %+v, want reachable with a lag above %v", status, maxLag)
	}
	if got := meters(app); !reflect.DeepEqual(got, withE8) {
		t.Errorf("summary with the standby lagging: %+v, want the primary's %+v", got, withE8)
	}
	wantPool(t, app, "getAnalyticsSummary", map[store.Pool]float64{store.PoolReplica: 2, store.PoolPrimary: 1})

	// Resumed, it catches up and serves again.
	top.Standby.ResumeReplay()
	top.WaitReplayed()
	waitUsable(t, st, true)
	if got := meters(app); !reflect.DeepEqual(got, withE8) {
		t.Errorf("summary from the resumed standby: %+v, want %+v", got, withE8)
	}
	wantPool(t, app, "getAnalyticsSummary", map[store.Pool]float64{store.PoolReplica: 3, store.PoolPrimary: 1})

	// A standby that stops between two checks (this store checks once, at start): the request
	// sent to it is answered by the primary, and the standby is skipped from then on.
	slow := openReplicaStore(t, top.PrimaryURL, []string{top.StandbyURL}, maxLag, time.Hour)
	waitUsable(t, slow, true)
	slowApp := newTestApp(t, slow, testConfig())
	if got := meters(slowApp); !reflect.DeepEqual(got, withE8) {
		t.Errorf("summary from the standby: %+v, want %+v", got, withE8)
	}
	top.Standby.Stop()
	if got := meters(slowApp); !reflect.DeepEqual(got, withE8) {
		t.Errorf("summary with the standby stopped: %+v, want the primary's %+v", got, withE8)
	}
	wantPool(t, slowApp, "getAnalyticsSummary", map[store.Pool]float64{store.PoolReplica: 1, store.PoolPrimary: 1})
	if s := slow.ReplicaStatuses(); s[0].Usable {
		t.Errorf("stopped standby %+v, want unusable", s[0])
	}
}

// waitUsable waits (up to 30 s) until st's one replica is usable (or not, as want says) and
// returns its status.
func waitUsable(t testing.TB, st *store.Store, want bool) store.ReplicaStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := st.CheckReplicas(context.Background())[0]
		if s.Usable == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica status %+v after 30 s, want usable=%v", s, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wantPool checks how many requests to operation each pool served.
func wantPool(t *testing.T, app *testApp, operation string, want map[store.Pool]float64) {
	t.Helper()
	for pool, n := range want {
		if got := poolCount(t, app.srv, operation, pool); got != n {
			t.Errorf("%s served by %s: %v, want %v", operation, pool, got, n)
		}
	}
}
