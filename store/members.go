package store

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"math"
	"strings"
	"time"
)

// RoleOwner is the organization role of an organization's creator. A member
// is an owner when RoleOwner is one of its comma-joined roles.
const RoleOwner = "owner"

// Member is a user's membership of an organization. Role is one role or
// several joined with commas (as better-auth stores them); the store does not
// interpret it beyond CountOwners.
type Member struct {
	ID             string
	OrganizationID string
	UserID         string
	Role           string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// MemberWithUser is a member with the user fields that member lists show.
type MemberWithUser struct {
	Member
	UserName  string
	UserEmail string
	UserImage *string
}

// Sort keys and filter operators of MemberPage.
const (
	MemberSortCreatedAt = "createdAt"
	MemberSortName      = "name"
	MemberSortEmail     = "email"
	MemberSortRole      = "role"

	MemberFilterEq       = "eq"
	MemberFilterNe       = "ne"
	MemberFilterContains = "contains"
)

// MemberPage selects and orders a page of ListMembers.
type MemberPage struct {
	// Limit is the page size; zero or negative means no limit. Offset
	// skips that many members (negative means 0).
	Limit, Offset int
	// SortBy is MemberSortCreatedAt (the default when empty),
	// MemberSortName, MemberSortEmail or MemberSortRole; ties are broken by
	// member ID, in the same direction.
	SortBy   string
	SortDesc bool
	// FilterField, when not empty, is one of "id", "userId", "role",
	// "name", "email" (the user's); FilterOperator is MemberFilterEq (the
	// default when empty), MemberFilterNe (both exact) or
	// MemberFilterContains (a case-insensitive substring match, wildcards
	// taken literally).
	FilterField    string
	FilterValue    string
	FilterOperator string
}

// memberSortColumns and memberFilterColumns whitelist the columns MemberPage
// may name; user input never reaches the SQL text.
var (
	memberSortColumns = map[string]string{
		MemberSortCreatedAt: "m.created_at",
		MemberSortName:      "u.name",
		MemberSortEmail:     "u.email",
		MemberSortRole:      "m.role",
	}
	memberFilterColumns = map[string]string{
		"id":     "m.id",
		"userId": "m.user_id",
		"role":   "m.role",
		"name":   "u.name",
		"email":  "u.email",
	}
)

// AddMember makes userID a member of organization orgID with role and
// returns the membership.
//
// It returns ErrInvalid when role is empty, ErrConflict when the user is a
// member already, and ErrNotFound when the organization or the user does not
// exist.
func (tx *Tx) AddMember(ctx context.Context, orgID, userID, role string) (Member, error) {
	return tx.insertMember(ctx, "add member", orgID, userID, role, tx.store.Now())
}

// insertMember inserts a membership created at now.
func (tx *Tx) insertMember(ctx context.Context, op, orgID, userID, role string, now time.Time) (Member, error) {
	if role == "" {
		return Member{}, fmt.Errorf("store: %s: %w: empty role", op, ErrInvalid)
	}
	m := Member{
		ID:             NewID("mem"),
		OrganizationID: orgID,
		UserID:         userID,
		Role:           role,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	const query = `INSERT INTO members (id, organization_id, user_id, role, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		m.ID, m.OrganizationID, m.UserID, m.Role, sqlTime(now), sqlTime(now))
	if err != nil {
		return Member{}, wrapWriteError(op, err)
	}
	return m, nil
}

// Member returns userID's membership of organization orgID. It returns
// ErrNotFound when the user is not a member.
func (s *Store) Member(ctx context.Context, orgID, userID string) (Member, error) {
	return getMember(ctx, s.reader, "member", "organization_id = ? AND user_id = ?", orgID, userID)
}

// MemberByID returns the member with the given ID in organization orgID. It
// returns ErrNotFound when there is none (or it belongs to another
// organization). On a Tx it sees the transaction's own writes and, after
// LockOrganization or CountOwners, the latest committed role.
func (r reads) MemberByID(ctx context.Context, orgID, memberID string) (Member, error) {
	return getMember(ctx, r.q, "member by id", "organization_id = ? AND id = ?", orgID, memberID)
}

// MemberByEmail returns the membership of organization orgID held by the
// user with the given email (normalised, see NormalizeEmail). It returns ErrNotFound
// when there is no such user or the user is not a member.
func (s *Store) MemberByEmail(ctx context.Context, orgID, email string) (Member, error) {
	return getMember(ctx, s.reader, "member by email",
		"organization_id = ? AND user_id = (SELECT id FROM users WHERE email = ?)",
		orgID, NormalizeEmail(email))
}

// ListMembers returns one page of organization orgID's members with their
// users, selected and ordered by p, and the number of members matching p's
// filter on all pages. An organization without (matching) members, or an
// unknown one, gives an empty slice and 0.
//
// It returns ErrInvalid when p names an unknown sort key, filter field or
// filter operator.
func (s *Store) ListMembers(ctx context.Context, orgID string, p MemberPage) ([]MemberWithUser, int, error) {
	const op = "list members"
	sortBy := p.SortBy
	if sortBy == "" {
		sortBy = MemberSortCreatedAt
	}
	sortColumn, ok := memberSortColumns[sortBy]
	if !ok {
		return nil, 0, fmt.Errorf("store: %s: %w: sort by %q", op, ErrInvalid, p.SortBy)
	}
	direction := "ASC"
	if p.SortDesc {
		direction = "DESC"
	}

	where := "m.organization_id = ?"
	args := []any{orgID}
	if p.FilterField != "" {
		column, ok := memberFilterColumns[p.FilterField]
		if !ok {
			return nil, 0, fmt.Errorf("store: %s: %w: filter field %q", op, ErrInvalid, p.FilterField)
		}
		switch p.FilterOperator {
		case MemberFilterEq, "":
			where += " AND " + column + " = ?"
			args = append(args, p.FilterValue)
		case MemberFilterNe:
			where += " AND " + column + " <> ?"
			args = append(args, p.FilterValue)
		case MemberFilterContains:
			where += " AND LOWER(" + column + `) LIKE ? ESCAPE '\'`
			args = append(args, "%"+escapeLike(strings.ToLower(p.FilterValue))+"%")
		default:
			return nil, 0, fmt.Errorf("store: %s: %w: filter operator %q", op, ErrInvalid, p.FilterOperator)
		}
	}
	const from = " FROM members m JOIN users u ON u.id = m.user_id WHERE "

	var total int
	if err := s.reader.GetContext(ctx, &total, s.reader.Rebind("SELECT COUNT(*)"+from+where), args...); err != nil {
		return nil, 0, wrapError(op, err)
	}

	limit := int64(p.Limit)
	if limit <= 0 {
		limit = math.MaxInt64
	}
	query := "SELECT " + qualify("m", memberColumns) +
		", u.name AS user_name, u.email AS user_email, u.image AS user_image" + from + where +
		" ORDER BY " + sortColumn + " " + direction + ", m.id " + direction + " LIMIT ? OFFSET ?"
	var rows []struct {
		memberRow
		UserName  string         `db:"user_name"`
		UserEmail string         `db:"user_email"`
		UserImage sql.NullString `db:"user_image"`
	}
	err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), append(args, limit, max(p.Offset, 0))...)
	if err != nil {
		return nil, 0, wrapError(op, err)
	}
	out := make([]MemberWithUser, len(rows))
	for i, r := range rows {
		out[i] = MemberWithUser{
			Member:    r.member(),
			UserName:  r.UserName,
			UserEmail: r.UserEmail,
			UserImage: nullStringPtr(r.UserImage),
		}
	}
	return out, total, nil
}

