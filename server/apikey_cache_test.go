package server

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestUsageCachedKey: usage ingest authenticates a key it has read before without reading it
// again (apikey_cache.go), yet a key revoked, or an account disabled, since is refused at the
// very next request, before any other answer — 401 where a live key would get 400 or 403 — and
// none of the refused events is recorded. A wrong secret for a remembered key is refused too.
func TestUsageCachedKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		prj := ten.project.ID
		envA, envB := ten.project.Environments[0].ID, ten.project.Environments[1].ID
		owner := ten.members[RoleOwner]
		accountID, keyID, key := app.createKey(t, ten, `{"name":"pinned","scopes":["usage:write"],"environmentId":"`+envA+`"}`)
		otherID, _, otherKey := app.createKey(t, ten, `{"name":"other","scopes":["usage:write"]}`)
		event := func(id, env string) string {
			return `{"eventId":"` + id + `","subjectId":"alice","environmentId":"` + env + `","meter":"api_call"}`
		}
		batch := func(k, id string) response {
			return app.do(withKey(k, request{method: http.MethodPost, path: "/api/v1/projects/" + prj + "/usage-events/batch",
				body: `{"environmentId":"` + envA + `","events":[{"eventId":"` + id + `","subjectId":"alice","meter":"api_call"}]}`}))
		}
		refused := func(r response) {
			t.Helper()
			r.wantProblem(t, http.StatusUnauthorized, "http-401", "Authentication required")
		}

		// Read once, then remembered: each key records events, and earns its 400 and 403.
		var ack usageAck
		postEvent(app, key, prj, event("a-1", envA)).decode(t, http.StatusCreated, &ack)
		postEvent(app, key, prj, event("a-2", envA)).decode(t, http.StatusCreated, &ack)
		batch(key, "a-3").decode(t, http.StatusOK, &batchAck{})
		postEvent(app, otherKey, prj, event("b-1", envB)).decode(t, http.StatusCreated, &ack)
		postEvent(app, key, prj, `{}`).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		postEvent(app, key, prj, event("a-4", envB)).
			wantProblem(t, http.StatusForbidden, "http-403", "Service account is scoped to another environment")
		if _, ok := app.srv.apiKeys.Get(key[len("svc_sk_") : len("svc_sk_")+12]); !ok {
			t.Fatal("the key was not remembered")
		}
		// A wrong secret for a remembered key.
		wrong := []byte(key)
		if wrong[len(wrong)-1] = 'A'; key[len(key)-1] == 'A' {
			wrong[len(wrong)-1] = 'E'
		}
		refused(postEvent(app, string(wrong), prj, event("w-1", envA)))

		// Revoked: a good event, a bad body, another environment, a batch, a replay: all 401.
		app.do(owner.as(request{method: http.MethodPost,
			path: "/api/v1/projects/" + prj + "/service-accounts/" + accountID + "/keys/" + keyID + "/revoke"})).decode(t, http.StatusOK, &map[string]any{})
		refused(postEvent(app, key, prj, event("a-5", envA)))
		refused(postEvent(app, key, prj, `{}`))
		refused(postEvent(app, key, prj, event("a-6", envB)))
		refused(batch(key, "a-7"))
		refused(postEvent(app, key, prj, event("a-1", envA)))

		// Disabled account: its remembered key is refused at the next event.
		app.do(owner.as(request{method: http.MethodPost,
			path: "/api/v1/projects/" + prj + "/service-accounts/" + otherID + "/disable"})).decode(t, http.StatusOK, &map[string]any{})
		refused(postEvent(app, otherKey, prj, event("b-2", envB)))

		// Recorded: a-1, a-2, a-3 and b-1 only, besides the tenancy fixture's two events of
		// quantity 0 (authz_test.go).
		var s summaryJSON
		app.do(owner.as(request{method: http.MethodGet, path: "/api/v1/projects/" + prj + "/analytics/summary"})).decode(t, http.StatusOK, &s)
		if want := []meterJSON{{"api_call", 6, 4}}; !reflect.DeepEqual(s.Data.Meters, want) {
			t.Errorf("meters = %+v, want %+v", s.Data.Meters, want)
		}

		// Each request's authentication is counted once, and a refusal at the write by its
		// reason: ok for the 8 requests a live or cached key passed (two of them refused later,
		// as revoked and disabled), never twice for the 400 and 403 that re-read the key;
		// revoked for that refusal and the 4 requests after it, which read the key again.
		mf := scrapeMetrics(t, app.srv)
		for outcome, want := range map[string]float64{"ok": 8, "wrong_secret": 1, "revoked": 5, "disabled": 1, "unknown": 0} {
			if got, _ := sample(mf[metricAPIKeyAuth], map[string]string{"outcome": outcome}); got != want {
				t.Errorf("api key authentications %s = %v, want %v", outcome, got, want)
			}
		}
	})
}
