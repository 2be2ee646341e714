-- Configuration entries per environment, with their history. value holds the JSON text of a
-- plain value, or for a secret (secret = 1) the sealed blob of store/seal
-- ("v1.<keyID>.<base64url>", AES-256-GCM bound to the environment and key): a secret's
-- plaintext never reaches the database. Timestamps are fixed-width RFC 3339 UTC text.

CREATE TABLE config_entries (
    id             TEXT NOT NULL PRIMARY KEY,
    environment_id TEXT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    key            TEXT NOT NULL,
    secret         INTEGER NOT NULL CHECK (secret IN (0, 1)),
    value          TEXT NOT NULL,
    description    TEXT,
    version        INTEGER NOT NULL CHECK (version >= 1),
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    archived_at    TEXT,
    UNIQUE (environment_id, key)
);

-- One row per write (PUT); version numbers an entry's writes from 1. The actor is who wrote it.
CREATE TABLE config_versions (
    id          TEXT NOT NULL PRIMARY KEY,
    entry_id    TEXT NOT NULL REFERENCES config_entries (id) ON DELETE CASCADE,
    version     INTEGER NOT NULL CHECK (version >= 1),
    secret      INTEGER NOT NULL CHECK (secret IN (0, 1)),
    value       TEXT NOT NULL,
    description TEXT,
    actor_type  TEXT NOT NULL CHECK (actor_type IN ('user', 'service_account', 'system')),
    actor_id    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    UNIQUE (entry_id, version)
);
