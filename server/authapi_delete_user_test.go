package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// deleteUser posts body to delete-user with cookie.
func deleteUser(app *testApp, cookie, body string) response {
	return app.do(withCookie(cookie, request{method: http.MethodPost, path: "/api/auth/delete-user", body: body}))
}

// newOrgOwnedBy creates organization name (slug slug) owned by ownerID, with the other users
// as members holding the roles given.
func newOrgOwnedBy(t *testing.T, app *testApp, name, slug, ownerID string, members map[string]string) store.Organization {
	t.Helper()
	ctx := context.Background()
	o := store.Organization{Name: name, Slug: slug}
	err := app.store.InTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.CreateOrganization(ctx, &o, ownerID); err != nil {
			return err
		}
		for userID, role := range members {
			if _, err := tx.AddMember(ctx, o.ID, userID, role); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDeleteUser: a user deletes their own account with its password; it goes as subject
// deletion takes it (sessions, memberships, role bindings, OAuth tokens and consents), the
// cookie is expired, sign-in is refused and the deletion is audited.
func TestDeleteUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ctx := context.Background()
		ten := app.newTenancy(t)
		pw := "password-ada@example.com"
		ada := app.newUser(t, "Ada", "ada@example.com")
		_, cookie := app.signIn(t, ada.Email, pw) // a second session
		// Ada is a developer of the tenancy's organization, bound to a project role, and has
		// given its OIDC client a refresh token and a consent.
		if err := app.store.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.AddMember(ctx, ten.org.ID, ada.ID, RoleDeveloper)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		app.do(ten.members[RoleOwner].as(request{method: http.MethodPost, path: "/api/v1/projects/" + ten.project.ID + "/role-bindings",
			body: `{"roleId":"` + ten.roleID + `","principalType":"user","principalId":"` + ada.ID + `"}`})).decode(t, http.StatusCreated, &struct{}{})
		refresh := app.grantRefreshToken(t, ten.clientID, ada.ID)
		app.grantConsent(t, ten.clientID, ada.ID)

		res := deleteUser(app, cookie, `{"password":`+jsonString(pw)+`}`)
		if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != `{"message":"User deleted","success":true}` {
			t.Fatalf("delete-user = %d %s", res.Code, res.Body)
		}
		if set := res.Header().Get("Set-Cookie"); set != "gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax" {
			t.Errorf("Set-Cookie = %q, want the session cookie expired", set)
		}
		if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q", cc)
		}

		// Both sessions are gone, and the password no longer signs in.
		for _, c := range []string{cookie, ada.Cookie} {
			if got := app.do(withCookie(c, request{method: http.MethodGet, path: "/api/auth/get-session"})); strings.TrimSpace(got.Body.String()) != "null" {
				t.Errorf("get-session after deletion = %d %s, want null", got.Code, got.Body)
			}
		}
		p := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":` + jsonString(pw) + `}`}).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		if p.Message != "Invalid email or password" {
			t.Errorf("sign-in message = %q", p.Message)
		}
		// The OAuth grants, the membership and the role binding went with the user.
		if _, err := app.store.OAuthToken(ctx, store.OAuthRefresh, refresh); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refresh token: %v, want ErrNotFound", err)
		}
		if consents, err := app.store.OAuthConsents(ctx, ada.ID, ten.clientID); err != nil || len(consents) != 0 {
			t.Errorf("consents = %+v, %v; want none", consents, err)
		}
		if _, err := app.store.Member(ctx, ten.org.ID, ada.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("membership: %v, want ErrNotFound", err)
		}
		if bs, err := app.store.ListRoleBindings(ctx, ten.project.ID, store.RoleBindingFilter{PrincipalType: "user", PrincipalID: ada.ID}); err != nil || len(bs) != 0 {
			t.Errorf("role bindings = %+v, %v; want none", bs, err)
		}
		if _, err := app.store.User(ctx, ada.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("user: %v, want ErrNotFound", err)
		}

		// Audited by the user about themselves, with what went, and no password in it.
		wantAuditRow(t, app.store, "user.delete", ada.ID, pw)
		e := auditEntries(t, app.store, "user.delete")[0]
		if meta, _ := json.Marshal(e.Metadata); string(meta) != `{"consents":1,"oauthTokens":1,"roleBindings":1}` {
			t.Errorf("audit metadata = %s", meta)
		}

		t.Run("signed out", func(t *testing.T) {
			app.do(request{method: http.MethodPost, path: "/api/auth/delete-user", body: `{"password":"whatever"}`}).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		})
	})
}

