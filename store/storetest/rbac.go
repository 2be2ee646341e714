package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runRBAC covers project RBAC: project roles, role bindings and decisions.
func runRBAC(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("ProjectRoles", func(t *testing.T) { testProjectRoles(t, open) })
	t.Run("ProjectRolesInvalid", func(t *testing.T) { testProjectRolesInvalid(t, open) })
	t.Run("UpdateProjectRole", func(t *testing.T) { testUpdateProjectRole(t, open) })
	t.Run("RoleBindings", func(t *testing.T) { testRoleBindings(t, open) })
	t.Run("ListRoleBindings", func(t *testing.T) { testListRoleBindings(t, open) })
	t.Run("DeleteProjectRole", func(t *testing.T) { testDeleteProjectRole(t, open) })
	t.Run("DeleteProjectRoleRace", func(t *testing.T) { testDeleteProjectRoleRace(t, open) })
	t.Run("Decide", func(t *testing.T) { testDecide(t, open) })
	t.Run("DecideFollowsChanges", func(t *testing.T) { testDecideFollowsChanges(t, open) })
	t.Run("Decisions", func(t *testing.T) { runRBACDecisions(t, open) })
}

// rbacFixture is two projects (in one organization) to bind roles in.
type rbacFixture struct {
	s            *store.Store
	project      store.Project
	otherProject store.Project
}

func newRBACFixture(t *testing.T, open func(t *testing.T) *store.Store) rbacFixture {
	t.Helper()
	s := open(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	return rbacFixture{s: s, project: newProject(t, s, o.ID, "web"), otherProject: newProject(t, s, o.ID, "api")}
}

func (f rbacFixture) role(t *testing.T, projectID, slug string, permissions ...string) store.ProjectRole {
	t.Helper()
	r := store.ProjectRole{ProjectID: projectID, Name: "Role " + slug, Slug: slug, Permissions: permissions}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreateProjectRole(testContext(t), &r) })
	return r
}

func (f rbacFixture) bind(t *testing.T, role store.ProjectRole, principalType, principalID string, expiresAt *time.Time) store.RoleBinding {
	t.Helper()
	b := store.RoleBinding{ProjectID: role.ProjectID, RoleID: role.ID, PrincipalType: principalType,
		PrincipalID: principalID, ExpiresAt: expiresAt}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreateRoleBinding(testContext(t), &b) })
	return b
}

func (f rbacFixture) decide(t *testing.T, projectID, principalType, principalID, permission string, now time.Time) (bool, []string) {
	t.Helper()
	allowed, roles, err := f.s.Decide(testContext(t), projectID, principalType, principalID, permission, now)
	if err != nil {
		t.Fatalf("Decide(%s, %s, %s, %s): %v", projectID, principalType, principalID, permission, err)
	}
	if roles == nil {
		t.Fatalf("Decide(%s, %s, %s, %s): roles is nil, want a slice", projectID, principalType, principalID, permission)
	}
	return allowed, roles
}