// UpdateMemberRole sets the role of member memberID, bumps its UpdatedAt and
// returns it. Callers that may take RoleOwner away call CountOwners first,
// in the same transaction.
//
// It returns ErrInvalid when role is empty and ErrNotFound when there is no
// such member.
func (tx *Tx) UpdateMemberRole(ctx context.Context, memberID, role string) (Member, error) {
	const op = "update member role"
	if role == "" {
		return Member{}, fmt.Errorf("store: %s: %w: empty role", op, ErrInvalid)
	}
	query := "UPDATE members SET role = ?, updated_at = ? WHERE id = ? RETURNING " + memberColumns
	var r memberRow
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), role, sqlTime(tx.store.Now()), memberID); err != nil {
		return Member{}, wrapError(op, err)
	}
	return r.member(), nil
}

// RemoveMember deletes member memberID. Callers that may remove an owner
// call CountOwners first, in the same transaction. It returns ErrNotFound
// when there is no such member.
func (tx *Tx) RemoveMember(ctx context.Context, memberID string) error {
	const op = "remove member"
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM members WHERE id = ?"), memberID)
	return oneRowAffected(op, res, err)
}

// CountOwners returns how many members of organization orgID hold RoleOwner
// (alone or among comma-joined roles), so that callers can refuse to demote
// or remove the last owner.
//
// It locks the organization first (see lockOrganization): on PostgreSQL a
// second transaction's CountOwners on the same organization waits until this
// transaction ends and then counts the committed result, so two concurrent
// demotions cannot both see two owners. The lock is on the organization row
// rather than on the owner rows because it also orders transactions that
// add or remove owners, and locking rows cannot be combined with COUNT. On
// SQLite transactions are serialised anyway.
//
// It returns ErrNotFound when the organization does not exist.
func (tx *Tx) CountOwners(ctx context.Context, orgID string) (int, error) {
	const op = "count owners"
	if err := tx.lockOrganization(ctx, orgID); err != nil {
		return 0, wrapError(op, err)
	}
	// Surrounding the role list with commas makes ",owner," match any one
	// of its roles; spaces after commas are tolerated.
	const query = `SELECT COUNT(*) FROM members
		WHERE organization_id = ? AND (',' || REPLACE(role, ' ', '') || ',') LIKE ?`
	var n int
	if err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind(query), orgID, "%,"+RoleOwner+",%"); err != nil {
		return 0, wrapError(op, err)
	}
	return n, nil
}

