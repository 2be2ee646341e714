package storetest

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestBackendIsolation checks that two URLs from one backend are separate,
// empty databases, and that migrating one (golang-migrate resolves the
// schema with current_schema()) writes into its own schema only.
func TestBackendIsolation(t *testing.T) {
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			first, second := b.URL(t), b.URL(t)
			if first == second {
				t.Fatalf("URL returned %q twice", first)
			}
			s, err := store.Open(ctx, first)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v, _, err := s.Version(ctx); err != nil || v != 0 {
				t.Fatalf("fresh URL: version %d, %v; want an empty database", v, err)
			}
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			other, err := store.Open(ctx, second)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if v, _, err := other.Version(ctx); err != nil || v != 0 {
				t.Errorf("second URL: version %d, %v; want untouched by the first", v, err)
			}
			if b.Name == string(store.Postgres) {
				checkSchema(t, ctx, first)
			}
		})
	}
}

// checkSchema verifies that the URL's connections use its gh_test_ schema
// and that migrations created their tables there.
func checkSchema(t *testing.T, ctx context.Context, url string) {
	db, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schema string
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "gh_test_") {
		t.Fatalf("current_schema() = %q, want gh_test_…", schema)
	}
	var tables []string
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	// Every migration adds tables; these two exist from the first one on.
	if !slices.Contains(tables, "audit_logs") || !slices.Contains(tables, "schema_migrations") {
		t.Errorf("tables in %s: %s; want audit_logs and schema_migrations among them", schema, strings.Join(tables, ","))
	}
}