func testProjectRoles(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)

	before := f.s.Now()
	r := store.ProjectRole{ProjectID: f.project.ID, Name: "Editor", Slug: "editor", Description: "Edits",
		Permissions: []string{"document:read", "document:write"}}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreateProjectRole(ctx, &r) })
	after := f.s.Now()
	if !idFormat("role").MatchString(r.ID) || !r.UpdatedAt.Equal(r.CreatedAt) {
		t.Errorf("CreateProjectRole = %+v", r)
	}
	checkStamped(t, "CreatedAt", r.CreatedAt, before, after)

	got, err := f.s.ProjectRole(ctx, f.project.ID, r.ID)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("ProjectRole:\n got %+v, %v\nwant %+v", got, err, r)
	}
	if _, err := f.s.ProjectRole(ctx, f.otherProject.ID, r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ProjectRole in another project = %v, want ErrNotFound", err)
	}
	if _, err := f.s.ProjectRole(ctx, f.project.ID, "role_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ProjectRole(missing) = %v, want ErrNotFound", err)
	}

	// Listed after the seeded roles.
	roles, err := f.s.ListProjectRoles(ctx, f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, x := range roles {
		slugs = append(slugs, x.Slug)
	}
	if want := []string{store.ProjectAdminRole, store.ProjectMemberRole, "editor"}; !reflect.DeepEqual(slugs, want) {
		t.Errorf("ListProjectRoles slugs = %v, want %v", slugs, want)
	}

	// Slugs are unique per project, seeded slugs included; another project may reuse them.
	for _, slug := range []string{"editor", store.ProjectMemberRole} {
		wantErr(t, f.s, store.ErrConflict, "duplicate slug "+slug, func(tx *store.Tx) error {
			return tx.CreateProjectRole(ctx, &store.ProjectRole{ProjectID: f.project.ID, Name: "X", Slug: slug})
		})
	}
	other := f.role(t, f.otherProject.ID, "editor")
	if other.Permissions == nil || len(other.Permissions) != 0 {
		t.Errorf("nil permissions stored as %#v, want an empty list", other.Permissions)
	}
	if got, err := f.s.ProjectRole(ctx, f.otherProject.ID, other.ID); err != nil || got.Permissions == nil {
		t.Errorf("ProjectRole(no permissions) = %#v, %v; want an empty list", got.Permissions, err)
	}

	// The largest allowed role round-trips in order.
	perms := make([]string, store.MaxRolePermissions)
	for i := range perms {
		perms[i] = fmt.Sprintf("resource%03d:read", store.MaxRolePermissions-i)
	}
	big := f.role(t, f.project.ID, "big", perms...)
	if got, err := f.s.ProjectRole(ctx, f.project.ID, big.ID); err != nil || !reflect.DeepEqual(got.Permissions, perms) {
		t.Errorf("100 permissions read back as %v, %v", got.Permissions, err)
	}
}

func testProjectRolesInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	tooMany := make([]string, store.MaxRolePermissions+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("r%d:read", i)
	}
	for _, tc := range []struct {
		name string
		r    store.ProjectRole
		want error
	}{
		{"unknown project", store.ProjectRole{ProjectID: "prj_missing", Name: "X", Slug: "x"}, store.ErrNotFound},
		{"no project", store.ProjectRole{Name: "X", Slug: "x"}, store.ErrInvalid},
		{"empty name", store.ProjectRole{ProjectID: f.project.ID, Slug: "x"}, store.ErrInvalid},
		{"empty slug", store.ProjectRole{ProjectID: f.project.ID, Name: "X"}, store.ErrInvalid},
		{"empty permission", store.ProjectRole{ProjectID: f.project.ID, Name: "X", Slug: "x", Permissions: []string{""}}, store.ErrInvalid},
		{"repeated permission", store.ProjectRole{ProjectID: f.project.ID, Name: "X", Slug: "x", Permissions: []string{"a:b", "a:b"}}, store.ErrInvalid},
		{"101 permissions", store.ProjectRole{ProjectID: f.project.ID, Name: "X", Slug: "x", Permissions: tooMany}, store.ErrLimit},
	} {
		wantErr(t, f.s, tc.want, tc.name, func(tx *store.Tx) error { return tx.CreateProjectRole(ctx, &tc.r) })
	}
	if roles, err := f.s.ListProjectRoles(ctx, f.project.ID); err != nil || len(roles) != 2 {
		t.Errorf("after refused creations: %d roles, %v; want the 2 seeded", len(roles), err)
	}
}

