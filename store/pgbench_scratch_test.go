package store

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPgbenchScratchTables: the scratch tables tools/pgbench-usage.sh measures PostgreSQL's
// raw limits on are copies of the migrated usage tables, kept in step by hand (a scratch schema
// cannot copy a partitioned table's partitioning, and the database it runs on need not be
// migrated). The script, run with PGBENCH_USAGE_SETUP_ONLY=1 against the database of
// GATEHOUSE_TEST_POSTGRES_URL, must create:
//   - usage_events_raw (the one-row limit) with the columns of usage_events and the primary key
//     of usage_event_ids;
//   - usage_event_ids and usage_events (the durable shape) as the migrations leave them:
//     columns (name, type, collation, nullability), constraints, indexes and partition key.
//
// A migration that changes one of these tables fails this test until the script follows.
func TestPgbenchScratchTables(t *testing.T) {
	s := openUsagePostgres(t, &testClock{now: time.Now()})
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("tools/pgbench-usage.sh needs psql: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), "../tools/pgbench-usage.sh", os.Getenv("GATEHOUSE_TEST_POSTGRES_URL"))
	cmd.Env = append(os.Environ(), "PGBENCH_USAGE_SETUP_ONLY=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tools/pgbench-usage.sh: %v\n%s", err, out)
	}
	scratch := strings.TrimSpace(string(out))
	if !strings.HasPrefix(scratch, "gh_pgbench_") || strings.ContainsAny(scratch, " \n;") {
		t.Fatalf("tools/pgbench-usage.sh printed %q, want the scratch schema's name", out)
	}
	t.Cleanup(func() { _, _ = s.writer.Exec("DROP SCHEMA " + scratch + " CASCADE") })
	var migrated string
	if err := s.writer.Get(&migrated, `SELECT current_schema()`); err != nil {
		t.Fatal(err)
	}

	// shape describes table in schema: columns, constraints, indexes (the definition after
	// USING, so without the index's name and schema) and partition key, each sorted or in
	// column order.
	type shape struct {
		Columns, Constraints, Indexes []string
		PartitionKey                  string
	}
	describe := func(schema, table string) shape {
		t.Helper()
		var sh shape
		queries := []struct {
			dest  *[]string
			query string
		}{
			{&sh.Columns, `SELECT column_name || ' ' || data_type || ' ' || coalesce(collation_name, '-') || ' ' || is_nullable
				FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`},
			{&sh.Constraints, `SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k
				JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND c.relname = $2 ORDER BY 1`},
			{&sh.Indexes, `SELECT regexp_replace(indexdef, '^.* USING ', '') FROM pg_indexes
				WHERE schemaname = $1 AND tablename = $2 ORDER BY 1`},
		}
		for _, q := range queries {
			if err := s.writer.Select(q.dest, q.query, schema, table); err != nil {
				t.Fatalf("%s.%s: %v", schema, table, err)
			}
		}
		if err := s.writer.Get(&sh.PartitionKey, `SELECT coalesce(pg_get_partkeydef(c.oid), '') FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, table); err != nil {
			t.Fatalf("%s.%s: %v", schema, table, err)
		}
		if len(sh.Columns) == 0 {
			t.Fatalf("%s.%s: no such table", schema, table)
		}
		return sh
	}

	for _, table := range []string{"usage_event_ids", "usage_events"} {
		if got, want := describe(scratch, table), describe(migrated, table); !reflect.DeepEqual(got, want) {
			t.Errorf("the script's %s differs from the migrated one:\n got %+v\nwant %+v", table, got, want)
		}
	}
	raw, events, ids := describe(scratch, "usage_events_raw"), describe(migrated, "usage_events"), describe(migrated, "usage_event_ids")
	if !reflect.DeepEqual(raw.Columns, events.Columns) {
		t.Errorf("usage_events_raw's columns differ from usage_events':\n got %q\nwant %q", raw.Columns, events.Columns)
	}
	// The one-row limit's only index is the replay detection's key: (project_id, event_id).
	const key = "btree (project_id, event_id)"
	if !reflect.DeepEqual(raw.Indexes, []string{key}) || !slices.Contains(ids.Indexes, key) {
		t.Errorf("usage_events_raw's indexes %q, usage_event_ids' %q: want the key %q in both, nothing else in the first",
			raw.Indexes, ids.Indexes, key)
	}
}