// TestDeleteUserPassword: a wrong password is better-auth's INVALID_PASSWORD and counts
// against the account's throttle (shared with change-password); an account with a password
// must send it.
func TestDeleteUserPassword(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ada := app.newUser(t, "Ada", "ada@example.com")
		pw := "password-ada@example.com"

		p := deleteUser(app, ada.Cookie, `{"password":"wrong-password"}`).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		if p.Title != "Invalid password" || p.Message != "Invalid password" {
			t.Errorf("problem = %+v", p)
		}
		p = deleteUser(app, ada.Cookie, `{}`).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "USER_ALREADY_HAS_PASSWORD")
		if p.Message != "User already has a password. Provide that to delete the account." {
			t.Errorf("message = %q", p.Message)
		}
		deleteUser(app, ada.Cookie, "").wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "USER_ALREADY_HAS_PASSWORD")
		deleteUser(app, ada.Cookie, `{"password":"`+pw+`","token":"x"}`).wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")

		// One wrong change-password and three more wrong deletions fill the account's five
		// failures; then even the right password is refused.
		app.do(withCookie(ada.Cookie, request{method: http.MethodPost, path: "/api/auth/change-password",
			body: `{"currentPassword":"wrong-password","newPassword":"whatever-123"}`})).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		for range accountFailureLimit - 2 {
			deleteUser(app, ada.Cookie, `{"password":"wrong-password"}`).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		}
		res := deleteUser(app, ada.Cookie, `{"password":`+jsonString(pw)+`}`)
		res.wantAuthProblem(t, http.StatusTooManyRequests, "http-4xx", "TOO_MANY_REQUESTS")
		if res.Header().Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		if _, err := app.store.User(context.Background(), ada.ID); err != nil {
			t.Errorf("the user went after refusals: %v", err)
		}
		if n := len(auditEntries(t, app.store, "user.delete")); n != 0 {
			t.Errorf("%d user.delete audit rows after refusals", n)
		}
	})
}

