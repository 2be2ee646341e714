package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// orgBody is an organization as /api/v1 answers it.
type orgBody struct {
	ID               string `json:"id"`
	Role             string `json:"role"`
	RequireTwoFactor bool   `json:"requireTwoFactor"`
}

// TestOrganizationRequiresTwoFactor: an owner with a second factor makes the organization
// require one; until they enrol, members without one are refused on its /api/v1 routes with
// 403 two-factor-required, members with one and service accounts are not; an admin cannot
// change the rule, an owner without a factor cannot turn it on, and turning it off lets
// everyone back.
func TestOrganizationRequiresTwoFactor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTFApp(t, b)
		ctx := context.Background()
		owner := a.newUser(t, "Owner", "owner@example.com")
		admin := a.newUser(t, "Admin", "admin@example.com")
		viewer := a.newUser(t, "Viewer", "viewer@example.com")
		org := store.Organization{Name: "Acme", Slug: "acme"}
		prj := store.Project{Name: "Shop", Slug: "shop"}
		err := a.store.InTx(ctx, func(tx *store.Tx) error {
			if _, err := tx.CreateOrganization(ctx, &org, owner.ID); err != nil {
				return err
			}
			for u, role := range map[string]string{admin.ID: RoleAdmin, viewer.ID: RoleViewer} {
				if _, err := tx.AddMember(ctx, org.ID, u, role); err != nil {
					return err
				}
			}
			prj.OrganizationID = org.ID
			return tx.CreateProject(ctx, &prj)
		})
		if err != nil {
			t.Fatal(err)
		}
		orgPath := "/api/v1/organizations/" + org.ID
		get := func(u testUser) response {
			return a.do(u.as(request{method: http.MethodGet, path: orgPath}))
		}
		patch := func(u testUser, body string) response {
			return a.do(u.as(request{method: http.MethodPatch, path: orgPath, body: body}))
		}
		var got envelope[orgBody]
		get(owner).decode(t, http.StatusOK, &got)
		if got.Data.RequireTwoFactor {
			t.Fatal("requireTwoFactor defaults to true")
		}
		// A service account of the organization's project, made while nothing is required.
		var sa envelope[struct {
			APIKey string `json:"apiKey"`
		}]
		a.do(owner.as(request{method: http.MethodPost, path: "/api/v1/projects/" + prj.ID + "/service-accounts",
			body: `{"name":"ci","scopes":["project:read"]}`})).decode(t, http.StatusCreated, &sa)

		// Bad input, an admin, and an owner without a factor change nothing.
		patch(owner, `{"requireTwoFactor":"yes"}`).wantProblem(t, http.StatusBadRequest, kindValidation, titleValidation)
		patch(admin, `{"requireTwoFactor":true}`).wantProblem(t, http.StatusForbidden, kindForbidden, titlePermissionDenied)
		res := patch(owner, `{"requireTwoFactor":true}`)
		res.wantProblem(t, http.StatusForbidden, "two-factor-required", "Two-factor authentication required")
		if !strings.Contains(res.Body.String(), `"detail":"This organization requires two-factor authentication: turn it on at /api/auth/account (the account page: TOTP or a passkey; or with /api/auth/two-factor/enable), then try again."`) {
			t.Errorf("problem does not say where to enrol: %s", res.Body)
		}
		get(owner).decode(t, http.StatusOK, &got)
		if got.Data.RequireTwoFactor {
			t.Fatal("a refused PATCH turned the rule on")
		}

		a.enable(t, owner)
		patch(owner, `{"requireTwoFactor":true}`).decode(t, http.StatusOK, &got)
		if !got.Data.RequireTwoFactor || got.Data.Role != RoleOwner {
			t.Fatalf("PATCH = %+v", got.Data)
		}
		get(owner).decode(t, http.StatusOK, &got)
		if !got.Data.RequireTwoFactor {
			t.Fatal("GET after PATCH: requireTwoFactor false")
		}
		entries := auditEntries(t, a.store, "organization.update")
		if len(entries) != 1 || mustJSON(entries[0].Metadata) != `{"fields":["requireTwoFactor"]}` {
			t.Errorf("organization.update audit rows = %+v", entries)
		}

		// Members without a factor are refused, on the organization and under it.
		for _, path := range []string{orgPath, orgPath + "/projects", "/api/v1/projects/" + prj.ID, "/api/v1/environments/" + prj.Environments[0].ID + "/configs"} {
			a.do(viewer.as(request{method: http.MethodGet, path: path})).
				wantProblem(t, http.StatusForbidden, "two-factor-required", "Two-factor authentication required")
		}
		patch(admin, `{"name":"Acme Corp"}`).wantProblem(t, http.StatusForbidden, "two-factor-required", "Two-factor authentication required")
		// Service accounts are not affected.
		if res := a.do(withKey(sa.Data.APIKey, request{method: http.MethodGet, path: "/api/v1/projects/" + prj.ID})); res.Code != http.StatusOK {
			t.Fatalf("service account: %d %s", res.Code, res.Body)
		}
		// Once the viewer enrols, they are let in.
		a.clock.Advance(30 * time.Second)
		a.enable(t, viewer)
		get(viewer).decode(t, http.StatusOK, &got)
		for _, path := range []string{orgPath + "/projects", "/api/v1/projects/" + prj.ID, "/api/v1/environments/" + prj.Environments[0].ID + "/configs"} {
			if res := a.do(viewer.as(request{method: http.MethodGet, path: path})); res.Code != http.StatusOK {
				t.Fatalf("%s after enrolling: %d %s", path, res.Code, res.Body)
			}
		}

		// Off again: the admin without a factor is back.
		patch(owner, `{"requireTwoFactor":false}`).decode(t, http.StatusOK, &got)
		if got.Data.RequireTwoFactor {
			t.Fatal("PATCH false left it on")
		}
		get(admin).decode(t, http.StatusOK, &got)
	})
}
