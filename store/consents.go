package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OAuthConsent is a consent a user gave an OIDC client for a set of scopes (the provider's
// consent page). (UserID, ClientID, Scopes as a set) is unique.
type OAuthConsent struct {
	UserID   string
	ClientID string
	// Scopes is the consented set, sorted, without repeats.
	Scopes    []string
	GrantedAt time.Time
}

// Covers reports whether the consent covers every scope of requested.
func (c OAuthConsent) Covers(requested []string) bool {
	for _, s := range requested {
		if !slices.Contains(c.Scopes, s) {
			return false
		}
	}
	return true
}

// scopeSet returns scopes sorted and without repeats, joined by spaces.
func scopeSet(scopes []string) string {
	set := slices.Clone(scopes)
	slices.Sort(set)
	return strings.Join(slices.Compact(set), " ")
}

// GrantOAuthConsent records that user c.UserID consents to client c.ClientID for the set
// c.Scopes, at Store.Now (written back to c.GrantedAt, and c.Scopes is normalized). Granting a
// set that is already recorded updates its GrantedAt. It returns ErrInvalid when the user or
// client id is empty or a scope is empty or holds a space, and ErrNotFound when the user or
// the client does not exist.
func (tx *Tx) GrantOAuthConsent(ctx context.Context, c *OAuthConsent) error {
	const op = "grant oauth consent"
	if c.UserID == "" || c.ClientID == "" {
		return fmt.Errorf("store: %s: %w: user and client are required", op, ErrInvalid)
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\n") {
			return fmt.Errorf("store: %s: %w: scope %q", op, ErrInvalid, s)
		}
	}
	set := scopeSet(c.Scopes)
	now := tx.store.Now()
	const upsert = `INSERT INTO oauth_consents (user_id, client_id, scopes, granted_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (user_id, client_id, scopes) DO UPDATE SET granted_at = excluded.granted_at`
	if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(upsert), c.UserID, c.ClientID, set, sqlTime(now)); err != nil {
		if isMissingReference(err) {
			return fmt.Errorf("store: %s: %w: no such user or client", op, ErrNotFound)
		}
		return wrapError(op, err)
	}
	c.Scopes, c.GrantedAt = splitScopes(set), now
	return nil
}

func splitScopes(set string) []string {
	if set == "" {
		return []string{}
	}
	return strings.Split(set, " ")
}

type consentRow struct {
	UserID    string  `db:"user_id"`
	ClientID  string  `db:"client_id"`
	Scopes    string  `db:"scopes"`
	GrantedAt sqlTime `db:"granted_at"`
}

// OAuthConsents returns the consents user userID gave client clientID, newest first. None is
// an empty slice.
func (s *Store) OAuthConsents(ctx context.Context, userID, clientID string) ([]OAuthConsent, error) {
	const query = `SELECT user_id, client_id, scopes, granted_at FROM oauth_consents
		WHERE user_id = ? AND client_id = ? ORDER BY granted_at DESC, scopes`
	var rows []consentRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), userID, clientID); err != nil {
		return nil, wrapError("list oauth consents", err)
	}
	out := make([]OAuthConsent, len(rows))
	for i, r := range rows {
		out[i] = OAuthConsent{UserID: r.UserID, ClientID: r.ClientID, Scopes: splitScopes(r.Scopes), GrantedAt: time.Time(r.GrantedAt)}
	}
	return out, nil
}

// RevokeOAuthConsents deletes every consent user userID gave client clientID and returns how
// many there were.
func (tx *Tx) RevokeOAuthConsents(ctx context.Context, userID, clientID string) (int, error) {
	n, err := tx.execCount(ctx, "revoke oauth consents", `DELETE FROM oauth_consents WHERE user_id = ? AND client_id = ?`, userID, clientID)
	return int(n), err
}