func testUpdateProjectRole(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	r := f.role(t, f.project.ID, "editor", "document:read")
	f.role(t, f.project.ID, "viewer")
	ptr := func(s string) *string { return &s }
	perms := func(p ...string) *[]string { return &p }

	update := func(u store.ProjectRoleUpdate) (store.ProjectRole, error) {
		var got store.ProjectRole
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			got, err = tx.UpdateProjectRole(ctx, f.project.ID, r.ID, u)
			return err
		})
		return got, err
	}
	want := r
	for _, tc := range []struct {
		u     store.ProjectRoleUpdate
		apply func(*store.ProjectRole)
	}{
		{store.ProjectRoleUpdate{Name: ptr("Writer")}, func(x *store.ProjectRole) { x.Name = "Writer" }},
		{store.ProjectRoleUpdate{Slug: ptr("writer")}, func(x *store.ProjectRole) { x.Slug = "writer" }},
		{store.ProjectRoleUpdate{Description: ptr("Writes")}, func(x *store.ProjectRole) { x.Description = "Writes" }},
		{store.ProjectRoleUpdate{Permissions: perms("document:write", "*")}, func(x *store.ProjectRole) { x.Permissions = []string{"document:write", "*"} }},
		{store.ProjectRoleUpdate{Description: ptr(""), Permissions: perms()}, func(x *store.ProjectRole) { x.Description, x.Permissions = "", []string{} }},
		{store.ProjectRoleUpdate{}, func(*store.ProjectRole) {}},
	} {
		before := f.s.Now()
		got, err := update(tc.u)
		if err != nil {
			t.Fatalf("UpdateProjectRole(%+v): %v", tc.u, err)
		}
		tc.apply(&want)
		checkStamped(t, "UpdatedAt", got.UpdatedAt, before, f.s.Now())
		want.UpdatedAt = got.UpdatedAt
		if !reflect.DeepEqual(got, want) {
			t.Errorf("UpdateProjectRole(%+v):\n got %+v\nwant %+v", tc.u, got, want)
		}
		if read, err := f.s.ProjectRole(ctx, f.project.ID, r.ID); err != nil || !reflect.DeepEqual(read, want) {
			t.Errorf("read back after %+v:\n got %+v, %v\nwant %+v", tc.u, read, err, want)
		}
	}

	for _, tc := range []struct {
		name string
		u    store.ProjectRoleUpdate
		want error
	}{
		{"slug of another role", store.ProjectRoleUpdate{Slug: ptr("viewer")}, store.ErrConflict},
		{"empty name", store.ProjectRoleUpdate{Name: ptr("")}, store.ErrInvalid},
		{"empty slug", store.ProjectRoleUpdate{Slug: ptr("")}, store.ErrInvalid},
		{"repeated permission", store.ProjectRoleUpdate{Permissions: perms("a:b", "a:b")}, store.ErrInvalid},
	} {
		if _, err := update(tc.u); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	wantErr(t, f.s, store.ErrNotFound, "role of another project", func(tx *store.Tx) error {
		_, err := tx.UpdateProjectRole(ctx, f.otherProject.ID, r.ID, store.ProjectRoleUpdate{Name: ptr("X")})
		return err
	})
	wantErr(t, f.s, store.ErrNotFound, "missing role", func(tx *store.Tx) error {
		_, err := tx.UpdateProjectRole(ctx, f.project.ID, "role_missing", store.ProjectRoleUpdate{Name: ptr("X")})
		return err
	})
	if read, err := f.s.ProjectRole(ctx, f.project.ID, r.ID); err != nil || !reflect.DeepEqual(read, want) {
		t.Errorf("after refused updates:\n got %+v, %v\nwant %+v", read, err, want)
	}
}

