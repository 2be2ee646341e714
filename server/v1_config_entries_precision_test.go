package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestConfigValueKeepsEveryDigit: values are stored as the JSON text sent, so numbers beyond
// float64 precision round-trip exactly, for plain values and secrets.
func TestConfigValueKeepsEveryDigit(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ten := app.newTenancy(t)
	owner := ten.members[RoleOwner]
	env := "/api/v1/environments/" + ten.project.Environments[1].ID + "/configs/"
	const value = `{"id":12345678901234567890123,"ratio":0.1000000000000000055511151231257827,"tags":["a","b"]}`
	for _, secret := range []string{"false", "true"} {
		key := "BIG_" + strings.ToUpper(secret)
		res := app.do(owner.as(request{method: http.MethodPut, path: env + key, body: `{"value":` + value + `,"secret":` + secret + `}`}))
		if res.Code != http.StatusCreated {
			t.Fatalf("put: %d %s", res.Code, res.Body)
		}
		got := app.do(owner.as(request{method: http.MethodGet, path: env + key}))
		if got.Code != http.StatusOK || !strings.Contains(got.Body.String(), `"value":`+value) {
			t.Fatalf("secret=%s: value did not round-trip exactly: %s", secret, got.Body)
		}
	}
}
