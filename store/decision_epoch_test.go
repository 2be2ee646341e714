package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDecisionEpoch: on SQLite the decision epoch moves on every insert, update and delete of
// the rows an API-key decision reads — made through the store or by statements no store code
// wraps — and stands still for writes to anything else, an API key's last use among them; the
// api_keys trigger names every column but last_used_at. PostgreSQL keeps no epoch.
func TestDecisionEpoch(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, dialect Dialect, _ string, s *Store) {
		ctx := t.Context()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if dialect == Postgres {
			if _, err := s.DecisionEpoch(ctx); s.KeepsDecisionEpoch() || !errors.Is(err, ErrNoDecisionEpoch) {
				t.Errorf("PostgreSQL: KeepsDecisionEpoch %v, DecisionEpoch error %v; want false and ErrNoDecisionEpoch", s.KeepsDecisionEpoch(), err)
			}
			return
		}
		epoch := func() int64 {
			t.Helper()
			e, err := s.DecisionEpoch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		check := func(what string, wantMoved bool, write func() error) {
			t.Helper()
			before := epoch()
			if err := write(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if moved := epoch() > before; moved != wantMoved {
				t.Errorf("%s: epoch moved %v, want %v", what, moved, wantMoved)
			}
		}
		inTx := func(fn func(tx *Tx) error) func() error {
			return func() error { return s.InTx(ctx, fn) }
		}
		exec := func(query string, args ...any) func() error {
			return func() error {
				res, err := s.writer.ExecContext(ctx, query, args...)
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
		var p Project
		var sa ServiceAccount
		var role ProjectRole
		check("a user created", false, inTx(func(tx *Tx) error {
			user = User{Name: "Owner", Email: "epoch@example.com"}
			return tx.CreateUser(ctx, &user, "")
		}))
		check("an organization and a project created", true, inTx(func(tx *Tx) (err error) {
			p, err = projectOwnedBy(ctx, tx, user.ID, "epoch")
			return err
		}))
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
		var trigger string
		if err := s.writer.GetContext(ctx, &trigger, `SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'api_keys_decision_epoch_update'`); err != nil {
			t.Fatal(err)
		}
		_, afterOf, _ := strings.Cut(trigger, "UPDATE OF ")
		list, _, _ := strings.Cut(afterOf, " ON api_keys")
		named := strings.Split(list, ", ")
		var columns []string
		if err := s.writer.SelectContext(ctx, &columns, `SELECT name FROM pragma_table_info('api_keys') WHERE name <> 'last_used_at'`); err != nil {
			t.Fatal(err)
		}
		slices.Sort(named)
		slices.Sort(columns)
		if !slices.Equal(named, columns) {
			t.Errorf("api_keys_decision_epoch_update names %q; the table's columns but last_used_at are %q", named, columns)
		}
	})
}
