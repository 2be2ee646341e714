package server

import (
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestEmailFormat: kin-openapi does not check `format: email` by itself; Gatehouse registers a
// strict checker, so a display name or garbage is a 400 on the email's path, before any handler.
func TestEmailFormat(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	for _, email := range []string{"Ada <ada@example.com>", "ada", "ada@", "@example.com", "a b@example.com", "ada@example.com, bob@example.com"} {
		t.Run(email, func(t *testing.T) {
			res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
				body: `{"name":"Ada","email":"` + email + `","password":"correct-horse-battery"}`})
			p := res.wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
			wantPaths(t, p.Errors, "body.email")
		})
	}
}
