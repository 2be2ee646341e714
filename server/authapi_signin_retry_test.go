package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestSignInRetryURL: a browser's failed sign-in goes back to the hosted sign-in page's
// continuation with the typed email as login_hint (replacing the request's own), to a
// product's callbackURL without it, and the address reaches no log line.
func TestSignInRetryURL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ada := app.newUser(t, "Ada", "ada@example.com")
		fail := func(callbackURL string) string {
			t.Helper()
			res := app.do(form("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"},
				"callbackURL": {callbackURL}}))
			if res.Code != http.StatusSeeOther {
				t.Fatalf("failed sign-in to %s: %d %s", callbackURL, res.Code, res.Body)
			}
			return res.Header().Get("Location")
		}

		loc := fail("/api/auth/oauth2/authorize?client_id=cli_x&login_hint=someone-else%40example.com&state=s1")
		if want := "/api/auth/oauth2/authorize?client_id=cli_x&login_error=invalid_credentials&login_hint=ada%40example.com&state=s1"; loc != want {
			t.Errorf("hosted page: Location %q, want %q", loc, want)
		}
		app.do(request{method: http.MethodGet, path: loc}) // the page's own request, logged too
		for _, product := range []string{"https://app.example.com/sign-in?next=%2Fhome", "/sign-in"} {
			loc := fail(product)
			if strings.Contains(loc, "login_hint") || strings.Contains(loc, "ada") || !strings.Contains(loc, "login_error=invalid_credentials") {
				t.Errorf("product callback %s: Location %q", product, loc)
			}
		}
		for _, leak := range []string{"ada@example.com", "ada%40example.com"} {
			if strings.Contains(app.logs.String(), leak) {
				t.Errorf("the logs hold %q:\n%s", leak, app.logs.String())
			}
		}
	})
}
