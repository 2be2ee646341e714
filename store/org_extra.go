package store

import (
	"context"
	"fmt"
	"strings"
)

// Transactional reads and role bookkeeping for the organization rules that the
// /api/auth/organization handlers apply (last owner, role assignment, dynamic
// role rename and delete). They complement organizations.go and members.go.

// LockOrganization makes sure organization orgID exists and serialises the
// transactions that apply a read-check-write rule to its members or roles
// (see lockOrganization): call it first, then read and write in the same
// transaction. Locking again in the same transaction is harmless.
//
// It returns ErrNotFound when the organization does not exist.
func (tx *Tx) LockOrganization(ctx context.Context, orgID string) error {
	if err := tx.lockOrganization(ctx, orgID); err != nil {
		return wrapError("lock organization", err)
	}
	return nil
}

// CountRoleHolders returns how many members of organization orgID hold role
// (alone or among comma-joined roles; spaces after commas are tolerated). It
// locks the organization first (see LockOrganization), so that a role
// deleted after counting no holders cannot gain one concurrently from a
// transaction that also locks. It returns ErrNotFound when the organization
// does not exist.
func (tx *Tx) CountRoleHolders(ctx context.Context, orgID, role string) (int, error) {
	const op = "count role holders"
	if err := tx.lockOrganization(ctx, orgID); err != nil {
		return 0, wrapError(op, err)
	}
	query := `SELECT COUNT(*) FROM members
		WHERE organization_id = ? AND (',' || REPLACE(role, ' ', '') || ',') LIKE ? ESCAPE '\'`
	var n int
	if err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind(query), orgID, roleListPattern(role)); err != nil {
		return 0, wrapError(op, err)
	}
	return n, nil
}

// RenameRoleHolders replaces the role name from with to in the role lists of
// organization orgID's members and pending invitations (a list that holds
// both keeps one), bumping the UpdatedAt of every changed row, and returns
// how many members changed. Call it in the transaction that renames the
// dynamic role, after LockOrganization.
//
// It returns ErrInvalid when from or to is empty.
func (tx *Tx) RenameRoleHolders(ctx context.Context, orgID, from, to string) (int, error) {
	const op = "rename role holders"
	if from == "" || to == "" {
		return 0, fmt.Errorf("store: %s: %w: empty role name", op, ErrInvalid)
	}
	members, err := tx.renameRoleIn(ctx, op, "members", "organization_id = ?", []any{orgID}, from, to)
	if err != nil {
		return 0, err
	}
	_, err = tx.renameRoleIn(ctx, op, "invitations", "organization_id = ? AND status = ?",
		[]any{orgID, InvitationPending}, from, to)
	return members, err
}

// renameRoleIn rewrites the role column of the rows of table matching where
// whose role list holds from, and returns how many rows changed. table and
// where are constants of this file, never input.
func (tx *Tx) renameRoleIn(ctx context.Context, op, table, where string, args []any, from, to string) (int, error) {
	var rows []struct {
		ID   string `db:"id"`
		Role string `db:"role"`
	}
	query := "SELECT id, role FROM " + table + " WHERE " + where +
		` AND (',' || REPLACE(role, ' ', '') || ',') LIKE ? ESCAPE '\' ORDER BY id`
	if err := tx.tx.SelectContext(ctx, &rows, tx.tx.Rebind(query), append(args, roleListPattern(from))...); err != nil {
		return 0, wrapError(op, err)
	}
	now := sqlTime(tx.store.Now())
	update := tx.tx.Rebind("UPDATE " + table + " SET role = ?, updated_at = ? WHERE id = ?")
	for _, r := range rows {
		if _, err := tx.tx.ExecContext(ctx, update, renameInRoleList(r.Role, from, to), now, r.ID); err != nil {
			return 0, wrapError(op, err)
		}
	}
	return len(rows), nil
}

// roleListPattern is the LIKE pattern (ESCAPE '\') that matches a role list,
// surrounded by commas and stripped of spaces, holding role.
func roleListPattern(role string) string {
	return "%," + escapeLike(role) + ",%"
}

// renameInRoleList replaces from with to in a comma-joined role list,
// dropping a duplicate that the rename would create.
func renameInRoleList(list, from, to string) string {
	var out []string
	seen := map[string]bool{}
	for r := range RoleNames(list) {
		if r == from {
			r = to
		}
		if seen[r] {
			continue
		}
		seen[r] = true
		out = append(out, r)
	}
	return strings.Join(out, ",")
}
