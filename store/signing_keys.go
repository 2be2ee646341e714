package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The algorithms of a SigningKey (JWS "alg"): RSA PKCS #1 v1.5 with SHA-256, ECDSA P-256
// with SHA-256, and Ed25519.
const (
	SigningAlgorithmRS256 = "RS256"
	SigningAlgorithmES256 = "ES256"
	SigningAlgorithmEdDSA = "EdDSA"
)

// SigningAlgorithms are the algorithms a SigningKey may have, RS256 (the default) first.
var SigningAlgorithms = []string{SigningAlgorithmRS256, SigningAlgorithmES256, SigningAlgorithmEdDSA}

// SigningKey is a key the OAuth provider signs tokens with; ID is its JWK "kid".
//
// PrivateKey is the stored form, never plaintext: the private key sealed by the caller
// (package store/seal) with SigningKeyAAD(ID) as additional data. PublicKey is the public key
// as the caller encoded it (PEM), published in the JWKS. The key is published until RetiresAt;
// RetiresAt is nil for the newest key of each algorithm (its head), the only key of that
// algorithm not scheduled for retirement. When it signs is package oauth's rule.
type SigningKey struct {
	ID          string
	Algorithm   string
	PrivateKey  string
	PublicKey   string
	CreatedAt   time.Time
	ActivatesAt time.Time
	RetiresAt   *time.Time
}

// SigningKeyAAD is the additional data that binds a sealed signing key to its row.
func SigningKeyAAD(id string) []byte { return []byte("signing-key:" + id) }

// CreateSigningKey inserts k with CreatedAt set to Store.Now. k.ID, k.PrivateKey and
// k.PublicKey are required and k.Algorithm must be one of SigningAlgorithms. A zero ActivatesAt
// means Store.Now.
//
// It returns ErrInvalid for a missing field, another algorithm, a private key that is not a
// sealed value ("v1." prefix) or a RetiresAt not after ActivatesAt; ErrConflict when the id is
// taken or when k.RetiresAt is nil while another key of its algorithm is not scheduled for
// retirement either (at most one per algorithm is: see RetireSigningKeys).
func (tx *Tx) CreateSigningKey(ctx context.Context, k *SigningKey) error {
	const op = "create signing key"
	if k.ID == "" || k.PrivateKey == "" || k.PublicKey == "" {
		return fmt.Errorf("store: %s: %w: id, private key and public key are required", op, ErrInvalid)
	}
	if !slices.Contains(SigningAlgorithms, k.Algorithm) {
		return fmt.Errorf("store: %s: %w: algorithm %q (want one of %v)", op, ErrInvalid, k.Algorithm, SigningAlgorithms)
	}
	if !strings.HasPrefix(k.PrivateKey, "v1.") {
		return fmt.Errorf("store: %s: %w: the private key is not sealed", op, ErrInvalid)
	}
	now := tx.store.Now()
	k.CreatedAt = now
	if k.ActivatesAt.IsZero() {
		k.ActivatesAt = now
	}
	k.ActivatesAt = k.ActivatesAt.UTC().Truncate(time.Microsecond)
	if k.RetiresAt != nil {
		r := k.RetiresAt.UTC().Truncate(time.Microsecond)
		if !r.After(k.ActivatesAt) {
			return fmt.Errorf("store: %s: %w: retirement not after activation", op, ErrInvalid)
		}
		k.RetiresAt = &r
	}
	const insert = `INSERT INTO signing_keys (id, algorithm, private_key, public_key, created_at,
		activates_at, retires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(insert), k.ID, k.Algorithm, k.PrivateKey, k.PublicKey,
		sqlTime(now), sqlTime(k.ActivatesAt), nullTime(k.RetiresAt))
	if err != nil {
		return wrapError(op, err)
	}
	return nil
}

// RetireSigningKeys schedules the retirement at `at` of every key of the given algorithms (of
// every algorithm when none is given) that has none scheduled (at most one key per algorithm,
// its newest) and returns how many it scheduled. Keys that already have a retirement time keep
// it. It returns ErrInvalid when `at` is not after such a key's ActivatesAt.
func (tx *Tx) RetireSigningKeys(ctx context.Context, at time.Time, algorithms ...string) (int, error) {
	const op = "retire signing keys"
	at = at.UTC().Truncate(time.Microsecond)
	where, args := `retires_at IS NULL`, []any{}
	if len(algorithms) > 0 {
		where += ` AND algorithm IN (?` + strings.Repeat(`, ?`, len(algorithms)-1) + `)`
		for _, a := range algorithms {
			args = append(args, a)
		}
	}
	var invalid int
	check := `SELECT COUNT(*) FROM signing_keys WHERE ` + where + ` AND activates_at >= ?`
	if err := tx.tx.GetContext(ctx, &invalid, tx.tx.Rebind(check), append(slices.Clone(args), sqlTime(at))...); err != nil {
		return 0, wrapError(op, err)
	}
	if invalid > 0 {
		return 0, fmt.Errorf("store: %s: %w: retirement not after activation", op, ErrInvalid)
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE signing_keys SET retires_at = ? WHERE `+where), append([]any{sqlTime(at)}, args...)...)
	if err != nil {
		return 0, wrapError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrapError(op, err)
	}
	return int(n), nil
}

// ListSigningKeys returns the keys not retired at `at` (RetiresAt nil or after at), or every
// key when at is zero, newest activation first (ties by id, descending). It never returns nil.
func (r reads) ListSigningKeys(ctx context.Context, at time.Time) ([]SigningKey, error) {
	const op = "list signing keys"
	query := `SELECT ` + signingKeyColumns + ` FROM signing_keys`
	var args []any
	if !at.IsZero() {
		query += ` WHERE retires_at IS NULL OR retires_at > ?`
		args = append(args, sqlTime(at))
	}
	query += ` ORDER BY activates_at DESC, id DESC`
	var rows []signingKeyRow
	if err := r.q.SelectContext(ctx, &rows, r.q.Rebind(query), args...); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]SigningKey, len(rows))
	for i, row := range rows {
		out[i] = row.key()
	}
	return out, nil
}

// signingKeyColumns are the columns signingKeyRow scans.
const signingKeyColumns = "id, algorithm, private_key, public_key, created_at, activates_at, retires_at"

// signingKeyRow is a signing_keys row as scanned.
type signingKeyRow struct {
	ID          string   `db:"id"`
	Algorithm   string   `db:"algorithm"`
	PrivateKey  string   `db:"private_key"`
	PublicKey   string   `db:"public_key"`
	CreatedAt   sqlTime  `db:"created_at"`
	ActivatesAt sqlTime  `db:"activates_at"`
	RetiresAt   *sqlTime `db:"retires_at"`
}

func (r signingKeyRow) key() SigningKey {
	return SigningKey{
		ID: r.ID, Algorithm: r.Algorithm, PrivateKey: r.PrivateKey, PublicKey: r.PublicKey,
		CreatedAt: time.Time(r.CreatedAt), ActivatesAt: time.Time(r.ActivatesAt), RetiresAt: timePtr(r.RetiresAt),
	}
}
