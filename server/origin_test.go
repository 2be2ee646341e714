package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestCookieWritesNeedTrustedOrigin: a cookie-authenticated unsafe /api/v1 request is refused
// unless Origin (or Referer) is the base URL or a trusted origin, and refused before anything is
// written; safe methods are not affected.
func TestCookieWritesNeedTrustedOrigin(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ada := app.newFixtureUser(t, "Ada", "ada@example.com")
	create := func(headers map[string]string, name string) response {
		h := map[string]string{"Cookie": ada.Cookie}
		for k, v := range headers {
			h[k] = v
		}
		return app.do(request{method: http.MethodPost, path: "/api/v1/organizations", body: `{"name":"` + name + `"}`, headers: h})
	}
	cases := []struct {
		name    string
		headers map[string]string
		status  int
		title   string
	}{
		{"cross-site origin", map[string]string{"Origin": "https://evil.example"}, 403, "Invalid origin"},
		{"look-alike origin", map[string]string{"Origin": "https://app.example.com.evil.io"}, 403, "Invalid origin"},
		{"null origin", map[string]string{"Origin": "null"}, 403, "Missing or null Origin"},
		{"no origin or referer", nil, 403, "Missing or null Origin"},
		{"cross-site referer", map[string]string{"Referer": "https://evil.example/page"}, 403, "Invalid origin"},
		{"trusted referer", map[string]string{"Referer": "https://app.example.com/settings"}, 201, ""},
		{"trusted product origin", map[string]string{"Origin": "https://app.example.com"}, 201, ""},
		{"own origin", map[string]string{"Origin": testBaseURL}, 201, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := create(tc.headers, fmt.Sprintf("Acme %d", i))
			if tc.status != 201 {
				res.wantProblem(t, tc.status, "http-403", tc.title)
				return
			}
			if res.Code != 201 {
				t.Fatalf("status %d: %s", res.Code, res.Body)
			}
		})
	}
	// Only the three accepted requests created organizations: the refused ones wrote nothing.
	var orgs envelope[[]orgJSON]
	app.do(ada.as(request{method: http.MethodGet, path: "/api/v1/organizations"})).decode(t, http.StatusOK, &orgs)
	if len(orgs.Data) != 3 {
		t.Fatalf("%d organizations exist, want 3", len(orgs.Data))
	}
	// Safe methods need no Origin.
	res := app.do(request{method: http.MethodGet, path: "/api/v1/organizations", headers: map[string]string{"Cookie": ada.Cookie}})
	if res.Code != http.StatusOK {
		t.Fatalf("GET without Origin: %d", res.Code)
	}
}

// TestNullOriginCannotSignIn: sign-in and sign-up, JSON or form, with "Origin: null" and no
// cookie are refused before any credential is checked or session made (login CSRF from a
// sandboxed frame); without any Origin (a non-browser client) they work.
func TestNullOriginCannotSignIn(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	app.newUser(t, "Ada", "ada@example.com")
	cases := []struct {
		name, path, contentType, body string
	}{
		{"sign-in json", "/api/auth/sign-in/email", "application/json", `{"email":"ada@example.com","password":"password-ada@example.com"}`},
		{"sign-in form", "/api/auth/sign-in/email", "application/x-www-form-urlencoded", "email=ada%40example.com&password=password-ada%40example.com"},
		{"sign-up json", "/api/auth/sign-up/email", "application/json", `{"name":"Eve","email":"eve@example.com","password":"correct horse battery"}`},
		{"sign-up form", "/api/auth/sign-up/email", "application/x-www-form-urlencoded", "name=Eve&email=eve%40example.com&password=correct+horse+battery"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := app.do(request{method: http.MethodPost, path: tc.path, body: tc.body,
				headers: map[string]string{"Origin": "null", "Content-Type": tc.contentType}})
			res.wantProblem(t, http.StatusForbidden, "http-403", "Missing or null Origin")
			if sc := res.Header().Values("Set-Cookie"); len(sc) > 0 {
				t.Errorf("refused request set cookies: %v", sc)
			}
		})
	}
	// Nothing was created by the refused sign-ups; a client without Origin still signs up.
	res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
		body: `{"name":"Eve","email":"eve@example.com","password":"correct horse battery"}`})
	if res.Code != http.StatusOK {
		t.Fatalf("sign-up without Origin = %d %s", res.Code, res.Body)
	}
}
