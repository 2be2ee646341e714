-- Configuration entries per environment, with their history. value holds the JSON text of a
-- plain value, or for a secret (secret = true) the sealed blob of store/seal
-- ("v1.<keyID>.<base64url>", AES-256-GCM bound to the environment and key): a secret's
-- plaintext never reaches the database. JSON is kept as TEXT so that a value reads back
-- byte-for-byte as it was written.

CREATE TABLE config_entries (
    id             TEXT COLLATE "C" PRIMARY KEY,
    environment_id TEXT COLLATE "C" NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    key            TEXT COLLATE "C" NOT NULL,
    secret         BOOLEAN NOT NULL,
    value          TEXT NOT NULL,
    description    TEXT,
    version        INTEGER NOT NULL CHECK (version >= 1),
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    archived_at    TIMESTAMPTZ,
    UNIQUE (environment_id, key)
);

-- One row per write (PUT); version numbers an entry's writes from 1. The actor is who wrote it.
CREATE TABLE config_versions (
    id          TEXT COLLATE "C" PRIMARY KEY,
    entry_id    TEXT COLLATE "C" NOT NULL REFERENCES config_entries (id) ON DELETE CASCADE,
    version     INTEGER NOT NULL CHECK (version >= 1),
    secret      BOOLEAN NOT NULL,
    value       TEXT NOT NULL,
    description TEXT,
    actor_type  TEXT NOT NULL CHECK (actor_type IN ('user', 'service_account', 'system')),
    actor_id    TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (entry_id, version)
);
