package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestInvalidOriginNamesExpected: a write refused for its Origin says what was expected in the
// problem's detail: the configured base URL, and whether trusted origins exist (never their
// list). The case that needs it: only GATEHOUSE_LISTEN_ADDR was changed, so the browser's origin
// (port 3000) is not the base URL's (port 8080).
func TestInvalidOriginNamesExpected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		for _, c := range []struct {
			name    string
			trusted []string
			detail  string
		}{
			{"no trusted origins", nil, "The Origin (or Referer) must be the base URL http://localhost:8080 (GATEHOUSE_BASE_URL); " +
				"no trusted origins are configured (GATEHOUSE_TRUSTED_ORIGINS)."},
			{"trusted origins", []string{"https://app.example.com"}, "The Origin (or Referer) must be the base URL " +
				"http://localhost:8080 (GATEHOUSE_BASE_URL) or one of the trusted origins (GATEHOUSE_TRUSTED_ORIGINS)."},
		} {
			t.Run(c.name, func(t *testing.T) {
				cfg := testConfig()
				cfg.ListenAddr, cfg.BaseURL, cfg.TrustedOrigins = ":3000", "http://localhost:8080", c.trusted
				app := newTestApp(t, st, cfg)
				ada := app.newFixtureUser(t, "Ada", "ada-"+strings.ReplaceAll(c.name, " ", "-")+"@example.com")
				for _, r := range []request{
					{method: http.MethodPost, path: "/api/v1/organizations", body: `{"name":"Acme"}`},
					{method: http.MethodPost, path: "/api/auth/sign-out"},
				} {
					r.headers = map[string]string{"Cookie": ada.Cookie, "Origin": "http://localhost:3000"}
					res := app.do(r)
					if res.Code != http.StatusForbidden {
						t.Fatalf("%s: status %d, want 403; %s", r.path, res.Code, res.Body)
					}
					var p struct{ Type, Title, Detail, Code string }
					if err := json.Unmarshal(res.Body.Bytes(), &p); err != nil {
						t.Fatal(err)
					}
					if p.Type != "http://localhost:8080/problems/http-403" || p.Title != "Invalid origin" || p.Detail != c.detail {
						t.Errorf("%s: type %q, title %q, detail %q; want http-403, Invalid origin, %q", r.path, p.Type, p.Title, p.Detail, c.detail)
					}
					if r.path == "/api/auth/sign-out" && p.Code != "INVALID_ORIGIN" {
						t.Errorf("sign-out: code %q, want INVALID_ORIGIN", p.Code)
					}
				}
			})
		}
	})
}