func testRoleBindings(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	editor := f.role(t, f.project.ID, "editor", "document:write")
	foreign := f.role(t, f.otherProject.ID, "foreign", "*")

	before := f.s.Now()
	expires := time.Date(2099, 1, 2, 3, 4, 5, 6789, time.FixedZone("X", 3600))
	b := f.bind(t, editor, store.PrincipalUser, "user-42", &expires)
	after := f.s.Now()
	if !idFormat("rb").MatchString(b.ID) || b.RoleSlug != "editor" || b.ProjectID != f.project.ID {
		t.Errorf("CreateRoleBinding = %+v", b)
	}
	checkStamped(t, "CreatedAt", b.CreatedAt, before, after)
	if want := expires.UTC().Truncate(time.Microsecond); b.ExpiresAt == nil || !b.ExpiresAt.Equal(want) || b.ExpiresAt.Location() != time.UTC {
		t.Errorf("ExpiresAt = %v, want %v in UTC", b.ExpiresAt, want)
	}
	got, err := f.s.RoleBinding(ctx, f.project.ID, b.ID)
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Errorf("RoleBinding:\n got %+v, %v\nwant %+v", got, err, b)
	}
	if _, err := f.s.RoleBinding(ctx, f.otherProject.ID, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RoleBinding in another project = %v, want ErrNotFound", err)
	}

	// The same principal id as another type, or with another role, is a new binding.
	forever := f.bind(t, editor, store.PrincipalServiceAccount, "user-42", nil)
	if forever.ExpiresAt != nil {
		t.Errorf("binding without expiry: ExpiresAt = %v", forever.ExpiresAt)
	}
	if got, err := f.s.RoleBinding(ctx, f.project.ID, forever.ID); err != nil || got.ExpiresAt != nil {
		t.Errorf("read back without expiry: %+v, %v", got, err)
	}
	member, err := f.s.ListProjectRoles(ctx, f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.bind(t, member[1], store.PrincipalUser, "user-42", nil)

	for _, tc := range []struct {
		name string
		b    store.RoleBinding
		want error
	}{
		{"duplicate", store.RoleBinding{ProjectID: f.project.ID, RoleID: editor.ID, PrincipalType: store.PrincipalUser, PrincipalID: "user-42"}, store.ErrConflict},
		{"role of another project", store.RoleBinding{ProjectID: f.project.ID, RoleID: foreign.ID, PrincipalType: store.PrincipalUser, PrincipalID: "u"}, store.ErrNotFound},
		{"unknown role", store.RoleBinding{ProjectID: f.project.ID, RoleID: "role_missing", PrincipalType: store.PrincipalUser, PrincipalID: "u"}, store.ErrNotFound},
		{"unknown project", store.RoleBinding{ProjectID: "prj_missing", RoleID: editor.ID, PrincipalType: store.PrincipalUser, PrincipalID: "u"}, store.ErrNotFound},
		{"bad principal type", store.RoleBinding{ProjectID: f.project.ID, RoleID: editor.ID, PrincipalType: "group", PrincipalID: "u"}, store.ErrInvalid},
		{"empty principal id", store.RoleBinding{ProjectID: f.project.ID, RoleID: editor.ID, PrincipalType: store.PrincipalUser}, store.ErrInvalid},
		{"empty role", store.RoleBinding{ProjectID: f.project.ID, PrincipalType: store.PrincipalUser, PrincipalID: "u"}, store.ErrInvalid},
		{"taken id", store.RoleBinding{ID: b.ID, ProjectID: f.project.ID, RoleID: editor.ID, PrincipalType: store.PrincipalUser, PrincipalID: "u2"}, store.ErrConflict},
	} {
		wantErr(t, f.s, tc.want, tc.name, func(tx *store.Tx) error { return tx.CreateRoleBinding(ctx, &tc.b) })
	}

	// Delete: only within its project, once.
	wantErr(t, f.s, store.ErrNotFound, "delete from another project", func(tx *store.Tx) error {
		_, err := tx.DeleteRoleBinding(ctx, f.otherProject.ID, b.ID)
		return err
	})
	var deleted store.RoleBinding
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		deleted, err = tx.DeleteRoleBinding(ctx, f.project.ID, b.ID)
		return err
	})
	if !reflect.DeepEqual(deleted, b) {
		t.Errorf("DeleteRoleBinding returned %+v, want %+v", deleted, b)
	}
	if _, err := f.s.RoleBinding(ctx, f.project.ID, b.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RoleBinding after delete = %v, want ErrNotFound", err)
	}
	wantErr(t, f.s, store.ErrNotFound, "delete twice", func(tx *store.Tx) error {
		_, err := tx.DeleteRoleBinding(ctx, f.project.ID, b.ID)
		return err
	})
	// The triple is free again.
	f.bind(t, editor, store.PrincipalUser, "user-42", nil)
}

