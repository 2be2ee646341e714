package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/server/consoleui"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestConsoleRoutes: the base URL and /docs are browser entry points (redirects), the console
// shell answers every path under /console/ with its CSP and no-store, and an unknown path
// elsewhere keeps the JSON 404.
func TestConsoleRoutes(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	redirects := map[string]string{"/": "/console/", "/docs": "/docs/api-reference", "/console": "/console/"}
	for path, want := range redirects {
		res := app.do(getPage(path))
		if res.Code/100 != 3 || res.Header().Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want a redirect to %q", path, res.Code, res.Header().Get("Location"), want)
		}
	}
	// The shell (200 when this binary embeds a built console, else the 503 page saying how to
	// build it): the same document for every route the app's router handles.
	want := http.StatusServiceUnavailable
	if consoleui.New(consoleui.Dist(), "").Available() {
		want = http.StatusOK
	}
	var first string
	for _, path := range []string{"/console/", "/console/orgs/org_x/projects", "/console/organizations?state=archived"} {
		res := app.do(getPage(path))
		h := res.Header()
		if res.Code != want || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s, want %d HTML", path, res.Code, h.Get("Content-Type"), want)
		}
		if h.Get("Content-Security-Policy") != consoleui.ContentSecurityPolicy || h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: CSP %q, Cache-Control %q", path, h.Get("Content-Security-Policy"), h.Get("Cache-Control"))
		}
		if first == "" {
			first = res.Body.String()
		} else if res.Body.String() != first {
			t.Errorf("GET %s: another document than /console/", path)
		}
	}
	// A missing hashed asset is a 404, never the shell; a path outside the console is the API's 404.
	app.do(getPage("/console/assets/missing-0000.js")).wantProblem(t, 404, "http-404", "Not found")
	app.do(getPage("/nowhere")).wantProblem(t, 404, "http-404", "Not found")
	app.do(getPage("/consoles")).wantProblem(t, 404, "http-404", "Not found")
}

// TestMyOrganizationPermissions: a member reads its own role and the permissions it grants;
// a non-member gets 404, a signed-out caller 401 and an API key 403, on each backend.
func TestMyOrganizationPermissions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		owner := app.newFixtureUser(t, "Owner", "owner@example.com")
		viewer := app.newFixtureUser(t, "Viewer", "viewer@example.com")
		billing := app.newFixtureUser(t, "Billing", "billing@example.com")
		stranger := app.newFixtureUser(t, "Stranger", "stranger@example.com")
		org := store.Organization{Name: "Acme", Slug: "acme"}
		ctx := context.Background()
		err := app.store.InTx(ctx, func(tx *store.Tx) error {
			if _, err := tx.CreateOrganization(ctx, &org, owner.ID); err != nil {
				return err
			}
			if _, err := tx.AddMember(ctx, org.ID, viewer.ID, RoleViewer); err != nil {
				return err
			}
			_, err := tx.AddMember(ctx, org.ID, billing.ID, RoleBilling+","+RoleViewer)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		path := "/api/v1/organizations/" + org.ID + "/permissions"
		type body struct {
			Data struct {
				Role        string   `json:"role"`
				Permissions []string `json:"permissions"`
			} `json:"data"`
		}
		cases := []struct {
			who  testUser
			role string
			want string
		}{
			{owner, "owner", "audit:read billing:manage billing:read config:delete config:read config:reveal config:update credential:manage credential:read member:manage organization:delete organization:update project:create project:delete project:read project:update usage:read usage:write"},
			{viewer, "viewer", "audit:read billing:read config:read credential:read project:read usage:read"},
			{billing, "billing,viewer", "audit:read billing:manage billing:read config:read credential:read project:read usage:read"},
		}
		for _, c := range cases {
			var got body
			app.do(c.who.as(request{method: http.MethodGet, path: path})).decode(t, http.StatusOK, &got)
			if got.Data.Role != c.role || strings.Join(got.Data.Permissions, " ") != c.want {
				t.Errorf("%s: role %q permissions %v, want %q %s", c.role, got.Data.Role, got.Data.Permissions, c.role, c.want)
			}
		}
		app.do(stranger.as(request{method: http.MethodGet, path: path})).wantProblem(t, 404, "http-404", "Not found")
		app.do(request{method: http.MethodGet, path: path}).wantProblem(t, 401, "http-401", "Authentication required")
		app.do(owner.as(request{method: http.MethodGet, path: "/api/v1/organizations/org_01JD3M4R8Q6ZK7W2N5T9XHVB3C/permissions"})).
			wantProblem(t, 404, "http-404", "Not found")
	})
}

// TestHostedSignInPage: the console's sign-in page. Signed out it shows the sign-in form whose
// callbackURL is the page itself; a wrong password comes back to it with the sentence and the
// email filled in; the right one (through the page) goes on to the console; signed in, the page
// sends the browser on at once; a callbackURL off this site is refused.
func TestHostedSignInPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ada := app.newUser(t, "Ada", "ada@example.com")
		page := "/api/auth/sign-in?callbackURL=" + url.QueryEscape("/console/orgs/o1/projects")
		body := wantHostedPage(t, "signed out", app.do(getPage(page)), 200, "<h1>Sign in</h1>",
			`<form method="post" action="/api/auth/sign-in/email">`, `id="passkey"`)
		if hiddenOf(body, "callbackURL") != page {
			t.Fatalf("form callbackURL %q, want the page %q", hiddenOf(body, "callbackURL"), page)
		}
		res := app.do(browserForm("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"}, "callbackURL": {page}}))
		retry := res.Header().Get("Location")
		if res.Code != http.StatusSeeOther || !strings.HasPrefix(retry, "/api/auth/sign-in?") || !strings.Contains(retry, "login_error=invalid_credentials") {
			t.Fatalf("wrong password: %d to %q", res.Code, retry)
		}
		wantHostedPage(t, "after a wrong password", app.do(getPage(retry)), 200,
			`<p class="error" role="alert">The email or password is not correct.</p>`, `value="ada@example.com"`)
		res = app.do(browserForm("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"password-" + ada.Email}, "callbackURL": {page}}))
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != page {
			t.Fatalf("right password: %d to %q, want %q", res.Code, res.Header().Get("Location"), page)
		}
		res = app.do(ada.as(getPage(page)))
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != "/console/orgs/o1/projects" {
			t.Fatalf("signed in: %d to %q", res.Code, res.Header().Get("Location"))
		}
		for _, bad := range []string{"//evil.example/console/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"} {
			wantHostedPage(t, "callbackURL "+bad, app.do(getPage("/api/auth/sign-in?callbackURL="+url.QueryEscape(bad))), 400,
				"This sign-in link is malformed")
		}
	})
}
