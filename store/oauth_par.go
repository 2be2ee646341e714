package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Pushed authorization requests (RFC 9126), the jti of client assertions
// (RFC 7523) and the provider's used browser challenges: short-lived rows, each
// swept a few at a time by the writes that add rows.

// sweepPerWrite is how many expired rows each insert of this file removes.
const sweepPerWrite = 4

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// CreatePARRequest stores request (the JSON of a pushed authorization request)
// of client clientID under requestURI until expiresAt. Only the SHA-256 of
// requestURI is stored. It returns ErrConflict when requestURI is taken.
func (s *Store) CreatePARRequest(ctx context.Context, requestURI, clientID, request string, expiresAt time.Time) error {
	const op = "create par request"
	return s.InTx(ctx, func(tx *Tx) error {
		now := tx.store.Now()
		if err := tx.sweep(ctx, "oauth_par_requests", "id", now); err != nil {
			return wrapError(op, err)
		}
		const insert = `INSERT INTO oauth_par_requests (id, client_id, request, expires_at) VALUES (?, ?, ?, ?)`
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), sha256Hex(requestURI), clientID, request, sqlTime(expiresAt)); err != nil {
			return wrapError(op, err)
		}
		return nil
	})
}

// TakePARRequest deletes the pushed request stored under requestURI and returns
// its client id and request: of concurrent takes of one request_uri exactly one
// succeeds. It returns ErrNotFound when there is none, or it has expired.
func (s *Store) TakePARRequest(ctx context.Context, requestURI string) (clientID, request string, err error) {
	const op = "take par request"
	var row struct {
		ClientID  string  `db:"client_id"`
		Request   string  `db:"request"`
		ExpiresAt sqlTime `db:"expires_at"`
	}
	const del = `DELETE FROM oauth_par_requests WHERE id = ? RETURNING client_id, request, expires_at`
	if err := s.writer.GetContext(ctx, &row, s.writer.Rebind(del), sha256Hex(requestURI)); err != nil {
		return "", "", wrapError(op, err)
	}
	if !s.Now().Before(time.Time(row.ExpiresAt)) {
		return "", "", fmt.Errorf("store: %s: %w: expired", op, ErrNotFound)
	}
	return row.ClientID, row.Request, nil
}

// PARRequestClient returns the client id of the pushed request stored under
// requestURI, leaving it in place, so that a caller can refuse another client's
// attempt before taking it. It returns ErrNotFound when there is none, or it has
// expired.
func (s *Store) PARRequestClient(ctx context.Context, requestURI string) (string, error) {
	var clientID string
	const q = `SELECT client_id FROM oauth_par_requests WHERE id = ? AND expires_at > ?`
	if err := s.reader.GetContext(ctx, &clientID, s.reader.Rebind(q), sha256Hex(requestURI), sqlTime(s.Now())); err != nil {
		return "", wrapError("par request client", err)
	}
	return clientID, nil
}

// AddClientAssertion records the jti of a client assertion that expires at
// expiresAt. It returns ErrConflict when the jti is recorded and has not
// expired: of concurrent uses of one jti exactly one succeeds.
func (s *Store) AddClientAssertion(ctx context.Context, jti string, expiresAt time.Time) error {
	const op = "add client assertion"
	return s.InTx(ctx, func(tx *Tx) error {
		now := tx.store.Now()
		// An expired row of this very jti goes too: the assertion carrying it again is
		// refused by its exp long before it gets here, so a new one may take the jti.
		const delOld = `DELETE FROM oauth_client_assertions WHERE jti = ? AND expires_at <= ?`
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(delOld), jti, sqlTime(now)); err != nil {
			return wrapError(op, err)
		}
		if err := tx.sweep(ctx, "oauth_client_assertions", "jti", now); err != nil {
			return wrapError(op, err)
		}
		const insert = `INSERT INTO oauth_client_assertions (jti, expires_at) VALUES (?, ?)`
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), jti, sqlTime(expiresAt)); err != nil {
			return wrapError(op, err)
		}
		return nil
	})
}

// ClientAssertionKnown reports whether jti is recorded and has not expired.
func (s *Store) ClientAssertionKnown(ctx context.Context, jti string) (bool, error) {
	var n int
	const q = `SELECT COUNT(*) FROM oauth_client_assertions WHERE jti = ? AND expires_at > ?`
	if err := s.reader.GetContext(ctx, &n, s.reader.Rebind(q), jti, sqlTime(s.Now())); err != nil {
		return false, wrapError("client assertion known", err)
	}
	return n > 0, nil
}

// UseChallenge records that the single-use challenge id (a consent challenge, a
// sign-in continuation) has been used; it stays recorded until expiresAt, when the
// challenge expires. It returns ErrConflict when id is recorded already: of
// concurrent uses of one challenge exactly one succeeds. Only the SHA-256 of id is
// stored.
func (s *Store) UseChallenge(ctx context.Context, id string, expiresAt time.Time) error {
	const op = "use challenge"
	return s.InTx(ctx, func(tx *Tx) error {
		now := tx.store.Now()
		if err := tx.sweep(ctx, "oauth_used_challenges", "id", now); err != nil {
			return wrapError(op, err)
		}
		const insert = `INSERT INTO oauth_used_challenges (id, expires_at) VALUES (?, ?)`
		if _, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), sha256Hex(id), sqlTime(expiresAt)); err != nil {
			return wrapError(op, err)
		}
		return nil
	})
}

// sweep deletes up to sweepPerWrite rows of table whose expires_at is before
// now. table and key are constants of this package, never input.
func (tx *Tx) sweep(ctx context.Context, table, key string, now time.Time) error {
	q := `DELETE FROM ` + table + ` WHERE ` + key + ` IN (SELECT ` + key + ` FROM ` + table +
		` WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(q), sqlTime(now), sweepPerWrite)
	return err
}
