package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestDeleteSubject: a project may delete a user only when one of its own OIDC clients holds a
// grant from them; the user then goes with sessions, memberships, role bindings (in every
// project) and OAuth tokens; audit rows stay; a second delete is 404.
func TestDeleteSubject(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ctx := context.Background()
		ten := app.newTenancy(t)
		other := app.newTenancy(t) // another organization's project, with its own client
		owner := ten.members[RoleOwner]
		del := func(subject string) response {
			return app.do(owner.as(request{method: http.MethodDelete, path: "/api/v1/projects/" + ten.project.ID + "/subjects/" + subject}))
		}

		t.Run("unknown subject", func(t *testing.T) {
			del("usr_nobody").wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		})
		t.Run("no grant from this project's clients", func(t *testing.T) {
			// A member of the organization who never signed in to its clients.
			del(ten.members[RoleViewer].ID).wantProblem(t, http.StatusForbidden, "http-403",
				"No OIDC client of this project holds a consent or refresh token from this subject")
		})
		t.Run("a grant to another project's client only", func(t *testing.T) {
			u := app.newFixtureUser(t, "Grace", "grace-"+ten.org.Slug+"@example.com")
			app.grantRefreshToken(t, other.clientID, u.ID)
			del(u.ID).wantProblem(t, http.StatusForbidden, "http-403",
				"No OIDC client of this project holds a consent or refresh token from this subject")
			// The other project may.
			res := app.do(other.members[RoleOwner].as(request{method: http.MethodDelete,
				path: "/api/v1/projects/" + other.project.ID + "/subjects/" + u.ID}))
			if res.Code != http.StatusOK {
				t.Fatalf("the other project: %d %s", res.Code, res.Body)
			}
		})
		t.Run("a consent to another project's client only", func(t *testing.T) {
			u := app.newFixtureUser(t, "Ida", "ida-"+ten.org.Slug+"@example.com")
			app.grantConsent(t, other.clientID, u.ID)
			del(u.ID).wantProblem(t, http.StatusForbidden, "http-403",
				"No OIDC client of this project holds a consent or refresh token from this subject")
		})
		t.Run("a consent alone counts", func(t *testing.T) {
			u := app.newFixtureUser(t, "Joan", "joan-"+ten.org.Slug+"@example.com")
			app.grantConsent(t, ten.clientID, u.ID)
			var body envelope[struct {
				Consents int `json:"consents"`
			}]
			del(u.ID).decode(t, http.StatusOK, &body)
			if body.Data.Consents != 1 {
				t.Errorf("consents = %d, want 1", body.Data.Consents)
			}
		})
		t.Run("a revoked refresh token does not count", func(t *testing.T) {
			u := app.newFixtureUser(t, "Lin", "lin-"+ten.org.Slug+"@example.com")
			sig := app.grantRefreshToken(t, ten.clientID, u.ID)
			if err := app.store.InTx(ctx, func(tx *store.Tx) error {
				_, err := tx.DeactivateOAuthToken(ctx, store.OAuthRefresh, sig)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			del(u.ID).wantProblem(t, http.StatusForbidden, "http-403",
				"No OIDC client of this project holds a consent or refresh token from this subject")
		})

		t.Run("deleted with what it owns", func(t *testing.T) {
			// The fixture subject holds a refresh token of the project's client; give them a
			// membership, role bindings in two projects and a second token too.
			subject := ten.subjectID
			u, err := app.store.User(ctx, subject)
			if err != nil {
				t.Fatal(err)
			}
			if err := app.store.InTx(ctx, func(tx *store.Tx) error {
				_, err := tx.AddMember(ctx, ten.org.ID, subject, RoleViewer)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for _, x := range []tenancy{ten, other} {
				app.do(x.members[RoleOwner].as(request{method: http.MethodPost, path: "/api/v1/projects/" + x.project.ID + "/role-bindings",
					body: `{"roleId":"` + x.roleID + `","principalType":"user","principalId":"` + subject + `"}`})).decode(t, http.StatusCreated, &struct{}{})
			}
			second := app.grantRefreshToken(t, ten.clientID, subject)

			var body envelope[struct {
				SubjectID    string `json:"subjectId"`
				Deleted      bool   `json:"deleted"`
				RoleBindings int    `json:"roleBindings"`
				OAuthTokens  int    `json:"oauthTokens"`
				Consents     int    `json:"consents"`
			}]
			del(subject).decode(t, http.StatusOK, &body)
			if d := body.Data; d.SubjectID != subject || !d.Deleted || d.RoleBindings != 2 || d.OAuthTokens != 2 || d.Consents != 0 {
				t.Fatalf("deletion = %+v, want 2 bindings and 2 tokens", d)
			}
			if _, err := app.store.User(ctx, subject); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("user still there: %v", err)
			}
			if _, _, err := app.store.UserByEmail(ctx, u.Email); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("sign-in would still find the user: %v", err)
			}
			for _, x := range []tenancy{ten, other} {
				bs, err := app.store.ListRoleBindings(ctx, x.project.ID, store.RoleBindingFilter{PrincipalType: "user", PrincipalID: subject})
				if err != nil || len(bs) != 0 {
					t.Errorf("bindings left in %s: %v %v", x.project.ID, bs, err)
				}
			}
			if _, err := app.store.OAuthToken(ctx, store.OAuthRefresh, second); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("refresh token left: %v", err)
			}
			var members struct {
				Members []struct {
					UserID string `json:"userId"`
				} `json:"members"`
			}
			app.do(owner.as(request{method: http.MethodGet, path: "/api/auth/organization/list-members?organizationId=" + ten.org.ID})).
				decode(t, http.StatusOK, &members)
			for _, m := range members.Members {
				if m.UserID == subject {
					t.Error("membership left")
				}
			}
			// Audited, and the audit row outlives the user.
			entries, err := app.store.ListAudit(ctx, store.AuditFilter{ProjectID: ten.project.ID})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range entries {
				found = found || (e.Action == "subject.delete" && e.TargetID == subject && e.ActorID == owner.ID)
			}
			if !found {
				t.Error("no subject.delete audit row")
			}
			// A second delete: 404.
			del(subject).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		})
		if strings.Contains(app.logs.String(), "level=ERROR") {
			t.Errorf("errors logged:\n%s", app.logs.String())
		}
	})
}

// grantConsent records that subject consented to clientID for openid and profile, as the
// consent page does.
func (a *testApp) grantConsent(t *testing.T, clientID, subject string) {
	t.Helper()
	ctx := context.Background()
	err := a.store.InTx(ctx, func(tx *store.Tx) error {
		return tx.GrantOAuthConsent(ctx, &store.OAuthConsent{UserID: subject, ClientID: clientID,
			Scopes: []string{"openid", "profile"}, GrantedAt: a.store.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
}
