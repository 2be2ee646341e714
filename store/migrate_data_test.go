package store

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
)

// TestPermissionRowsMigration: migration 8 turns each project role's JSON
// permission array into rows in the array's order, and its down migration
// turns them back into the same array.
func TestPermissionRowsMigration(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, dbURL string, s *Store) {
		ctx := t.Context()
		to := func(version uint) { migrateTo(t, s, version) }
		to(7)
		now := sqlTime(s.Now())
		execFixture(t, s, []fixtureStatement{
			{"INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES ('org_1', 'O', 'o', ?, ?)", []any{now, now}},
			{"INSERT INTO projects (id, organization_id, name, slug, created_at, updated_at) VALUES ('prj_1', 'org_1', 'P', 'p', ?, ?)", []any{now, now}},
			{`INSERT INTO project_roles (id, project_id, name, slug, description, permissions, created_at, updated_at)
					VALUES ('role_1', 'prj_1', 'R', 'r', '', '["z:write", "*", "a:read"]', ?, ?)`, []any{now, now}},
			{`INSERT INTO project_roles (id, project_id, name, slug, description, permissions, created_at, updated_at)
					VALUES ('role_2', 'prj_1', 'E', 'e', '', '[]', ?, ?)`, []any{now, now}},
		})
		to(8)
		roles, err := s.ListProjectRoles(ctx, "prj_1")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, r := range roles {
			got[r.ID] = r.Permissions
		}
		if want := map[string][]string{"role_1": {"z:write", "*", "a:read"}, "role_2": {}}; !reflect.DeepEqual(got, want) {
			t.Errorf("permissions after up = %#v, want %#v", got, want)
		}

		to(7)
		var back []string
		if err := s.writer.SelectContext(ctx, &back, "SELECT CAST(permissions AS TEXT) FROM project_roles ORDER BY id"); err != nil {
			t.Fatal(err)
		}
		if want := []string{`["z:write", "*", "a:read"]`, "[]"}; !reflect.DeepEqual(back, want) &&
			!reflect.DeepEqual(back, []string{`["z:write","*","a:read"]`, "[]"}) {
			t.Errorf("permissions after down = %q, want %q", back, want)
		}
	})
}

// fixtureStatement is a statement writing a test's rows, with its arguments; its ? placeholders
// are rebound for the database.
type fixtureStatement struct {
	query string
	args  []any
}

// execFixture runs statements in order on s's writer, failing t at the first error.
func execFixture(t *testing.T, s *Store, statements []fixtureStatement) {
	t.Helper()
	for _, q := range statements {
		if _, err := s.writer.ExecContext(t.Context(), s.writer.Rebind(q.query), q.args...); err != nil {
			t.Fatalf("%s: %v", q.query, err)
		}
	}
}

// forEachDatabase runs test as a subtest named after each dialect, with a store opened (not
// migrated) on a new SQLite file and, when GATEHOUSE_TEST_POSTGRES_URL is set, on a fresh
// PostgreSQL schema (postgresTestURL); the store is closed when the subtest ends.
func forEachDatabase(t *testing.T, test func(t *testing.T, dialect Dialect, dbURL string, s *Store)) {
	urls := map[Dialect]string{SQLite: filepath.Join(t.TempDir(), "test.db")}
	if base := postgresTestURL(t); base != "" {
		urls[Postgres] = base
	}
	for dialect, dbURL := range urls {
		t.Run(string(dialect), func(t *testing.T) {
			s, err := Open(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			test(t, dialect, dbURL, s)
		})
	}
}

// migrateTo migrates s up or down to version.
func migrateTo(t *testing.T, s *Store, version uint) {
	t.Helper()
	if err := s.migrate(t.Context(), "migrate to", func(m *migrate.Migrate) error { return m.Migrate(version) }); err != nil {
		t.Fatal(err)
	}
}

// postgresTestURL returns GATEHOUSE_TEST_POSTGRES_URL with a fresh schema of
// its own as search_path (dropped when the test ends), or "" when it is unset.
func postgresTestURL(t *testing.T) string {
	base := os.Getenv("GATEHOUSE_TEST_POSTGRES_URL")
	if base == "" {
		return ""
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "gh_test_" + hex.EncodeToString(b)
	admin, err := Open(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.writer.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.writer.Exec("DROP SCHEMA " + schema + " CASCADE")
		_ = admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestSubjectTotalsMigration: migration 34 fills usage_subject_totals with the fold of the
// usage_subjects rows already stored (one row per project and subject over its environments),
// and its down migration drops the table.
func TestSubjectTotalsMigration(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, dbURL string, s *Store) {
		ctx := t.Context()
		to := func(version uint) { migrateTo(t, s, version) }
		to(33)
		day := func(d, h int) sqlTime { return sqlTime(time.Date(2025, 3, d, h, 0, 0, 0, time.UTC)) }
		for _, r := range [][]any{
			{"prj_1", "ada", "env_a", day(2, 9), day(4, 10), 5, 1.5, 0},
			{"prj_1", "ada", "env_b", day(1, 8), day(3, 12), 2, 2.0, 700},
			{"prj_1", "ada", "env_c", day(5, 0), day(5, 0), 0, 0.0, 300},
			{"prj_1", "bo", "env_a", day(6, 1), day(7, 2), 4, 8.0, 0},
			{"prj_2", "ada", "env_a", day(9, 9), day(9, 9), 1, 1.0, 0},
		} {
			if _, err := s.writer.ExecContext(ctx, s.writer.Rebind(`INSERT INTO usage_subjects (project_id, subject_id, environment_id,
					first_seen, last_seen, events, quantity, revenue) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), r...); err != nil {
				t.Fatal(err)
			}
		}
		to(34)
		got := readSubjectTotals(t, s)
		want := []subjectTotal{
			{"prj_1", "ada", day(1, 8), day(5, 0), 7, 3.5, 1000},
			{"prj_1", "bo", day(6, 1), day(7, 2), 4, 8, 0},
			{"prj_2", "ada", day(9, 9), day(9, 9), 1, 1, 0},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("usage_subject_totals after up =\n%+v\nwant\n%+v", got, want)
		}
		to(33)
		var n int
		if err := s.writer.GetContext(ctx, &n, `SELECT COUNT(*) FROM usage_subject_totals`); err == nil {
			t.Errorf("usage_subject_totals still there after down (%d rows)", n)
		}
	})
}
