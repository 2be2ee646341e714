package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Session is a signed-in browser session. TokenHash is the hex SHA-256 of the
// session token in the cookie (the token itself is never stored). A session
// whose ExpiresAt is not after Store.Now is expired: reads treat it as
// absent. ActiveOrganizationID is the organization the user works in, nil
// when none is selected.
type Session struct {
	ID                   string
	TokenHash            string
	UserID               string
	ExpiresAt            time.Time
	RememberMe           bool
	IPAddress            string
	UserAgent            string
	ActiveOrganizationID *string
	// AMR is how the user signed in: RFC 8176 method references ("pwd", "otp", "mfa", a social
	// provider's id, …), in the order used; empty for sessions started before it was recorded.
	AMR       []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// sessionColumns lists sessions' columns in sessionRow order, qualified by
// the alias s.
const sessionColumns = `s.id, s.token_hash, s.user_id, s.expires_at, s.remember_me, s.ip_address,
	s.user_agent, s.active_organization_id, s.amr, s.created_at, s.updated_at`

// CreateSession inserts s. It fills in an empty s.ID (NewID("ses")) and zero
// CreatedAt/UpdatedAt (Store.Now; UpdatedAt defaults to CreatedAt), and
// stores times in UTC at microsecond precision, updating s to match.
//
// It returns ErrInvalid when TokenHash or UserID is empty or ExpiresAt is
// zero, ErrNotFound when there is no user s.UserID, and ErrConflict when the
// token hash or ID is taken.
func (tx *Tx) CreateSession(ctx context.Context, s *Session) error {
	const op = "create session"
	switch {
	case s.TokenHash == "":
		return fmt.Errorf("store: %s: %w: empty token hash", op, ErrInvalid)
	case s.UserID == "":
		return fmt.Errorf("store: %s: %w: empty user id", op, ErrInvalid)
	case s.ExpiresAt.IsZero():
		return fmt.Errorf("store: %s: %w: zero expiry", op, ErrInvalid)
	}
	id := s.ID
	if id == "" {
		id = NewID("ses")
	}
	created, updated := tx.stamps(s.CreatedAt, s.UpdatedAt)
	expires := s.ExpiresAt.UTC().Truncate(time.Microsecond)

	const query = `INSERT INTO sessions (id, token_hash, user_id, expires_at, remember_me, ip_address,
		user_agent, active_organization_id, amr, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query),
		id, s.TokenHash, s.UserID, sqlTime(expires), s.RememberMe, s.IPAddress,
		s.UserAgent, s.ActiveOrganizationID, strings.Join(s.AMR, " "), sqlTime(created), sqlTime(updated))
	if err != nil {
		if isMissingReference(err) {
			return fmt.Errorf("store: %s: user %s: %w", op, s.UserID, ErrNotFound)
		}
		return wrapError(op, err)
	}
	s.ID, s.ExpiresAt, s.CreatedAt, s.UpdatedAt = id, expires, created, updated
	return nil
}

// SessionByTokenHash returns the unexpired session with tokenHash and its
// user, in one query through a prepared statement (it runs on every
// cookie-authenticated request). It
// returns ErrNotFound when there is no such session or it has expired.
func (s *Store) SessionByTokenHash(ctx context.Context, tokenHash string) (Session, User, error) {
	const query = `SELECT ` + sessionColumns + `,
		u.name AS user_name, u.email AS user_email, u.email_verified AS user_email_verified,
		u.image AS user_image, u.created_at AS user_created_at, u.updated_at AS user_updated_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = ? AND s.expires_at > ?`
	var row struct {
		sessionRow
		UserName          string         `db:"user_name"`
		UserEmail         string         `db:"user_email"`
		UserEmailVerified bool           `db:"user_email_verified"`
		UserImage         sql.NullString `db:"user_image"`
		UserCreatedAt     sqlTime        `db:"user_created_at"`
		UserUpdatedAt     sqlTime        `db:"user_updated_at"`
	}
	stmt, err := s.readStatement(ctx, query)
	if err != nil {
		return Session{}, User{}, wrapError("session by token hash", err)
	}
	if err := stmt.GetContext(ctx, &row, tokenHash, sqlTime(s.Now())); err != nil {
		return Session{}, User{}, wrapError("session by token hash", err)
	}
	user := User{
		ID:            row.UserID,
		Name:          row.UserName,
		Email:         row.UserEmail,
		EmailVerified: row.UserEmailVerified,
		Image:         nullStringPtr(row.UserImage),
		CreatedAt:     time.Time(row.UserCreatedAt),
		UpdatedAt:     time.Time(row.UserUpdatedAt),
	}
	return row.session(), user, nil
}

// ListSessions returns the unexpired sessions of user userID, newest first
// (by CreatedAt, then ID). No session (or no such user) is an empty slice,
// not ErrNotFound.
func (s *Store) ListSessions(ctx context.Context, userID string) ([]Session, error) {
	const query = `SELECT ` + sessionColumns + ` FROM sessions s
		WHERE s.user_id = ? AND s.expires_at > ?
		ORDER BY s.created_at DESC, s.id DESC`
	var rows []sessionRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), userID, sqlTime(s.Now())); err != nil {
		return nil, wrapError("list sessions", err)
	}
	sessions := make([]Session, len(rows))
	for i, r := range rows {
		sessions[i] = r.session()
	}
	return sessions, nil
}

// ExtendSession sets the expiry of session id to expiresAt (sliding
// expiration) and UpdatedAt to Store.Now. It works on expired sessions too.
// It returns ErrNotFound when there is no session id.
func (tx *Tx) ExtendSession(ctx context.Context, id string, expiresAt time.Time) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE sessions SET expires_at = ?, updated_at = ? WHERE id = ?`),
		sqlTime(expiresAt.UTC().Truncate(time.Microsecond)), sqlTime(tx.store.Now()), id)
	return oneRowAffected("extend session", res, err)
}

