package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Throttle counters: the shared, per-key hit counts behind identity.Throttle. They live in the
// database so that every replica sees the same counts, and each hit is one atomic
// insert-or-increment statement, so that concurrent hits on one key each get a different
// count. Keys are stored as the hex SHA-256 of the caller's key: a row has a fixed size however
// long the key (an email, an address) is.

// ThrottleCount is a key's count after a hit: Hits hits in the window that ends at ExpiresAt.
type ThrottleCount struct {
	Hits      int
	ExpiresAt time.Time
}

// throttleKeyHash is the stored form of a throttle key.
func throttleKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// HitThrottle counts one hit of key at now and returns the key's count. When the key has no
// unexpired window (none at all, or one whose ExpiresAt is not after now) the hit opens a new
// one ending at now+window with Hits 1; otherwise it adds one to the window's count without
// moving its end. The check and the increment are one statement: concurrent hits of a key,
// from any number of processes, each see a distinct count. now is truncated to the
// microsecond, as the store keeps times.
//
// It returns ErrInvalid when key is empty or window is not positive.
func (s *Store) HitThrottle(ctx context.Context, key string, window time.Duration, now time.Time) (ThrottleCount, error) {
	const op = "hit throttle"
	if key == "" || window <= 0 {
		return ThrottleCount{}, fmt.Errorf("store: %s: %w: empty key or non-positive window", op, ErrInvalid)
	}
	now = now.UTC().Truncate(time.Microsecond)
	const query = `INSERT INTO throttle_counters (key_hash, hits, expires_at) VALUES (?, 1, ?)
		ON CONFLICT (key_hash) DO UPDATE SET
			hits = CASE WHEN throttle_counters.expires_at <= ? THEN 1 ELSE throttle_counters.hits + 1 END,
			expires_at = CASE WHEN throttle_counters.expires_at <= ? THEN excluded.expires_at
				ELSE throttle_counters.expires_at END
		RETURNING hits, expires_at`
	var count ThrottleCount
	err := s.InTx(ctx, func(tx *Tx) error {
		var expires sqlTime
		err := tx.tx.QueryRowxContext(ctx, tx.tx.Rebind(query),
			throttleKeyHash(key), sqlTime(now.Add(window)), sqlTime(now), sqlTime(now)).Scan(&count.Hits, &expires)
		if err != nil {
			return wrapError(op, err)
		}
		count.ExpiresAt = time.Time(expires)
		return nil
	})
	if err != nil {
		return ThrottleCount{}, err
	}
	return count, nil
}

// UndoThrottleHit takes back one hit of key, counted by a HitThrottle that returned expiresAt:
// it subtracts one from the key's count if the key is still in that window (a window that has
// since ended and restarted is left alone) and the count is positive. A key without such a
// window is not an error.
func (s *Store) UndoThrottleHit(ctx context.Context, key string, expiresAt time.Time) error {
	const query = `UPDATE throttle_counters SET hits = hits - 1
		WHERE key_hash = ? AND expires_at = ? AND hits > 0`
	return s.InTx(ctx, func(tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query), throttleKeyHash(key), sqlTime(expiresAt.UTC().Truncate(time.Microsecond)))
		if err != nil {
			return wrapError("undo throttle hit", err)
		}
		return nil
	})
}

// DeleteThrottle forgets key's count. A key without a count is not an error.
func (s *Store) DeleteThrottle(ctx context.Context, key string) error {
	return s.InTx(ctx, func(tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM throttle_counters WHERE key_hash = ?`), throttleKeyHash(key))
		if err != nil {
			return wrapError("delete throttle", err)
		}
		return nil
	})
}

// DeleteExpiredThrottles deletes the count of every key whose window ended at or before now,
// and returns how many it deleted. Throttles call it from time to time so that the table holds
// only keys hit within the last window.
func (s *Store) DeleteExpiredThrottles(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.InTx(ctx, func(tx *Tx) error {
		res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM throttle_counters WHERE expires_at <= ?`),
			sqlTime(now.UTC().Truncate(time.Microsecond)))
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return wrapError("delete expired throttles", err)
		}
		return nil
	})
	return n, err
}

// ThrottleCountOf returns key's stored count as it is, expired or not, and ErrNotFound when the
// key has none. It is for tests and diagnostics; throttles only ever hit.
func (s *Store) ThrottleCountOf(ctx context.Context, key string) (ThrottleCount, error) {
	var count ThrottleCount
	var expires sqlTime
	err := s.reader.QueryRowxContext(ctx, s.reader.Rebind(`SELECT hits, expires_at FROM throttle_counters WHERE key_hash = ?`),
		throttleKeyHash(key)).Scan(&count.Hits, &expires)
	if err != nil {
		return ThrottleCount{}, wrapError("throttle count", err)
	}
	count.ExpiresAt = time.Time(expires)
	return count, nil
}