// TestDeleteUserSoleOwner: the only owner of organizations that are not archived is refused
// with 409 naming them; an archived organization does not stop the deletion, nor does an
// organization with a second owner, who stays its owner.
func TestDeleteUserSoleOwner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ctx := context.Background()
		pw := "password-ada@example.com"
		ada := app.newUser(t, "Ada", "ada@example.com")
		bob := app.newFixtureUser(t, "Bob", "bob@example.com")
		acme := newOrgOwnedBy(t, app, "Acme", "acme", ada.ID, map[string]string{bob.ID: RoleAdmin})
		beta := newOrgOwnedBy(t, app, "Beta Labs", "beta", ada.ID, nil)
		shared := newOrgOwnedBy(t, app, "Shared", "shared", ada.ID, map[string]string{bob.ID: "admin,owner"})
		old := newOrgOwnedBy(t, app, "Old Co", "old-co", ada.ID, nil)
		if err := app.store.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.SetOrganizationArchived(ctx, old.ID, true)
			return err
		}); err != nil {
			t.Fatal(err)
		}

		res := deleteUser(app, ada.Cookie, `{"password":`+jsonString(pw)+`}`)
		p := res.wantAuthProblem(t, http.StatusConflict, "conflict", "YOU_CANNOT_DELETE_YOUR_ACCOUNT_AS_THE_ONLY_OWNER")
		if p.Title != "You are the only owner of an organization" {
			t.Errorf("title = %q", p.Title)
		}
		if want := "You are the only owner of Acme and Beta Labs. Make another member an owner or archive each of them, then delete your account."; p.Message != want {
			t.Errorf("message = %q, want %q", p.Message, want)
		}
		if len(res.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("a refused deletion touched the cookie: %v", res.Header().Values("Set-Cookie"))
		}
		if _, err := app.store.User(ctx, ada.ID); err != nil {
			t.Fatalf("the refused deletion deleted the user: %v", err)
		}

		// Archive Beta Labs: Acme alone stops the deletion, in the singular.
		if err := app.store.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.SetOrganizationArchived(ctx, beta.ID, true)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		p = deleteUser(app, ada.Cookie, `{"password":`+jsonString(pw)+`}`).
			wantAuthProblem(t, http.StatusConflict, "conflict", "YOU_CANNOT_DELETE_YOUR_ACCOUNT_AS_THE_ONLY_OWNER")
		if want := "You are the only owner of Acme. Make another member an owner or archive the organization, then delete your account."; p.Message != want {
			t.Errorf("message = %q, want %q", p.Message, want)
		}

		// Make Bob an owner of Acme too: now Ada may go, and Bob owns Acme and Shared alone.
		bobInAcme, err := app.store.Member(ctx, acme.ID, bob.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.store.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.UpdateMemberRole(ctx, bobInAcme.ID, RoleOwner)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		res = deleteUser(app, ada.Cookie, `{"password":`+jsonString(pw)+`}`)
		if res.Code != http.StatusOK {
			t.Fatalf("delete-user with a second owner = %d %s", res.Code, res.Body)
		}
		for _, o := range []store.Organization{acme, shared} {
			if n, err := countOwners(app, o.ID); err != nil || n != 1 {
				t.Errorf("%s owners = %d, %v; want Bob alone", o.Name, n, err)
			}
			if m, err := app.store.Member(ctx, o.ID, bob.ID); err != nil || !strings.Contains(m.Role, RoleOwner) {
				t.Errorf("Bob in %s = %+v, %v", o.Name, m, err)
			}
		}
		// The archived organizations stay, without an owner.
		for _, o := range []store.Organization{beta, old} {
			if got, err := app.store.Organization(ctx, o.ID); err != nil || got.ArchivedAt == nil {
				t.Errorf("%s = %+v, %v; want it kept archived", o.Name, got, err)
			}
		}
	})
}

// countOwners counts the owners of organization orgID.
func countOwners(app *testApp, orgID string) (int, error) {
	var n int
	err := app.store.InTx(context.Background(), func(tx *store.Tx) error {
		var err error
		n, err = tx.CountOwners(context.Background(), orgID)
		return err
	})
	return n, err
}

// TestDeleteUserWithoutPassword: an account without a password (social sign-in only) deletes
// itself with a session started within the last day and no password; an older session must
// sign in again, and a password sent for it is CREDENTIAL_ACCOUNT_NOT_FOUND.
func TestDeleteUserWithoutPassword(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		clock := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
		app, _ := clockedApp(t, b, clock, testConfig())
		grace := testUser(app.NewUserWithHash(t, "Grace", "grace@example.com", ""))
		joan := testUser(app.NewUserWithHash(t, "Joan", "joan@example.com", ""))

		deleteUser(app, grace.Cookie, `{"password":"anything-at-all"}`).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CREDENTIAL_ACCOUNT_NOT_FOUND")

		clock.Advance(23 * time.Hour)
		if res := deleteUser(app, grace.Cookie, `{}`); res.Code != http.StatusOK {
			t.Fatalf("a 23-hour-old session: %d %s", res.Code, res.Body)
		}
		if _, err := app.store.User(context.Background(), grace.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Grace: %v, want ErrNotFound", err)
		}

		clock.Advance(time.Hour) // Joan's session is a day old now.
		p := deleteUser(app, joan.Cookie, "").wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "SESSION_EXPIRED")
		if p.Message != "Session expired. Re-authenticate to perform this action." {
			t.Errorf("message = %q", p.Message)
		}
		if _, err := app.store.User(context.Background(), joan.ID); err != nil {
			t.Errorf("Joan went with a stale session: %v", err)
		}
	})
}