// memberColumns are the columns memberRow scans.
const memberColumns = "id, organization_id, user_id, role, created_at, updated_at"

// memberRow is a members row as scanned.
type memberRow struct {
	ID             string  `db:"id"`
	OrganizationID string  `db:"organization_id"`
	UserID         string  `db:"user_id"`
	Role           string  `db:"role"`
	CreatedAt      sqlTime `db:"created_at"`
	UpdatedAt      sqlTime `db:"updated_at"`
}

func (r memberRow) member() Member {
	return Member{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		UserID:         r.UserID,
		Role:           r.Role,
		CreatedAt:      time.Time(r.CreatedAt),
		UpdatedAt:      time.Time(r.UpdatedAt),
	}
}

func getMember(ctx context.Context, q querier, op, where string, args ...any) (Member, error) {
	var r memberRow
	if err := q.GetContext(ctx, &r, q.Rebind("SELECT "+memberColumns+" FROM members WHERE "+where), args...); err != nil {
		return Member{}, wrapError(op, err)
	}
	return r.member(), nil
}

// escapeLike escapes the LIKE wildcards of s for ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Invitation statuses. An invitation is created pending and moves once to
// one of the other three.
const (
	InvitationPending  = "pending"
	InvitationAccepted = "accepted"
	InvitationRejected = "rejected"
	InvitationCanceled = "canceled"
)

