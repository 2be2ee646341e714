package migrations

import (
	"io/fs"
	"regexp"
	"slices"
	"testing"
)

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// transactionControl matches a statement that would fight golang-migrate's own
// transaction. PL/pgSQL blocks (BEGIN … END;) do not match.
var transactionControl = regexp.MustCompile(`(?im)^\s*(BEGIN\s*(TRANSACTION\s*)?;|COMMIT\s*;|START\s+TRANSACTION)`)

// versions returns "NNNN_name" for every version in dir and fails the test
// unless each one has both an up and a down file.
func versions(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := fs.ReadDir(FS, dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	directions := map[string][]string{}
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s/%s: name does not match NNNN_name.(up|down).sql", dir, e.Name())
			continue
		}
		body, err := fs.ReadFile(FS, dir+"/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if transactionControl.Match(body) {
			t.Errorf("%s/%s: contains BEGIN/COMMIT; golang-migrate wraps each file in a transaction", dir, e.Name())
		}
		key := m[1] + "_" + m[2]
		directions[key] = append(directions[key], m[3])
	}
	var out []string
	seen := map[string]string{}
	for key, dirs := range directions {
		slices.Sort(dirs)
		if !slices.Equal(dirs, []string{"down", "up"}) {
			t.Errorf("%s/%s: want an up and a down file, have %v", dir, key, dirs)
		}
		if other, dup := seen[key[:4]]; dup {
			t.Errorf("%s: version %s used by both %s and %s", dir, key[:4], other, key)
		}
		seen[key[:4]] = key
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}

func TestDialectsHaveSameVersions(t *testing.T) {
	pg := versions(t, "postgres")
	lite := versions(t, "sqlite")
	if len(pg) == 0 {
		t.Fatal("no migrations found")
	}
	if !slices.Equal(pg, lite) {
		t.Errorf("dialect folders differ:\npostgres: %v\nsqlite:   %v", pg, lite)
	}
}
