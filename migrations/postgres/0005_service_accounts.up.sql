-- Service accounts and their API keys. A key is "svc_sk_<public_id>_<secret>";
-- only HMAC-SHA256(pepper, secret) is stored (secret_hash, 32 bytes), never
-- the key or the secret. Authentication is one point query on the unique
-- public_id index joined up through primary keys to the organization.

-- scopes: JSON array of control-plane permission strings (or "*"), at least
-- one. environment_id pins the account to one environment of its project.
CREATE TABLE service_accounts (
    id             TEXT COLLATE "C" PRIMARY KEY,
    project_id     TEXT COLLATE "C" NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    description    TEXT,
    environment_id TEXT COLLATE "C" REFERENCES environments (id),
    scopes         JSONB NOT NULL CHECK (jsonb_typeof(scopes) = 'array' AND jsonb_array_length(scopes) >= 1),
    disabled_at    TIMESTAMPTZ,
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL
);

CREATE INDEX service_accounts_project_idx ON service_accounts (project_id, created_at);

CREATE TABLE api_keys (
    id                 TEXT COLLATE "C" PRIMARY KEY,
    service_account_id TEXT COLLATE "C" NOT NULL REFERENCES service_accounts (id) ON DELETE CASCADE,
    public_id          TEXT COLLATE "C" NOT NULL CHECK (length(public_id) = 12),
    secret_hash        BYTEA NOT NULL CHECK (octet_length(secret_hash) = 32),
    expires_at         TIMESTAMPTZ,
    revoked_at         TIMESTAMPTZ,
    last_used_at       TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL
);

-- The authentication lookup.
CREATE UNIQUE INDEX api_keys_public_id_idx ON api_keys (public_id);
CREATE INDEX api_keys_service_account_idx ON api_keys (service_account_id, created_at);