// Invitation invites the holder of Email (stored normalised, see
// NormalizeEmail) to join an
// organization with Role (one role or several comma-joined). InviterID is
// the inviting user's ID.
type Invitation struct {
	ID             string
	OrganizationID string
	Email          string
	Role           string
	Status         string
	InviterID      string
	ExpiresAt      time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// CreateInvitation inserts inv. It fills in an empty inv.ID (NewID("inv"))
// and an empty Status (InvitationPending), normalises Email, stores
// ExpiresAt in UTC at microsecond precision, and sets CreatedAt and UpdatedAt
// to Store.Now.
//
// An organization holds at most one pending invitation per email (a unique
// index enforces it, so of two concurrent transactions only one succeeds). A
// pending inv first cancels the organization's expired pending invitation of
// the same email, if any, bumping its UpdatedAt: an expired invitation never
// blocks a new one.
//
// It returns ErrInvalid when Email (once normalised), Role or InviterID is
// empty, ExpiresAt is zero or Status is not an invitation status,
// ErrConflict when inv.ID is taken or inv is pending and the organization
// already has an unexpired pending invitation of that email, and ErrNotFound
// when the organization or the inviter does not exist.
func (tx *Tx) CreateInvitation(ctx context.Context, inv *Invitation) error {
	const op = "create invitation"
	if inv.Status == "" {
		inv.Status = InvitationPending
	}
	inv.Email = NormalizeEmail(inv.Email)
	switch {
	case inv.Email == "" || inv.Role == "" || inv.InviterID == "":
		return fmt.Errorf("store: %s: %w: email, role and inviter are required", op, ErrInvalid)
	case inv.ExpiresAt.IsZero():
		return fmt.Errorf("store: %s: %w: no expiry", op, ErrInvalid)
	case !validInvitationStatus(inv.Status):
		return fmt.Errorf("store: %s: %w: status %q", op, ErrInvalid, inv.Status)
	}
	if inv.ID == "" {
		inv.ID = NewID("inv")
	}
	inv.ExpiresAt = inv.ExpiresAt.UTC().Truncate(time.Microsecond)
	now := tx.store.Now()
	inv.CreatedAt, inv.UpdatedAt = now, now

	if inv.Status == InvitationPending {
		const expire = `UPDATE invitations SET status = ?, updated_at = ?
			WHERE organization_id = ? AND email = ? AND status = ? AND expires_at <= ?`
		_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(expire),
			InvitationCanceled, sqlTime(now), inv.OrganizationID, inv.Email, InvitationPending, sqlTime(now))
		if err != nil {
			return wrapError(op, err)
		}
	}
	const query = `INSERT INTO invitations (id, organization_id, email, role, status, inviter_id,
		expires_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		inv.ID, inv.OrganizationID, inv.Email, inv.Role, inv.Status, inv.InviterID,
		sqlTime(inv.ExpiresAt), sqlTime(now), sqlTime(now))
	if err != nil {
		return wrapWriteError(op, err)
	}
	return nil
}

// Invitation returns the invitation with the given ID, whatever its status
// and expiry. It returns ErrNotFound when there is none.
func (s *Store) Invitation(ctx context.Context, id string) (Invitation, error) {
	var r invitationRow
	query := "SELECT " + invitationColumns + " FROM invitations WHERE id = ?"
	if err := s.reader.GetContext(ctx, &r, s.reader.Rebind(query), id); err != nil {
		return Invitation{}, wrapError("invitation", err)
	}
	return r.invitation(), nil
}

// PendingInvitation returns the pending, unexpired (ExpiresAt after
// Store.Now) invitation of email (normalised, see NormalizeEmail) to
// organization orgID (there is at most one, see CreateInvitation). It returns
// ErrNotFound when there is none. On a Tx it sees the transaction's own
// writes.
func (r reads) PendingInvitation(ctx context.Context, orgID, email string) (Invitation, error) {
	var row invitationRow
	query := "SELECT " + invitationColumns + ` FROM invitations
		WHERE organization_id = ? AND email = ? AND status = ? AND expires_at > ?
		ORDER BY created_at DESC, id DESC LIMIT 1`
	err := r.q.GetContext(ctx, &row, r.q.Rebind(query),
		orgID, NormalizeEmail(email), InvitationPending, sqlTime(r.store.Now()))
	if err != nil {
		return Invitation{}, wrapError("pending invitation", err)
	}
	return row.invitation(), nil
}

// SetInvitationStatus moves pending invitation id to status
// (InvitationAccepted, InvitationRejected or InvitationCanceled), bumps its
// UpdatedAt and returns it. Only a pending invitation moves, whatever its
// expiry, so that of two concurrent transactions accepting one invitation
// exactly one succeeds.
//
// It returns ErrInvalid for any other status, and ErrNotFound when there is
// no pending invitation with that ID.
func (tx *Tx) SetInvitationStatus(ctx context.Context, id, status string) (Invitation, error) {
	const op = "set invitation status"
	if status == InvitationPending || !validInvitationStatus(status) {
		return Invitation{}, fmt.Errorf("store: %s: %w: status %q", op, ErrInvalid, status)
	}
	return tx.updatePendingInvitation(ctx, op, "status = ?", id, status)
}

// RefreshInvitation sets the expiry of pending invitation id to expiresAt
// (stored in UTC at microsecond precision), as a resent invitation does,
// bumps its UpdatedAt and returns it. It returns ErrInvalid when expiresAt
// is zero, and ErrNotFound when there is no pending invitation with that ID.
func (tx *Tx) RefreshInvitation(ctx context.Context, id string, expiresAt time.Time) (Invitation, error) {
	const op = "refresh invitation"
	if expiresAt.IsZero() {
		return Invitation{}, fmt.Errorf("store: %s: %w: no expiry", op, ErrInvalid)
	}
	return tx.updatePendingInvitation(ctx, op, "expires_at = ?", id, sqlTime(expiresAt))
}

// updatePendingInvitation runs UPDATE invitations SET <set>, updated_at on
// pending invitation id and returns the updated row.
func (tx *Tx) updatePendingInvitation(ctx context.Context, op, set, id string, value any) (Invitation, error) {
	query := "UPDATE invitations SET " + set + ", updated_at = ? WHERE id = ? AND status = ? RETURNING " + invitationColumns
	var r invitationRow
	err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), value, sqlTime(tx.store.Now()), id, InvitationPending)
	if err != nil {
		return Invitation{}, wrapError(op, err)
	}
	return r.invitation(), nil
}

// ListInvitations returns every invitation of organization orgID, whatever
// its status and expiry, oldest first (by CreatedAt, then ID). No match is
// an empty slice, not ErrNotFound.
func (s *Store) ListInvitations(ctx context.Context, orgID string) ([]Invitation, error) {
	return listInvitations(ctx, s, "list invitations", "organization_id = ?", orgID)
}

// ListUserInvitations returns the pending, unexpired invitations of email
// (normalised, see NormalizeEmail) to any organization, oldest first. No match is an
// empty slice, not ErrNotFound.
func (s *Store) ListUserInvitations(ctx context.Context, email string) ([]Invitation, error) {
	return listInvitations(ctx, s, "list user invitations", "email = ? AND status = ? AND expires_at > ?",
		NormalizeEmail(email), InvitationPending, sqlTime(s.Now()))
}

func listInvitations(ctx context.Context, s *Store, op, where string, args ...any) ([]Invitation, error) {
	var rows []invitationRow
	query := "SELECT " + invitationColumns + " FROM invitations WHERE " + where + " ORDER BY created_at, id"
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), args...); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]Invitation, len(rows))
	for i, r := range rows {
		out[i] = r.invitation()
	}
	return out, nil
}

func validInvitationStatus(status string) bool {
	switch status {
	case InvitationPending, InvitationAccepted, InvitationRejected, InvitationCanceled:
		return true
	}
	return false
}

// invitationColumns are the columns invitationRow scans.
const invitationColumns = "id, organization_id, email, role, status, inviter_id, expires_at, created_at, updated_at"

// invitationRow is an invitations row as scanned.
type invitationRow struct {
	ID             string  `db:"id"`
	OrganizationID string  `db:"organization_id"`
	Email          string  `db:"email"`
	Role           string  `db:"role"`
	Status         string  `db:"status"`
	InviterID      string  `db:"inviter_id"`
	ExpiresAt      sqlTime `db:"expires_at"`
	CreatedAt      sqlTime `db:"created_at"`
	UpdatedAt      sqlTime `db:"updated_at"`
}

func (r invitationRow) invitation() Invitation {
	return Invitation{
		ID:             r.ID,
		OrganizationID: r.OrganizationID,
		Email:          r.Email,
		Role:           r.Role,
		Status:         r.Status,
		InviterID:      r.InviterID,
		ExpiresAt:      time.Time(r.ExpiresAt),
		CreatedAt:      time.Time(r.CreatedAt),
		UpdatedAt:      time.Time(r.UpdatedAt),
	}
}

// RoleNames yields the roles of a comma-joined role list (a member's or an invitation's role, as
// better-auth stores several), trimmed, skipping empty entries; a role the list repeats is
// yielded again. It is the one parser of role lists.
func RoleNames(list string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for r := range strings.SplitSeq(list, ",") {
			if r = strings.TrimSpace(r); r != "" && !yield(r) {
				return
			}
		}
	}
}
