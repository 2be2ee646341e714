package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// envelope decodes a {"data": ...} body.
type envelope[T any] = apptest.Envelope[T]

type orgJSON struct {
	ID, Name, Slug, Role string
	ArchivedAt           *string `json:"archivedAt"`
}

type projectBody struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organizationId"`
	Name, Slug     string
	ArchivedAt     *string `json:"archivedAt"`
	Environments   []struct {
		ID, ProjectID, Name string
	} `json:"environments"`
}

type auditBody struct {
	ID, Action, RequestID, IPAddress, UserAgent string
	Actor, Target                               struct{ Type, ID string }
	OrganizationID, ProjectID                   *string
}

func TestOrganizationsAndProjects(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ada := app.newUser(t, "Ada", "ada@example.com")
		grace := app.newUser(t, "Grace", "grace@example.com")

		// Create: the caller becomes owner; the slug defaults to the slugified name.
		var org envelope[orgJSON]
		app.do(ada.as(request{method: "POST", path: "/api/v1/organizations", body: `{"name":"Acme Café & Co"}`})).
			decode(t, http.StatusCreated, &org)
		if org.Data.Slug != "acme-cafe-co" || org.Data.Role != "owner" || org.Data.ArchivedAt != nil {
			t.Fatalf("created %+v", org.Data)
		}
		app.do(grace.as(request{method: "POST", path: "/api/v1/organizations", body: `{"name":"Other","slug":"acme-cafe-co"}`})).
			wantProblem(t, http.StatusConflict, "conflict", "Organization slug already taken")
		p := app.do(ada.as(request{method: "POST", path: "/api/v1/organizations", body: `{"name":"","slug":"Bad Slug","extra":1}`})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.name", "body.slug", "body.extra")

		// Projects: three environments and two seeded roles, in one go.
		orgPath := "/api/v1/organizations/" + org.Data.ID
		var prj envelope[projectBody]
		app.do(ada.as(request{method: "POST", path: orgPath + "/projects", body: `{"name":"Storefront"}`})).
			decode(t, http.StatusCreated, &prj)
		var envNames []string
		for _, e := range prj.Data.Environments {
			envNames = append(envNames, e.Name)
			if e.ProjectID != prj.Data.ID {
				t.Errorf("environment %s belongs to %s", e.ID, e.ProjectID)
			}
		}
		if strings.Join(envNames, ",") != "development,staging,production" || prj.Data.Slug != "storefront" {
			t.Fatalf("project %+v", prj.Data)
		}
		roles, err := app.store.ListProjectRoles(context.Background(), prj.Data.ID)
		if err != nil || len(roles) != 2 {
			t.Fatalf("roles %+v %v", roles, err)
		}
		got := map[string]string{}
		for _, r := range roles {
			got[r.Slug] = strings.Join(r.Permissions, ",")
		}
		if got["project-admin"] != "*" || got["member"] != "profile:read" {
			t.Fatalf("seeded roles %v", got)
		}
		app.do(ada.as(request{method: "POST", path: orgPath + "/projects", body: `{"name":"Again","slug":"storefront"}`})).
			wantProblem(t, http.StatusConflict, "conflict", "Project slug already taken")

		// Strangers see nothing; GET includes environments.
		prjPath := "/api/v1/projects/" + prj.Data.ID
		app.do(grace.as(request{method: "GET", path: prjPath})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		var got1 envelope[projectBody]
		app.do(ada.as(request{method: "GET", path: prjPath})).decode(t, http.StatusOK, &got1)
		if len(got1.Data.Environments) != 3 {
			t.Fatalf("GET project environments: %+v", got1.Data)
		}

		// Archive → hidden from active lists and 404 by id; listed with state=archived|all; restore.
		var archived envelope[projectBody]
		app.do(ada.as(request{method: "DELETE", path: prjPath})).decode(t, http.StatusOK, &archived)
		if archived.Data.ArchivedAt == nil {
			t.Fatal("archive did not set archivedAt")
		}
		app.do(ada.as(request{method: "GET", path: prjPath})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		app.do(ada.as(request{method: "PATCH", path: prjPath, body: `{"name":"x"}`})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		for state, want := range map[string]int{"": 0, "?state=active": 0, "?state=archived": 1, "?state=all": 1} {
			var list envelope[[]projectBody]
			app.do(ada.as(request{method: "GET", path: orgPath + "/projects" + state})).decode(t, http.StatusOK, &list)
			if len(list.Data) != want {
				t.Errorf("list %q: %d projects, want %d", state, len(list.Data), want)
			}
		}
		app.do(ada.as(request{method: "GET", path: orgPath + "/projects?state=gone"})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		var restored envelope[projectBody]
		app.do(ada.as(request{method: "POST", path: prjPath + "/restore"})).decode(t, http.StatusOK, &restored)
		if restored.Data.ArchivedAt != nil {
			t.Fatal("restore did not clear archivedAt")
		}
		app.do(ada.as(request{method: "GET", path: prjPath})).decode(t, http.StatusOK, &got1)

		// Archiving the organization hides everything under it and clears active organizations.
		orgID := org.Data.ID
		if err := app.store.InTx(context.Background(), func(tx *store.Tx) error {
			return tx.SetActiveOrganization(context.Background(), ada.Session.ID, &orgID)
		}); err != nil {
			t.Fatal(err)
		}
		app.do(ada.as(request{method: "DELETE", path: orgPath})).decode(t, http.StatusOK, &org)
		app.do(ada.as(request{method: "GET", path: orgPath})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		app.do(ada.as(request{method: "GET", path: prjPath})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		app.do(ada.as(request{method: "POST", path: prjPath + "/restore"})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		sess, _, err := app.store.SessionByTokenHash(context.Background(), ada.Session.TokenHash)
		if err != nil || sess.ActiveOrganizationID != nil {
			t.Fatalf("active organization after archive: %v, %v", sess.ActiveOrganizationID, err)
		}
		var orgs envelope[[]orgJSON]
		app.do(ada.as(request{method: "GET", path: "/api/v1/organizations?state=archived"})).decode(t, http.StatusOK, &orgs)
		if len(orgs.Data) != 1 || orgs.Data[0].ID != orgID {
			t.Fatalf("archived organizations: %+v", orgs.Data)
		}
		app.do(ada.as(request{method: "POST", path: orgPath + "/restore"})).decode(t, http.StatusOK, &org)
		app.do(ada.as(request{method: "GET", path: prjPath})).decode(t, http.StatusOK, &got1)
	})
}

func TestAuditLog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		prjPath := "/api/v1/projects/" + ten.project.ID

		r := owner.as(request{method: "PATCH", path: prjPath, body: `{"name":"Renamed"}`,
			headers: map[string]string{"X-Request-Id": "rename-1", "User-Agent": "audit-test/1.0"}})
		res := app.do(r)
		if res.Code != http.StatusOK {
			t.Fatalf("patch: %d %s", res.Code, res.Body)
		}
		var logs envelope[[]auditBody]
		app.do(owner.as(request{method: "GET", path: prjPath + "/audit-logs"})).decode(t, http.StatusOK, &logs)
		if len(logs.Data) == 0 {
			t.Fatal("no audit rows")
		}
		e := logs.Data[0]
		if e.Action != "project.update" || e.RequestID != "rename-1" || e.RequestID != res.Header().Get("X-Request-Id") ||
			e.Actor.Type != "user" || e.Actor.ID != owner.ID || e.Target.ID != ten.project.ID ||
			e.IPAddress != "192.0.2.10" || e.UserAgent != "audit-test/1.0" || e.ProjectID == nil || *e.OrganizationID != ten.org.ID {
			t.Fatalf("audit row %+v", e)
		}
		// A failed mutation writes nothing.
		before := len(logs.Data)
		app.do(owner.as(request{method: "PATCH", path: prjPath, body: `{"slug":"BAD"}`})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		app.do(owner.as(request{method: "GET", path: prjPath + "/audit-logs"})).decode(t, http.StatusOK, &logs)
		if len(logs.Data) != before {
			t.Fatalf("a refused request wrote an audit row")
		}

		// At most 100, newest first.
		for i := 0; i < 105; i++ {
			res := app.do(owner.as(request{method: "PATCH", path: prjPath, body: fmt.Sprintf(`{"name":"n%d"}`, i)}))
			if res.Code != http.StatusOK {
				t.Fatalf("patch %d: %d", i, res.Code)
			}
		}
		app.do(owner.as(request{method: "GET", path: prjPath + "/audit-logs"})).decode(t, http.StatusOK, &logs)
		if len(logs.Data) != 100 {
			t.Fatalf("%d entries, want 100", len(logs.Data))
		}
		for i := 1; i < len(logs.Data); i++ {
			if logs.Data[i-1].ID < logs.Data[i].ID {
				t.Fatalf("entries not newest first at %d", i)
			}
		}
		var orgLogs envelope[[]auditBody]
		app.do(owner.as(request{method: "GET", path: "/api/v1/organizations/" + ten.org.ID + "/audit-logs"})).decode(t, http.StatusOK, &orgLogs)
		if len(orgLogs.Data) != 100 {
			t.Fatalf("organization log: %d entries", len(orgLogs.Data))
		}
		// A viewer may read the log (audit:read); a stranger may not see it exists.
		app.do(ten.members[RoleViewer].as(request{method: "GET", path: prjPath + "/audit-logs"})).decode(t, http.StatusOK, &logs)
		app.do(ten.stranger.as(request{method: "GET", path: prjPath + "/audit-logs"})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
	})
}

// wantPaths asserts that the validation errors name exactly these dotted paths.
func wantPaths(t *testing.T, errs []FieldError, paths ...string) {
	t.Helper()
	got := map[string]bool{}
	for _, e := range errs {
		got[strings.Join(e.Path, ".")] = true
	}
	for _, p := range paths {
		if !got[p] {
			t.Errorf("validation errors %+v lack path %s", errs, p)
		}
	}
	if len(got) != len(paths) {
		t.Errorf("validation errors %+v, want exactly %v", errs, paths)
	}
}