func testListRoleBindings(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	editor := f.role(t, f.project.ID, "editor")
	viewer := f.role(t, f.project.ID, "viewer")
	past := f.s.Now().Add(-time.Hour)
	var all []store.RoleBinding
	for i := range 5 {
		all = append(all, f.bind(t, editor, store.PrincipalUser, fmt.Sprintf("u%d", i), nil))
	}
	all = append(all, f.bind(t, viewer, store.PrincipalUser, "u0", &past))
	all = append(all, f.bind(t, viewer, store.PrincipalServiceAccount, "u0", nil))
	f.bind(t, f.role(t, f.otherProject.ID, "editor"), store.PrincipalUser, "u0", nil)

	pick := func(idx ...int) []string {
		out := []string{}
		for _, i := range idx {
			out = append(out, all[i].ID)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		filter store.RoleBindingFilter
		want   []string
	}{
		{"all, oldest first", store.RoleBindingFilter{}, pick(0, 1, 2, 3, 4, 5, 6)},
		{"principal id", store.RoleBindingFilter{PrincipalID: "u0"}, pick(0, 5, 6)},
		{"principal", store.RoleBindingFilter{PrincipalType: store.PrincipalUser, PrincipalID: "u0"}, pick(0, 5)},
		{"principal type", store.RoleBindingFilter{PrincipalType: store.PrincipalServiceAccount}, pick(6)},
		{"role", store.RoleBindingFilter{RoleID: viewer.ID}, pick(5, 6)},
		{"role and principal", store.RoleBindingFilter{RoleID: editor.ID, PrincipalID: "u3"}, pick(3)},
		{"limit", store.RoleBindingFilter{Limit: 2}, pick(0, 1)},
		{"limit and offset", store.RoleBindingFilter{Limit: 2, Offset: 2}, pick(2, 3)},
		{"offset past the end", store.RoleBindingFilter{Offset: 7}, pick()},
		{"negative offset", store.RoleBindingFilter{Offset: -3, Limit: 1}, pick(0)},
		{"no match", store.RoleBindingFilter{PrincipalID: "nobody"}, pick()},
	} {
		got, err := f.s.ListRoleBindings(ctx, f.project.ID, tc.filter)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ids := []string{}
		for _, b := range got {
			ids = append(ids, b.ID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids, tc.want)
		}
	}
	got, err := f.s.ListRoleBindings(ctx, f.project.ID, store.RoleBindingFilter{RoleID: viewer.ID})
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], all[5]) || got[1].RoleSlug != "viewer" {
		t.Errorf("listed bindings %+v, %v; want them as created", got, err)
	}
	if got, err := f.s.ListRoleBindings(ctx, "prj_missing", store.RoleBindingFilter{}); err != nil || got == nil || len(got) != 0 {
		t.Errorf("unknown project: %+v, %v; want empty", got, err)
	}
}

func testDeleteProjectRole(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	editor := f.role(t, f.project.ID, "editor", "document:write")
	unused := f.role(t, f.project.ID, "unused")
	b1 := f.bind(t, editor, store.PrincipalUser, "u1", nil)
	f.bind(t, editor, store.PrincipalServiceAccount, "u2", nil)

	del := func(projectID, roleID string, force bool) (store.ProjectRole, int, error) {
		var r store.ProjectRole
		var n int
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			r, n, err = tx.DeleteProjectRole(ctx, projectID, roleID, force)
			return err
		})
		return r, n, err
	}
	if _, _, err := del(f.project.ID, editor.ID, false); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("delete a bound role = %v, want ErrInUse", err)
	}
	if _, err := f.s.ProjectRole(ctx, f.project.ID, editor.ID); err != nil {
		t.Errorf("refused delete removed the role: %v", err)
	}
	if _, err := f.s.RoleBinding(ctx, f.project.ID, b1.ID); err != nil {
		t.Errorf("refused delete removed a binding: %v", err)
	}
	if _, _, err := del(f.otherProject.ID, editor.ID, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete from another project = %v, want ErrNotFound", err)
	}

	r, n, err := del(f.project.ID, unused.ID, false)
	if err != nil || n != 0 || !reflect.DeepEqual(r, unused) {
		t.Errorf("delete an unbound role = %+v, %d, %v", r, n, err)
	}
	r, n, err = del(f.project.ID, editor.ID, true)
	if err != nil || n != 2 || !reflect.DeepEqual(r, editor) {
		t.Errorf("forced delete = %+v, %d, %v; want the role and 2 bindings", r, n, err)
	}
	if got, err := f.s.ListRoleBindings(ctx, f.project.ID, store.RoleBindingFilter{}); err != nil || len(got) != 0 {
		t.Errorf("bindings after forced delete: %+v, %v", got, err)
	}
	if _, _, err := del(f.project.ID, editor.ID, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice = %v, want ErrNotFound", err)
	}
	if allowed, roles := f.decide(t, f.project.ID, store.PrincipalUser, "u1", "document:write", f.s.Now()); allowed || len(roles) != 0 {
		t.Errorf("decision after the role is gone: %v %v", allowed, roles)
	}
	// The slug is free again.
	f.role(t, f.project.ID, "editor")
}

