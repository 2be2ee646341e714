package server

import (
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestGetSessionTwoFactorEnabled: get-session's user carries twoFactorEnabled (better-auth's
// twoFactor plugin field), which the console's account view reads: false before enrolment,
// still false while an enrolment waits for its first code, true once a code turned it on, and
// false again after disable.
func TestGetSessionTwoFactorEnabled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		enabled := func(want bool) {
			t.Helper()
			var body struct {
				User map[string]any `json:"user"`
			}
			a.do(u.as(request{method: http.MethodGet, path: "/api/auth/get-session?disableRefresh=true"})).decode(t, http.StatusOK, &body)
			got, ok := body.User["twoFactorEnabled"]
			if !ok || got != want {
				t.Fatalf("get-session user.twoFactorEnabled = %v (present %v), want %v", got, ok, want)
			}
		}
		enabled(false)
		var e enrolment
		a.do(u.as(jsonPost("/api/auth/two-factor/enable", `{"password":"password-ada@example.com"}`))).decode(t, http.StatusOK, &e)
		enabled(false) // enrolled, not confirmed by a code yet
		secret := totpSecret(t, e.TotpURI, u.Email)
		a.do(u.as(jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+code(t, secret, a.clock.Now())+`"}`))).decode(t, http.StatusOK, &struct{}{})
		enabled(true)
		a.do(u.as(jsonPost("/api/auth/two-factor/disable", `{"password":"password-ada@example.com"}`))).decode(t, http.StatusOK, &struct{}{})
		enabled(false)
	})
}
