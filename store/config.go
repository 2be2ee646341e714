package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrArchived: the write addresses an archived record, which must be restored first (for
// example a PUT on an archived config entry). Nothing was written.
var ErrArchived = errors.New("archived")

// ConfigEntry is one configuration value of an environment, addressed by Key (unique within
// the environment, archived entries included).
//
// Value is the stored form, never a secret's plaintext: for a plain entry the JSON text of the
// value, for a secret (Secret true) the value's JSON text sealed by the caller (package
// store/seal) with ConfigValueAAD as additional data. Description is nil when there is none.
// Version counts the entry's writes from 1. ArchivedAt is nil unless the entry is archived.
type ConfigEntry struct {
	ID            string
	EnvironmentID string
	Key           string
	Secret        bool
	Value         string
	Description   *string
	Version       int
	CreatedAt     time.Time
	UpdatedAt     time.Time
	ArchivedAt    *time.Time
}

// ConfigWrite is one write of a config entry (PutConfigEntry): the whole new state of the
// entry, in the stored form of ConfigEntry.Value, and who wrote it.
type ConfigWrite struct {
	EnvironmentID string
	Key           string
	Secret        bool
	Value         string
	Description   *string
	// ActorType is ActorUser, ActorServiceAccount or ActorSystem.
	ActorType string
	ActorID   string
}

// ConfigVersion is one write of a config entry, as it was written: Value follows the rule of
// ConfigEntry.Value (sealed for a secret). Versions are never changed, except that a key
// rotation re-seals their sealed values (ResealValues).
type ConfigVersion struct {
	ID          string
	EntryID     string
	Version     int
	Secret      bool
	Value       string
	Description *string
	ActorType   string
	ActorID     string
	CreatedAt   time.Time
}

// ConfigValueAAD is the additional data that binds a sealed config value to its row: the
// entry's environment and key. Every version of an entry shares it.
func ConfigValueAAD(environmentID, key string) []byte {
	return []byte("config:" + environmentID + ":" + key)
}

// PutConfigEntry creates the entry w.Key of environment w.EnvironmentID (version 1) or
// replaces its value, secret flag and description (version + 1), and appends the matching
// ConfigVersion, all in tx. It returns the entry as stored and whether it was created. A
// replace keeps ID and CreatedAt and sets UpdatedAt to Store.Now.
//
// It returns ErrInvalid when EnvironmentID or Key is empty, ActorType is not an Actor
// constant, a plain value is not JSON text, or a secret's value is empty or JSON text (a
// secret must arrive sealed, never as plaintext); ErrArchived when the entry exists but is
// archived; and ErrNotFound when the environment does not exist.
func (tx *Tx) PutConfigEntry(ctx context.Context, w ConfigWrite) (ConfigEntry, bool, error) {
	const op = "put config entry"
	if err := w.check(); err != nil {
		return ConfigEntry{}, false, fmt.Errorf("store: %s: %w", op, err)
	}
	now := sqlTime(tx.store.Now())
	// One statement inserts or replaces, so that concurrent writers of one key serialise on
	// the row instead of racing to insert it. An archived row is left alone (no row returned).
	const upsert = `INSERT INTO config_entries
			(id, environment_id, key, secret, value, description, version, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT (environment_id, key) DO UPDATE SET
			secret = excluded.secret, value = excluded.value, description = excluded.description,
			version = config_entries.version + 1, updated_at = excluded.updated_at
		WHERE config_entries.archived_at IS NULL
		RETURNING ` + configColumns
	var r configRow
	err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(upsert),
		NewID("cfg"), w.EnvironmentID, w.Key, w.Secret, w.Value, w.Description, now, now)
	if errors.Is(err, sql.ErrNoRows) {
		return ConfigEntry{}, false, fmt.Errorf("store: %s: %w", op, ErrArchived)
	}
	if err != nil {
		return ConfigEntry{}, false, wrapWriteError(op, err)
	}
	e := r.entry()

	const insertVersion = `INSERT INTO config_versions
			(id, entry_id, version, secret, value, description, actor_type, actor_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(insertVersion),
		NewID("cfv"), e.ID, e.Version, w.Secret, w.Value, w.Description, w.ActorType, w.ActorID, now)
	if err != nil {
		return ConfigEntry{}, false, wrapError(op, err)
	}
	return e, e.Version == 1, nil
}

// check validates a write before it touches the database.
func (w ConfigWrite) check() error {
	switch {
	case w.EnvironmentID == "" || w.Key == "":
		return fmt.Errorf("%w: environment and key are required", ErrInvalid)
	case w.ActorType != ActorUser && w.ActorType != ActorServiceAccount && w.ActorType != ActorSystem:
		return fmt.Errorf("%w: actor type %q", ErrInvalid, w.ActorType)
	case !w.Secret && !json.Valid([]byte(w.Value)):
		return fmt.Errorf("%w: a plain value must be JSON text", ErrInvalid)
	case w.Secret && (w.Value == "" || json.Valid([]byte(w.Value))):
		// A sealed value is never JSON; JSON here would be a plaintext secret.
		return fmt.Errorf("%w: a secret value must be sealed", ErrInvalid)
	}
	return nil
}

// ConfigEntry returns the active entry key of environment envID. It returns ErrNotFound when
// there is none or it is archived.
func (s *Store) ConfigEntry(ctx context.Context, envID, key string) (ConfigEntry, error) {
	const op = "config entry"
	var r configRow
	query := "SELECT " + configColumns + ` FROM config_entries
		WHERE environment_id = ? AND key = ? AND archived_at IS NULL`
	if err := s.reader.GetContext(ctx, &r, s.reader.Rebind(query), envID, key); err != nil {
		return ConfigEntry{}, wrapError(op, err)
	}
	return r.entry(), nil
}

// ListConfigEntries returns the entries of environment envID selected by state, by key (byte
// order). No match is an empty slice, not ErrNotFound. It returns ErrInvalid for an unknown
// state.
func (s *Store) ListConfigEntries(ctx context.Context, envID string, state State) ([]ConfigEntry, error) {
	const op = "list config entries"
	archived, err := state.condition("archived_at")
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	query := "SELECT " + configColumns + " FROM config_entries WHERE environment_id = ? AND " + archived +
		" ORDER BY key"
	var rows []configRow
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), envID); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]ConfigEntry, len(rows))
	for i, r := range rows {
		out[i] = r.entry()
	}
	return out, nil
}

// SetConfigEntryArchived archives (archived true) or restores the entry key of environment
// envID and returns it. Archiving sets ArchivedAt and UpdatedAt to Store.Now; restoring clears
// ArchivedAt and sets UpdatedAt. Restoring an active entry changes nothing and returns it. The
// version and the history are kept either way.
//
// It returns ErrNotFound when there is no such entry, and, when archiving, when the entry is
// archived already (an archived entry is not found by key).
func (tx *Tx) SetConfigEntryArchived(ctx context.Context, envID, key string, archived bool) (ConfigEntry, error) {
	op, update := "restore config entry", `UPDATE config_entries SET archived_at = NULL, updated_at = ?
		WHERE environment_id = ? AND key = ? AND archived_at IS NOT NULL`
	now := sqlTime(tx.store.Now())
	args := []any{now, envID, key}
	if archived {
		op, update = "archive config entry", `UPDATE config_entries SET archived_at = ?, updated_at = ?
			WHERE environment_id = ? AND key = ? AND archived_at IS NULL`
		args = []any{now, now, envID, key}
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(update), args...)
	if err := oneRowAffected(op, res, err); err != nil && (archived || !errors.Is(err, ErrNotFound)) {
		return ConfigEntry{}, err
	}
	var r configRow
	query := "SELECT " + configColumns + " FROM config_entries WHERE environment_id = ? AND key = ?"
	if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(query), envID, key); err != nil {
		return ConfigEntry{}, wrapError(op, err)
	}
	return r.entry(), nil
}

// ListConfigVersions returns every version of the active entry key of environment envID,
// newest first. It returns ErrNotFound when there is no such entry or it is archived, like
// ConfigEntry.
func (s *Store) ListConfigVersions(ctx context.Context, envID, key string) ([]ConfigVersion, error) {
	const op = "list config versions"
	// Every entry has at least one version (PutConfigEntry writes both), so no row means no
	// visible entry.
	const query = `SELECT v.id, v.entry_id, v.version, v.secret, v.value, v.description,
			v.actor_type, v.actor_id, v.created_at
		FROM config_versions v JOIN config_entries e ON e.id = v.entry_id
		WHERE e.environment_id = ? AND e.key = ? AND e.archived_at IS NULL
		ORDER BY v.version DESC`
	var rows []struct {
		ID          string         `db:"id"`
		EntryID     string         `db:"entry_id"`
		Version     int            `db:"version"`
		Secret      bool           `db:"secret"`
		Value       string         `db:"value"`
		Description sql.NullString `db:"description"`
		ActorType   string         `db:"actor_type"`
		ActorID     string         `db:"actor_id"`
		CreatedAt   sqlTime        `db:"created_at"`
	}
	if err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(query), envID, key); err != nil {
		return nil, wrapError(op, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	out := make([]ConfigVersion, len(rows))
	for i, r := range rows {
		out[i] = ConfigVersion{
			ID: r.ID, EntryID: r.EntryID, Version: r.Version, Secret: r.Secret, Value: r.Value,
			Description: nullStringPtr(r.Description), ActorType: r.ActorType, ActorID: r.ActorID,
			CreatedAt: time.Time(r.CreatedAt),
		}
	}
	return out, nil
}

// SealedValue is one sealed value at rest, as ResealValues hands it out: the row (table and
// id), the additional data its seal is bound to, and the sealed string.
type SealedValue struct {
	Table  string
	ID     string
	AAD    []byte
	Sealed string
}

// ResealValues calls fn for every sealed value in the database — the secret values of
// config_entries and config_versions, the private keys of signing_keys, the secret keys
// and webhook secrets of processor_connections, the TOTP secrets of two_factors, then the
// payloads of pending outbox rows, in that order,
// each by id — and stores the new sealed string for each call that reports changed, in tx. It
// returns how many values it replaced. Re-sealing changes neither UpdatedAt nor Version: the
// plaintext is the same.
//
// The first error of fn stops the walk and is returned as is; the caller's transaction then
// rolls back every replacement. fn must not use tx.
func (tx *Tx) ResealValues(ctx context.Context, fn func(v SealedValue) (newSealed string, changed bool, err error)) (int, error) {
	const op = "reseal values"
	sources := []struct {
		table, query, column string
		args                 []any
		aad                  func(environmentID, key, id string) []byte
	}{
		{"config_entries", `SELECT id, environment_id, key, value FROM config_entries
			WHERE secret = ? ORDER BY id`, "value", []any{true},
			func(env, key, _ string) []byte { return ConfigValueAAD(env, key) }},
		{"config_versions", `SELECT v.id, e.environment_id, e.key, v.value
			FROM config_versions v JOIN config_entries e ON e.id = v.entry_id
			WHERE v.secret = ? ORDER BY v.id`, "value", []any{true},
			func(env, key, _ string) []byte { return ConfigValueAAD(env, key) }},
		{"signing_keys", `SELECT id, '' AS environment_id, '' AS key, private_key AS value
			FROM signing_keys ORDER BY id`, "private_key", nil,
			func(_, _, id string) []byte { return SigningKeyAAD(id) }},
		{"processor_connections", `SELECT id, environment_id, '' AS key, secret_key AS value
			FROM processor_connections ORDER BY id`, "secret_key", nil,
			func(env, _, _ string) []byte { return ProcessorSecretKeyAAD(env) }},
		{"processor_connections", `SELECT id, environment_id, '' AS key, webhook_secret AS value
			FROM processor_connections ORDER BY id`, "webhook_secret", nil,
			func(env, _, _ string) []byte { return ProcessorWebhookSecretAAD(env) }},
		{"webhook_endpoints", `SELECT id, '' AS environment_id, '' AS key, secret AS value
			FROM webhook_endpoints ORDER BY id`, "secret", nil,
			func(_, _, id string) []byte { return WebhookSecretAAD(id) }},
		{"webhook_endpoints", `SELECT id, '' AS environment_id, '' AS key, previous_secret AS value
			FROM webhook_endpoints WHERE previous_secret IS NOT NULL ORDER BY id`, "previous_secret", nil,
			func(_, _, id string) []byte { return WebhookPreviousSecretAAD(id) }},
		{"two_factors", `SELECT id, user_id AS environment_id, '' AS key, secret AS value
			FROM two_factors ORDER BY id`, "secret", nil,
			func(user, _, _ string) []byte { return TwoFactorSecretAAD(user) }},
		{"outbox", `SELECT id, kind AS environment_id, '' AS key, payload AS value FROM outbox
			WHERE sent_at IS NULL AND failed_at IS NULL ORDER BY id`, "payload", nil,
			func(kind, _, id string) []byte { return OutboxPayloadAAD(id, kind) }},
	}
	n := 0
	for _, src := range sources {
		// Read the whole table first: SQLite's one writer connection cannot update while a
		// result set is open on it.
		var rows []struct {
			ID            string `db:"id"`
			EnvironmentID string `db:"environment_id"`
			Key           string `db:"key"`
			Value         string `db:"value"`
		}
		if err := tx.tx.SelectContext(ctx, &rows, tx.tx.Rebind(src.query), src.args...); err != nil {
			return n, wrapError(op, err)
		}
		update := tx.tx.Rebind("UPDATE " + src.table + " SET " + src.column + " = ? WHERE id = ? AND " + src.column + " = ?")
		for _, r := range rows {
			sealed, changed, err := fn(SealedValue{
				Table: src.table, ID: r.ID, AAD: src.aad(r.EnvironmentID, r.Key, r.ID), Sealed: r.Value,
			})
			if err != nil {
				return n, err
			}
			if !changed {
				continue
			}
			if sealed == "" || json.Valid([]byte(sealed)) || (src.table == "signing_keys" && !strings.HasPrefix(sealed, "v1.")) {
				return n, fmt.Errorf("store: %s: %s %s: %w: the new value is not sealed", op, src.table, r.ID, ErrInvalid)
			}
			res, err := tx.tx.ExecContext(ctx, update, sealed, r.ID, r.Value)
			err = oneRowAffected(op, res, err)
			if src.table == "outbox" && errors.Is(err, ErrNotFound) {
				continue // sent meanwhile by a worker (its payload emptied): nothing left to re-seal
			}
			if err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// configColumns are the columns configRow scans.
const configColumns = "id, environment_id, key, secret, value, description, version, created_at, updated_at, archived_at"

// configRow is a config_entries row as scanned.
type configRow struct {
	ID            string         `db:"id"`
	EnvironmentID string         `db:"environment_id"`
	Key           string         `db:"key"`
	Secret        bool           `db:"secret"`
	Value         string         `db:"value"`
	Description   sql.NullString `db:"description"`
	Version       int            `db:"version"`
	CreatedAt     sqlTime        `db:"created_at"`
	UpdatedAt     sqlTime        `db:"updated_at"`
	ArchivedAt    *sqlTime       `db:"archived_at"`
}

func (r configRow) entry() ConfigEntry {
	return ConfigEntry{
		ID:            r.ID,
		EnvironmentID: r.EnvironmentID,
		Key:           r.Key,
		Secret:        r.Secret,
		Value:         r.Value,
		Description:   nullStringPtr(r.Description),
		Version:       r.Version,
		CreatedAt:     time.Time(r.CreatedAt),
		UpdatedAt:     time.Time(r.UpdatedAt),
		ArchivedAt:    timePtr(r.ArchivedAt),
	}
}
