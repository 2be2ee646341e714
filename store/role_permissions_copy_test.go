package store

import (
	"reflect"
	"testing"
)

// roleCopies reads project_roles.permissions of every role of project projectID, decoded, by
// role slug.
func roleCopies(t *testing.T, s *Store, projectID string) map[string][]string {
	t.Helper()
	var rows []struct {
		Slug        string `db:"slug"`
		Permissions []byte `db:"permissions"`
	}
	if err := s.writer.SelectContext(t.Context(), &rows, s.writer.Rebind(
		"SELECT slug, permissions FROM project_roles WHERE project_id = ?"), projectID); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		list, err := decodeStringArray(r.Permissions)
		if err != nil {
			t.Fatalf("role %s: permissions %q: %v", r.Slug, r.Permissions, err)
		}
		if list == nil {
			list = []string{}
		}
		out[r.Slug] = list
	}
	return out
}

// TestRolePermissionsCopyMigration: migration 35 copies each role's permission rows, in their
// order, into project_roles.permissions ("[]" for a role with none); its down migration drops
// the column.
func TestRolePermissionsCopyMigration(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, dbURL string, s *Store) {
		ctx := t.Context()
		migrateTo(t, s, 34)
		now := sqlTime(s.Now())
		execFixture(t, s, []fixtureStatement{
			{"INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES ('org_1', 'O', 'o', ?, ?)", []any{now, now}},
			{"INSERT INTO projects (id, organization_id, name, slug, created_at, updated_at) VALUES ('prj_1', 'org_1', 'P', 'p', ?, ?)", []any{now, now}},
			{`INSERT INTO project_roles (id, project_id, name, slug, description, created_at, updated_at)
					VALUES ('role_1', 'prj_1', 'R', 'r', '', ?, ?), ('role_2', 'prj_1', 'E', 'e', '', ?, ?)`, []any{now, now, now, now}},
			{`INSERT INTO project_role_permissions (role_id, permission, position)
					VALUES ('role_1', 'a:read', 2), ('role_1', 'z:write', 0), ('role_1', '*', 1)`, nil},
		})
		migrateTo(t, s, 35)
		if got, want := roleCopies(t, s, "prj_1"), map[string][]string{"r": {"z:write", "*", "a:read"}, "e": {}}; !reflect.DeepEqual(got, want) {
			t.Errorf("copies after up = %#v, want %#v", got, want)
		}
		migrateTo(t, s, 34)
		var n int
		if err := s.writer.GetContext(ctx, &n, "SELECT count(*) FROM project_roles"); err != nil || n != 2 {
			t.Fatalf("roles after down: %d, %v", n, err)
		}
		if _, err := s.writer.ExecContext(ctx, "SELECT permissions FROM project_roles"); err == nil {
			t.Error("project_roles.permissions is still there after the down migration")
		}
	})
}

// TestRolePermissionsCopy: every writer of a role's permissions writes the copy with the rows:
// the roles a new project is seeded with, a created role, a role whose permissions change, and
// one whose name changes (the copy stays).
func TestRolePermissionsCopy(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, dbURL string, s *Store) {
		ctx := t.Context()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var prj Project
		err := s.InTx(ctx, func(tx *Tx) error {
			var err error
			_, prj, err = ownedProject(ctx, tx, "owner@example.com", "p")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// The roles every project is seeded with (ARCHITECTURE.md, roles).
		want := map[string][]string{"project-admin": {"*"}, "member": {"profile:read"}}
		if got := roleCopies(t, s, prj.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("seeded: copies %#v, want %#v", got, want)
		}

		role := ProjectRole{ProjectID: prj.ID, Name: "Editor", Slug: "editor", Permissions: []string{"doc:write", "doc:read"}}
		empty := ProjectRole{ProjectID: prj.ID, Name: "None", Slug: "none"}
		renamed, permissions := "Writer", []string{"*", "doc:delete"}
		err = s.InTx(ctx, func(tx *Tx) error {
			for _, r := range []*ProjectRole{&role, &empty} {
				if err := tx.CreateProjectRole(ctx, r); err != nil {
					return err
				}
			}
			if _, err := tx.UpdateProjectRole(ctx, prj.ID, role.ID, ProjectRoleUpdate{Permissions: &permissions}); err != nil {
				return err
			}
			_, err := tx.UpdateProjectRole(ctx, prj.ID, role.ID, ProjectRoleUpdate{Name: &renamed})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want["editor"], want["none"] = []string{"*", "doc:delete"}, []string{}
		if got := roleCopies(t, s, prj.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("after create and update: copies %#v, want %#v", got, want)
		}
	})
}