// DeleteSession deletes session id (sign-out). It returns ErrNotFound when
// there is no session id.
func (tx *Tx) DeleteSession(ctx context.Context, id string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM sessions WHERE id = ?`), id)
	return oneRowAffected("delete session", res, err)
}

// DeleteSessionByUser deletes session sessionID if it belongs to user userID
// (revoking one of one's own sessions). It returns ErrNotFound when there is
// no such session or it belongs to another user; nothing is deleted then.
func (tx *Tx) DeleteSessionByUser(ctx context.Context, userID, sessionID string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM sessions WHERE id = ? AND user_id = ?`), sessionID, userID)
	return oneRowAffected("delete session by user", res, err)
}

// DeleteOtherSessions deletes every session of user userID except
// keepSessionID (expired ones included) and returns how many it deleted.
// Pass keepSessionID "" to delete them all. It never returns ErrNotFound.
func (tx *Tx) DeleteOtherSessions(ctx context.Context, userID, keepSessionID string) (int64, error) {
	const op = "delete other sessions"
	return tx.execCount(ctx, op, `DELETE FROM sessions WHERE user_id = ? AND id <> ?`, userID, keepSessionID)
}

// DeleteExpiredSessions deletes every session that has expired by Store.Now
// and returns how many it deleted (housekeeping; reads already ignore them).
func (tx *Tx) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	const op = "delete expired sessions"
	return tx.execCount(ctx, op, `DELETE FROM sessions WHERE expires_at <= ?`, sqlTime(tx.store.Now()))
}

// SetActiveOrganization sets the active organization of session sessionID
// (nil clears it) and UpdatedAt to Store.Now. It does not check that the
// organization exists or that the user is a member: the caller does. It
// returns ErrNotFound when there is no session sessionID.
func (tx *Tx) SetActiveOrganization(ctx context.Context, sessionID string, orgID *string) error {
	res, err := tx.tx.ExecContext(ctx,
		tx.tx.Rebind(`UPDATE sessions SET active_organization_id = ?, updated_at = ? WHERE id = ?`),
		orgID, sqlTime(tx.store.Now()), sessionID)
	return oneRowAffected("set active organization", res, err)
}

// ClearActiveOrganization unsets organization orgID as the active
// organization of every session that has it (of every user), bumping their
// UpdatedAt. Call it in the transaction that archives or deletes the
// organization, so that no session keeps pointing at it: sessions have no
// foreign key to organizations. No matching session is not an error.
func (tx *Tx) ClearActiveOrganization(ctx context.Context, orgID string) error {
	_, err := tx.tx.ExecContext(ctx,
		tx.tx.Rebind(`UPDATE sessions SET active_organization_id = NULL, updated_at = ? WHERE active_organization_id = ?`),
		sqlTime(tx.store.Now()), orgID)
	if err != nil {
		return wrapError("clear active organization", err)
	}
	return nil
}

// ClearUserActiveOrganization clears organization orgID as the active organization of every
// session of user userID (when the user leaves or is removed from it). Sessions with another
// active organization, and other users' sessions, are left alone. It never returns ErrNotFound.
func (tx *Tx) ClearUserActiveOrganization(ctx context.Context, userID, orgID string) error {
	_, err := tx.tx.ExecContext(ctx,
		tx.tx.Rebind(`UPDATE sessions SET active_organization_id = NULL, updated_at = ?
			WHERE user_id = ? AND active_organization_id = ?`),
		sqlTime(tx.store.Now()), userID, orgID)
	if err != nil {
		return wrapError("clear user active organization", err)
	}
	return nil
}

// sessionRow is a sessions row as scanned.
type sessionRow struct {
	ID                   string         `db:"id"`
	TokenHash            string         `db:"token_hash"`
	UserID               string         `db:"user_id"`
	ExpiresAt            sqlTime        `db:"expires_at"`
	RememberMe           bool           `db:"remember_me"`
	IPAddress            string         `db:"ip_address"`
	UserAgent            string         `db:"user_agent"`
	ActiveOrganizationID sql.NullString `db:"active_organization_id"`
	AMR                  string         `db:"amr"`
	CreatedAt            sqlTime        `db:"created_at"`
	UpdatedAt            sqlTime        `db:"updated_at"`
}

// amrOf is a stored amr list; nil when empty.
func amrOf(stored string) []string {
	if stored == "" {
		return nil
	}
	return strings.Fields(stored)
}

func (r sessionRow) session() Session {
	return Session{
		ID:                   r.ID,
		TokenHash:            r.TokenHash,
		UserID:               r.UserID,
		ExpiresAt:            time.Time(r.ExpiresAt),
		RememberMe:           r.RememberMe,
		IPAddress:            r.IPAddress,
		UserAgent:            r.UserAgent,
		ActiveOrganizationID: nullStringPtr(r.ActiveOrganizationID),
		AMR:                  amrOf(r.AMR),
		CreatedAt:            time.Time(r.CreatedAt),
		UpdatedAt:            time.Time(r.UpdatedAt),
	}
}
