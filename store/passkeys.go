package store

import (
	"context"
	"fmt"
	"time"
)

// Passkeys: users' WebAuthn credentials (public keys only) and the ceremonies under way. The
// store never sees a ceremony's cookie token, only its hash.

// Passkey ceremony purposes.
const (
	// PasskeyRegister is a registration ceremony of a signed-in user.
	PasskeyRegister = "register"
	// PasskeyAuthenticate is a sign-in ceremony.
	PasskeyAuthenticate = "authenticate"
)

// Passkey is one registered WebAuthn credential. CredentialID is base64url without padding;
// PublicKey the COSE key, base64 (standard). Counter is the last signature counter seen.
// DeviceType is "multiDevice" for a backup-eligible credential, else "singleDevice".
type Passkey struct {
	ID             string
	UserID         string
	Name           *string
	CredentialID   string
	PublicKey      string
	Counter        uint32
	DeviceType     string
	BackupEligible bool
	BackedUp       bool
	Transports     string
	AAGUID         string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

type passkeyRow struct {
	ID             string  `db:"id"`
	UserID         string  `db:"user_id"`
	Name           *string `db:"name"`
	CredentialID   string  `db:"credential_id"`
	PublicKey      string  `db:"public_key"`
	Counter        int64   `db:"counter"`
	DeviceType     string  `db:"device_type"`
	BackupEligible bool    `db:"backup_eligible"`
	BackedUp       bool    `db:"backed_up"`
	Transports     string  `db:"transports"`
	AAGUID         string  `db:"aaguid"`
	CreatedAt      sqlTime `db:"created_at"`
	UpdatedAt      sqlTime `db:"updated_at"`
}

func (r passkeyRow) passkey() Passkey {
	return Passkey{ID: r.ID, UserID: r.UserID, Name: r.Name, CredentialID: r.CredentialID,
		PublicKey: r.PublicKey, Counter: uint32(r.Counter), DeviceType: r.DeviceType,
		BackupEligible: r.BackupEligible, BackedUp: r.BackedUp, Transports: r.Transports,
		AAGUID: r.AAGUID, CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt)}
}

const passkeyColumns = `id, user_id, name, credential_id, public_key, counter, device_type,
	backup_eligible, backed_up, transports, aaguid, created_at, updated_at`

// PasskeysOf lists userID's passkeys, oldest first.
func (r reads) PasskeysOf(ctx context.Context, userID string) ([]Passkey, error) {
	var rows []passkeyRow
	err := r.q.SelectContext(ctx, &rows, r.q.Rebind(`SELECT `+passkeyColumns+` FROM passkeys
		WHERE user_id = ? ORDER BY created_at, id`), userID)
	if err != nil {
		return nil, wrapError("passkeys of", err)
	}
	out := make([]Passkey, 0, len(rows))
	for _, row := range rows {
		out = append(out, row.passkey())
	}
	return out, nil
}

// PasskeyByCredentialID returns the passkey whose credential id is credentialID, or ErrNotFound.
func (r reads) PasskeyByCredentialID(ctx context.Context, credentialID string) (Passkey, error) {
	var row passkeyRow
	err := r.q.GetContext(ctx, &row, r.q.Rebind(`SELECT `+passkeyColumns+` FROM passkeys
		WHERE credential_id = ?`), credentialID)
	if err != nil {
		return Passkey{}, wrapError("passkey", err)
	}
	return row.passkey(), nil
}

// CreatePasskey stores p under a new id (p.ID is ignored) and returns it as stored. It returns
// ErrInvalid without a credential id, public key or known device type, ErrConflict when the
// credential is registered already (to anyone) and ErrNotFound when there is no user p.UserID.
func (tx *Tx) CreatePasskey(ctx context.Context, p Passkey) (Passkey, error) {
	const op = "create passkey"
	if p.CredentialID == "" || p.PublicKey == "" || (p.DeviceType != "singleDevice" && p.DeviceType != "multiDevice") {
		return Passkey{}, fmt.Errorf("store: %s: %w: credential id, public key and device type are required", op, ErrInvalid)
	}
	now := tx.store.Now()
	p.ID, p.CreatedAt, p.UpdatedAt = NewID("pk"), now, now
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO passkeys (`+passkeyColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), p.ID, p.UserID, p.Name, p.CredentialID,
		p.PublicKey, int64(p.Counter), p.DeviceType, p.BackupEligible, p.BackedUp, p.Transports,
		p.AAGUID, sqlTime(now), sqlTime(now))
	if isMissingReference(err) {
		return Passkey{}, fmt.Errorf("store: %s: user %s: %w", op, p.UserID, ErrNotFound)
	}
	if err != nil {
		return Passkey{}, wrapError(op, err)
	}
	return p, nil
}

// RecordPasskeyUse stores the counter and backup state of a verified assertion of the passkey
// id. The update only happens while the stored counter is below counter (or both are 0, an
// authenticator without a counter): a concurrent assertion with the same or a lower counter
// gets ErrConflict, as does one for a passkey gone meanwhile (ErrNotFound).
func (tx *Tx) RecordPasskeyUse(ctx context.Context, id string, counter uint32, backedUp bool) error {
	const op = "record passkey use"
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE passkeys SET counter = ?, backed_up = ?,
		updated_at = ? WHERE id = ? AND (counter < ? OR (counter = 0 AND ?))`),
		int64(counter), backedUp, sqlTime(tx.store.Now()), id, int64(counter), counter == 0)
	if err := oneRowAffected(op, res, err); err != nil {
		if _, gone := tx.passkeyExists(ctx, id); gone == nil {
			return fmt.Errorf("store: %s: counter did not advance: %w", op, ErrConflict)
		}
		return err
	}
	return nil
}

