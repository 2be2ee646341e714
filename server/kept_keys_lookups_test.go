package server

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestKeptKeysForLookups: effective permissions and who holds a permission, called with an API
// key (x-api-key-lookup: with-epoch), refuse the key on the very next request after it expires,
// its service account is disabled, its organization archived or it is revoked, each made by
// statements from outside the store or through the API, and answer afresh after a binding
// changes. On PostgreSQL the key is kept after the first request (the kept-key counter says
// so), so every refusal meets a kept key: the expiry passes with no write, at the epoch the key
// was kept at, so the kept key's expiry must be judged again; the other changes are writes that
// move the project's decision epoch, so the key kept at the earlier epoch must not be served.
func TestKeptKeysForLookups(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		f := newKeptFixture(t, b)
		start, clock, st, app, ten, dev, at, exec := f.start, f.clock, f.st, f.app, f.ten, f.dev, f.at, f.exec
		editor := dev.createRole(`{"name":"Editor","permissions":["document:read"]}`)
		binding := dev.bind(editor.ID, "user", "alice")
		paths := map[string]string{
			"effective permissions": "/api/v1/projects/" + ten.project.ID + "/principals/user/alice/permissions",
			"who holds":             "/api/v1/projects/" + ten.project.ID + "/permission-holders?permission=" + url.QueryEscape("document:read"),
		}
		keyHits := func() float64 {
			v, _ := sample(scrapeMetrics(t, app.srv)[metricKept], map[string]string{"kind": "key", "outcome": "hit"})
			return v
		}
		// step asks both lookups; want is "200 alice" (alice holds document:read), "200 none" or
		// a refusal's status and title.
		step := func(name, want string) {
			t.Helper()
			for what, path := range paths {
				res := app.do(withKey(ten.readerKey, request{method: http.MethodGet, path: path}))
				got := fmt.Sprint(res.Code)
				switch {
				case res.Code != http.StatusOK:
					var p struct{ Title string }
					res.decode(t, res.Code, &p)
					got += " " + p.Title
				case what == "effective permissions":
					var out envelope[struct{ Permissions []string }]
					res.decode(t, http.StatusOK, &out)
					got += map[bool]string{true: " alice", false: " none"}[fmt.Sprint(out.Data.Permissions) == "[document:read]"]
				default:
					var out envelope[[]struct{ PrincipalID string }]
					res.decode(t, http.StatusOK, &out)
					got += map[bool]string{true: " alice", false: " none"}[len(out.Data) == 1 && out.Data[0].PrincipalID == "alice"]
				}
				if got != want {
					t.Errorf("%s, %s: got %s, want %s", name, what, got, want)
				}
			}
		}
		const holds, none, refused = "200 alice", "200 none", "401 Authentication required"

		step("bound", holds)
		hits := keyHits()
		step("asked again", holds)
		wantHits := map[store.Dialect]float64{store.Postgres: 2, store.SQLite: 0}[st.Dialect()]
		if got := keyHits() - hits; got != wantHits {
			t.Errorf("kept keys found by the second step: %v, want %v", got, wantHits)
		}

		dev.do(http.MethodDelete, "/role-bindings/"+binding.ID, "").decode(t, http.StatusOK, &struct{}{})
		step("binding deleted", none)
		dev.bind(editor.ID, "user", "alice")
		step("bound again", holds)

		exec(`UPDATE api_keys SET expires_at = ? WHERE id = ?`, at(start.Add(time.Hour)), ten.keyID)
		step("key expiring in an hour", holds)
		clock.Set(start.Add(time.Hour))
		step("the key's expiry passed", refused)
		exec(`UPDATE api_keys SET expires_at = NULL WHERE id = ?`, ten.keyID)
		step("key without expiry", holds)

		exec(`UPDATE service_accounts SET disabled_at = ? WHERE id = ?`, at(start), ten.accountID)
		step("account disabled outside the store", refused)
		exec(`UPDATE service_accounts SET disabled_at = NULL WHERE id = ?`, ten.accountID)
		step("account enabled", holds)
		exec(`UPDATE organizations SET archived_at = ? WHERE id = ?`, at(start), ten.org.ID)
		step("organization archived outside the store", refused)
		exec(`UPDATE organizations SET archived_at = NULL WHERE id = ?`, ten.org.ID)
		step("organization restored", holds)

		app.do(dev.user.as(request{method: http.MethodPost,
			path: "/api/v1/projects/" + ten.project.ID + "/service-accounts/" + ten.accountID + "/keys/" + ten.keyID + "/revoke"})).
			decode(t, http.StatusOK, &struct{}{})
		step("key revoked", refused)
	})
}