// testDeleteProjectRoleRace deletes a role (without force) while bindings of
// it are being created: every binding that committed must still have its
// role, and a refused deletion must leave the role in place.
func testDeleteProjectRoleRace(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	for round := range 5 {
		role := f.role(t, f.project.ID, fmt.Sprintf("racy-%d", round))
		var wg sync.WaitGroup
		var deleteErr error
		created := make(chan string, 8)
		for i := range 8 {
			wg.Go(func() {
				b := store.RoleBinding{ProjectID: f.project.ID, RoleID: role.ID, PrincipalType: store.PrincipalUser,
					PrincipalID: fmt.Sprintf("p%d", i)}
				err := f.s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateRoleBinding(ctx, &b) })
				switch {
				case err == nil:
					created <- b.ID
				case !errors.Is(err, store.ErrNotFound):
					t.Errorf("CreateRoleBinding: %v", err)
				}
			})
		}
		wg.Go(func() {
			deleteErr = f.s.InTx(ctx, func(tx *store.Tx) error {
				_, _, err := tx.DeleteProjectRole(ctx, f.project.ID, role.ID, false)
				return err
			})
		})
		wg.Wait()
		close(created)
		n := len(created)
		_, roleErr := f.s.ProjectRole(ctx, f.project.ID, role.ID)
		switch {
		case deleteErr == nil:
			if n != 0 || !errors.Is(roleErr, store.ErrNotFound) {
				t.Errorf("round %d: role deleted, yet %d bindings committed (role read: %v)", round, n, roleErr)
			}
		case errors.Is(deleteErr, store.ErrInUse):
			if n == 0 || roleErr != nil {
				t.Errorf("round %d: refused with %d bindings, role read: %v", round, n, roleErr)
			}
		default:
			t.Errorf("round %d: DeleteProjectRole = %v", round, deleteErr)
		}
		if got, err := f.s.ListRoleBindings(ctx, f.project.ID, store.RoleBindingFilter{RoleID: role.ID}); err != nil || len(got) != n {
			t.Errorf("round %d: %d bindings listed (%v), %d committed", round, len(got), err, n)
		}
	}
}