func (tx *Tx) passkeyExists(ctx context.Context, id string) (bool, error) {
	var n int
	err := tx.tx.GetContext(ctx, &n, tx.tx.Rebind(`SELECT COUNT(*) FROM passkeys WHERE id = ?`), id)
	if err != nil {
		return false, wrapError("passkey exists", err)
	}
	if n == 0 {
		return false, fmt.Errorf("store: passkey %s: %w", id, ErrNotFound)
	}
	return true, nil
}

// RenamePasskey names userID's passkey id and returns it; ErrNotFound when userID has no
// passkey id (another user's passkey included).
func (tx *Tx) RenamePasskey(ctx context.Context, userID, id, name string) (Passkey, error) {
	const op = "rename passkey"
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE passkeys SET name = ?, updated_at = ?
		WHERE id = ? AND user_id = ?`), name, sqlTime(tx.store.Now()), id, userID)
	if err := oneRowAffected(op, res, err); err != nil {
		return Passkey{}, err
	}
	var row passkeyRow
	if err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(`SELECT `+passkeyColumns+` FROM passkeys
		WHERE id = ?`), id); err != nil {
		return Passkey{}, wrapError(op, err)
	}
	return row.passkey(), nil
}

// DeletePasskey deletes userID's passkey id; ErrNotFound when userID has no passkey id.
func (tx *Tx) DeletePasskey(ctx context.Context, userID, id string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM passkeys WHERE id = ? AND user_id = ?`), id, userID)
	return oneRowAffected("delete passkey", res, err)
}

// PasskeyChallenge is a WebAuthn ceremony under way: its purpose, the user of a registration
// (empty for a sign-in) and its state (Session, JSON) until ExpiresAt.
type PasskeyChallenge struct {
	Purpose   string
	UserID    string
	Session   string
	ExpiresAt time.Time
}

// CreatePasskeyChallenge stores c under tokenHash (sweeping some expired ceremonies). It returns
// ErrInvalid without a token hash, session or known purpose.
func (tx *Tx) CreatePasskeyChallenge(ctx context.Context, tokenHash string, c PasskeyChallenge) error {
	const op = "create passkey challenge"
	if tokenHash == "" || c.Session == "" || (c.Purpose != PasskeyRegister && c.Purpose != PasskeyAuthenticate) {
		return fmt.Errorf("store: %s: %w: token hash, session and a known purpose are required", op, ErrInvalid)
	}
	now := tx.store.Now()
	if err := tx.sweep(ctx, "passkey_challenges", "token_hash", now); err != nil {
		return wrapError(op, err)
	}
	var userID *string
	if c.UserID != "" {
		userID = &c.UserID
	}
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO passkey_challenges (token_hash, purpose,
		user_id, session, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		tokenHash, c.Purpose, userID, c.Session, sqlTime(c.ExpiresAt), sqlTime(now))
	if isMissingReference(err) {
		return fmt.Errorf("store: %s: user %s: %w", op, c.UserID, ErrNotFound)
	}
	return wrapErrorOrNil(op, err)
}

// TakePasskeyChallenge deletes the ceremony of purpose under tokenHash and returns it: each
// challenge is taken once, so of concurrent verifications exactly one gets it. It returns
// ErrNotFound when there is none of that purpose, it was taken already or it has expired
// (an expired one is deleted all the same).
func (tx *Tx) TakePasskeyChallenge(ctx context.Context, purpose, tokenHash string) (PasskeyChallenge, error) {
	const op = "take passkey challenge"
	var row struct {
		Purpose   string  `db:"purpose"`
		UserID    *string `db:"user_id"`
		Session   string  `db:"session"`
		ExpiresAt sqlTime `db:"expires_at"`
	}
	err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(`DELETE FROM passkey_challenges
		WHERE token_hash = ? AND purpose = ? RETURNING purpose, user_id, session, expires_at`), tokenHash, purpose)
	if err != nil {
		return PasskeyChallenge{}, wrapError(op, err)
	}
	if !time.Time(row.ExpiresAt).After(tx.store.Now()) {
		return PasskeyChallenge{}, fmt.Errorf("store: %s: expired: %w", op, ErrNotFound)
	}
	c := PasskeyChallenge{Purpose: row.Purpose, Session: row.Session, ExpiresAt: time.Time(row.ExpiresAt)}
	if row.UserID != nil {
		c.UserID = *row.UserID
	}
	return c, nil
}
