-- Service accounts and their API keys. A key is "svc_sk_<public_id>_<secret>";
-- only HMAC-SHA256(pepper, secret) is stored (secret_hash, 32 bytes), never
-- the key or the secret. Authentication is one point query on the unique
-- public_id index joined up through primary keys to the organization.

-- scopes: JSON array of control-plane permission strings (or "*"), at least
-- one. environment_id pins the account to one environment of its project.
CREATE TABLE service_accounts (
    id             TEXT NOT NULL PRIMARY KEY,
    project_id     TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    description    TEXT,
    environment_id TEXT REFERENCES environments (id),
    scopes         TEXT NOT NULL CHECK (json_type(scopes) = 'array' AND json_array_length(scopes) >= 1),
    disabled_at    TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);

CREATE INDEX service_accounts_project_idx ON service_accounts (project_id, created_at);

CREATE TABLE api_keys (
    id                 TEXT NOT NULL PRIMARY KEY,
    service_account_id TEXT NOT NULL REFERENCES service_accounts (id) ON DELETE CASCADE,
    public_id          TEXT NOT NULL CHECK (length(public_id) = 12),
    secret_hash        BLOB NOT NULL CHECK (typeof(secret_hash) = 'blob' AND length(secret_hash) = 32),
    expires_at         TEXT,
    revoked_at         TEXT,
    last_used_at       TEXT,
    created_at         TEXT NOT NULL
);

-- The authentication lookup.
CREATE UNIQUE INDEX api_keys_public_id_idx ON api_keys (public_id);
CREATE INDEX api_keys_service_account_idx ON api_keys (service_account_id, created_at);