func testDecide(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	now := f.s.Now()
	seeded, err := f.s.ListProjectRoles(testContext(t), f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	admin, member := seeded[0], seeded[1]
	editor := f.role(t, f.project.ID, "editor", "document:read", "document:write")
	billing := f.role(t, f.project.ID, "billing", "invoice:read")
	expired := f.role(t, f.project.ID, "expired", "document:delete")
	odd := f.role(t, f.project.ID, "odd", `quote:"x"`, `back\slash`)
	foreign := f.role(t, f.otherProject.ID, "foreign", "*")

	soon, past, exactlyNow := now.Add(time.Minute), now.Add(-time.Minute), now
	f.bind(t, editor, store.PrincipalUser, "alice", nil)
	f.bind(t, billing, store.PrincipalUser, "alice", &soon)
	f.bind(t, expired, store.PrincipalUser, "alice", &past)
	f.bind(t, member, store.PrincipalUser, "alice", &exactlyNow)
	f.bind(t, admin, store.PrincipalServiceAccount, "alice", nil)
	f.bind(t, admin, store.PrincipalUser, "root", nil)
	f.bind(t, odd, store.PrincipalUser, "odd", nil)
	f.bind(t, foreign, store.PrincipalUser, "alice", nil)

	aliceRoles := []string{"billing", "editor"}
	for _, tc := range []struct {
		name             string
		project, typ, id string
		permission       string
		at               time.Time
		wantAllowed      bool
		wantRoles        []string
	}{
		{"exact permission", f.project.ID, store.PrincipalUser, "alice", "document:write", now, true, aliceRoles},
		{"union: the other role's permission", f.project.ID, store.PrincipalUser, "alice", "invoice:read", now, true, aliceRoles},
		{"permission of no role", f.project.ID, store.PrincipalUser, "alice", "document:admin", now, false, aliceRoles},
		{"expired binding ignored", f.project.ID, store.PrincipalUser, "alice", "document:delete", now, false, aliceRoles},
		{"binding expiring now ignored", f.project.ID, store.PrincipalUser, "alice", "profile:read", now, false, aliceRoles},
		{"before expiry", f.project.ID, store.PrincipalUser, "alice", "document:delete", past.Add(-time.Second), true,
			[]string{"billing", "editor", "expired", "member"}},
		{"after a later expiry", f.project.ID, store.PrincipalUser, "alice", "invoice:read", soon, false, []string{"editor"}},
		{"wildcard", f.project.ID, store.PrincipalUser, "root", "anything:at-all", now, true, []string{"project-admin"}},
		{"wildcard as the asked permission", f.project.ID, store.PrincipalUser, "root", "*", now, true, []string{"project-admin"}},
		{"star is not asked for literally", f.project.ID, store.PrincipalUser, "alice", "*", now, false, aliceRoles},
		{"principal type matters", f.project.ID, store.PrincipalServiceAccount, "alice", "document:admin", now, true, []string{"project-admin"}},
		{"unknown principal", f.project.ID, store.PrincipalUser, "bob", "document:read", now, false, []string{}},
		{"principal id is exact", f.project.ID, store.PrincipalUser, "ALICE", "document:read", now, false, []string{}},
		{"another project's bindings", f.otherProject.ID, store.PrincipalUser, "alice", "document:read", now, true, []string{"foreign"}},
		{"unknown project", "prj_missing", store.PrincipalUser, "alice", "document:read", now, false, []string{}},
		{"escaped permission", f.project.ID, store.PrincipalUser, "odd", `quote:"x"`, now, true, []string{"odd"}},
		{"escaped permission, other", f.project.ID, store.PrincipalUser, "odd", `back\slash`, now, true, []string{"odd"}},
		{"escaped role, no match", f.project.ID, store.PrincipalUser, "odd", `quote:x`, now, false, []string{"odd"}},
	} {
		allowed, roles := f.decide(t, tc.project, tc.typ, tc.id, tc.permission, tc.at)
		if allowed != tc.wantAllowed || !reflect.DeepEqual(roles, tc.wantRoles) {
			t.Errorf("%s: allowed %v, roles %v; want %v, %v", tc.name, allowed, roles, tc.wantAllowed, tc.wantRoles)
		}
	}
}

// testDecideFollowsChanges: the very next decision sees a role's new
// permissions, a deleted binding and a new one.
func testDecideFollowsChanges(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	editor := f.role(t, f.project.ID, "editor", "document:read")
	b := f.bind(t, editor, store.PrincipalUser, "alice", nil)
	check := func(step, permission string, want bool) {
		t.Helper()
		if allowed, _ := f.decide(t, f.project.ID, store.PrincipalUser, "alice", permission, f.s.Now()); allowed != want {
			t.Errorf("%s: %s allowed = %v, want %v", step, permission, allowed, want)
		}
	}
	check("bound", "document:read", true)
	check("bound", "document:write", false)
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, err := tx.UpdateProjectRole(ctx, f.project.ID, editor.ID, store.ProjectRoleUpdate{Permissions: &[]string{"document:write"}})
		return err
	})
	check("after the role changed", "document:read", false)
	check("after the role changed", "document:write", true)
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, err := tx.DeleteRoleBinding(ctx, f.project.ID, b.ID)
		return err
	})
	check("after the binding was deleted", "document:write", false)
	if _, roles := f.decide(t, f.project.ID, store.PrincipalUser, "alice", "x:y", f.s.Now()); len(roles) != 0 {
		t.Errorf("roles after the binding was deleted: %v", roles)
	}
	f.bind(t, editor, store.PrincipalUser, "alice", nil)
	check("bound again", "document:write", true)
	if got := strings.Join(mustRoles(t, f), ","); got != "editor" {
		t.Errorf("roles = %s, want editor", got)
	}
}

func mustRoles(t *testing.T, f rbacFixture) []string {
	t.Helper()
	_, roles := f.decide(t, f.project.ID, store.PrincipalUser, "alice", "x:y", f.s.Now())
	return roles
}
