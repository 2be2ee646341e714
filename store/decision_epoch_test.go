package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDecisionEpoch: the decision epoch moves on every insert, update and delete of the rows an
// API-key decision reads — made through the store or by statements no store code wraps — and
// stands still for writes to anything else, an API key's last use among them; the api_keys
// trigger names every column but last_used_at. On SQLite it is one number for the file; on
// PostgreSQL it is per project (an organization's change moves each of its projects'), and a
// write under one tenant leaves another's epoch where it was.
func TestDecisionEpoch(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, _ string, s *Store) {
		ctx := t.Context()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var p, other Project
		epochOf := func(p Project) Epoch {
			t.Helper()
			e, err := s.DecisionEpoch(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			// A batch's read (its own statement on SQLite) reads the same epoch.
			if b, err := s.BatchDecisionEpoch(ctx, p.ID); err != nil || b != e {
				t.Fatalf("batch's epoch %d (%v), want %d", b, err, e)
			}
			return e
		}
		check := func(what string, wantMoved bool, write func() error) {
			t.Helper()
			before, otherBefore := epochOf(p), epochOf(other)
			if err := write(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if moved := epochOf(p) != before; moved != wantMoved {
				t.Errorf("%s: epoch moved %v, want %v", what, moved, wantMoved)
			}
			// Another tenant's epoch: on SQLite the file's one epoch moves with any of these writes.
			if otherMoved, wantOther := epochOf(other) != otherBefore, dialect == SQLite && wantMoved; otherMoved != wantOther {
				t.Errorf("%s: another tenant's epoch moved %v, want %v", what, otherMoved, wantOther)
			}
		}
		inTx := func(fn func(tx *Tx) error) func() error {
			return func() error { return s.InTx(ctx, fn) }
		}
		exec := func(query string, args ...any) func() error {
			return func() error {
				res, err := s.writer.ExecContext(ctx, s.writer.Rebind(query), args...)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 {
					return errors.New("no row written")
				}
				return nil
			}
		}
		at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).Format(sqliteTimeLayout)

		var user User
		var sa ServiceAccount
		var role ProjectRole
		if err := s.InTx(ctx, func(tx *Tx) (err error) {
			owner := User{Name: "Other", Email: "other-epoch@example.com"}
			if err := tx.CreateUser(ctx, &owner, ""); err != nil {
				return err
			}
			other, err = projectOwnedBy(ctx, tx, owner.ID, "other-epoch")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		check("a user created", false, inTx(func(tx *Tx) error {
			user = User{Name: "Owner", Email: "epoch@example.com"}
			return tx.CreateUser(ctx, &user, "")
		}))
		// A new organization and project: on SQLite the file's epoch moves; on PostgreSQL the new
		// project's epoch is no longer 0 and another tenant's stands still.
		otherBefore := epochOf(other)
		if err := s.InTx(ctx, func(tx *Tx) (err error) {
			p, err = projectOwnedBy(ctx, tx, user.ID, "epoch")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if e, o := epochOf(p), epochOf(other); dialect == SQLite && o == otherBefore ||
			dialect == Postgres && (e == 0 || o != otherBefore) {
			t.Errorf("an organization and a project created: epoch %d, another tenant's %d → %d", e, otherBefore, o)
		}
		check("a service account created with a key", true, inTx(func(tx *Tx) error {
			sa = ServiceAccount{ProjectID: p.ID, Name: "checker", Scopes: []string{"*"}}
			return tx.CreateServiceAccount(ctx, &sa, &APIKey{PublicID: "epochkey0001", SecretHash: make([]byte, 32)})
		}))
		check("a role created", true, inTx(func(tx *Tx) error {
			role = ProjectRole{ProjectID: p.ID, Name: "Reader", Slug: "reader", Permissions: []string{"doc:read"}}
			return tx.CreateProjectRole(ctx, &role)
		}))
		keyID := sa.Keys[0].ID

		check("the key's use recorded (TouchAPIKey)", false, func() error { return s.TouchAPIKey(ctx, keyID, time.Now()) })
		check("the key's use recorded outside the store", false, exec(`UPDATE api_keys SET last_used_at = ? WHERE id = ?`, at, keyID))
		check("a session-free write elsewhere (the user renamed)", false, exec(`UPDATE users SET name = 'Renamed' WHERE id = ?`, user.ID))
		for _, w := range []struct {
			what  string
			query string
			args  []any
		}{
			{"the key revoked", `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, []any{at, keyID}},
			{"the key's expiry set", `UPDATE api_keys SET expires_at = ? WHERE id = ?`, []any{at, keyID}},
			{"the account disabled", `UPDATE service_accounts SET disabled_at = ? WHERE id = ?`, []any{at, sa.ID}},
			{"the project archived", `UPDATE projects SET archived_at = ? WHERE id = ?`, []any{at, p.ID}},
			{"the organization archived", `UPDATE organizations SET archived_at = ? WHERE id = ?`, []any{at, p.OrganizationID}},
			{"the role renamed", `UPDATE project_roles SET slug = 'reader-2' WHERE id = ?`, []any{role.ID}},
			{"a role permission added", `INSERT INTO project_role_permissions (role_id, permission, position) VALUES (?, 'doc:x', 9)`, []any{role.ID}},
			{"a role permission changed", `UPDATE project_role_permissions SET permission = 'doc:y' WHERE role_id = ? AND permission = 'doc:x'`, []any{role.ID}},
			{"a role permission removed", `DELETE FROM project_role_permissions WHERE role_id = ? AND permission = 'doc:y'`, []any{role.ID}},
			{"a binding added", `INSERT INTO role_bindings (id, project_id, role_id, principal_type, principal_id, created_at)
				VALUES ('rb_epoch', ?, ?, 'user', 'alice', ?)`, []any{p.ID, role.ID, at}},
			{"a binding's expiry set", `UPDATE role_bindings SET expires_at = ? WHERE id = 'rb_epoch'`, []any{at}},
			{"a binding deleted", `DELETE FROM role_bindings WHERE id = 'rb_epoch'`, nil},
			{"the role deleted", `DELETE FROM project_roles WHERE id = ?`, []any{role.ID}},
			{"the key deleted", `DELETE FROM api_keys WHERE id = ?`, []any{keyID}},
			{"the account deleted", `DELETE FROM service_accounts WHERE id = ?`, []any{sa.ID}},
			{"the project deleted", `DELETE FROM projects WHERE id = ?`, []any{p.ID}},
		} {
			check(w.what+" outside the store", true, exec(w.query, w.args...))
		}

		// The api_keys update trigger names every column of the table but last_used_at.
		var named, columns []string
		if dialect == SQLite {
			var trigger string
			if err := s.writer.GetContext(ctx, &trigger, `SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'api_keys_decision_epoch_update'`); err != nil {
				t.Fatal(err)
			}
			_, afterOf, _ := strings.Cut(trigger, "UPDATE OF ")
			list, _, _ := strings.Cut(afterOf, " ON api_keys")
			named = strings.Split(list, ", ")
			if err := s.writer.SelectContext(ctx, &columns, `SELECT name FROM pragma_table_info('api_keys') WHERE name <> 'last_used_at'`); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := s.writer.SelectContext(ctx, &named, `SELECT event_object_column FROM information_schema.triggered_update_columns
				WHERE trigger_schema = current_schema() AND trigger_name = 'api_keys_decision_epoch'
				AND event_object_schema = current_schema() AND event_object_table = 'api_keys'`); err != nil {
				t.Fatal(err)
			}
			if err := s.writer.SelectContext(ctx, &columns, `SELECT column_name FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'api_keys' AND column_name <> 'last_used_at'`); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(named)
		slices.Sort(columns)
		if len(columns) == 0 || !slices.Equal(named, columns) {
			t.Errorf("the api_keys update trigger names %q; the table's columns but last_used_at are %q", named, columns)
		}
	})
}
