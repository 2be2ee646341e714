-- Identity: users, how they sign in (accounts), and their browser sessions.
-- Timestamps: fixed-width RFC 3339 UTC text. Booleans: INTEGER 0 or 1.
-- Emails are stored normalised (trimmed, lower case) by the store, so the
-- plain UNIQUE constraint is case-insensitive in effect.
CREATE TABLE users (
    id             TEXT NOT NULL PRIMARY KEY,
    name           TEXT NOT NULL,
    email          TEXT NOT NULL UNIQUE,
    email_verified INTEGER NOT NULL DEFAULT 0 CHECK (email_verified IN (0, 1)),
    image          TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);

-- provider_id 'credential' (email + password: account_id is the user id,
-- password_hash an argon2id PHC string) or a social provider ('google',
-- 'github': account_id is the provider's subject, password_hash NULL).
CREATE TABLE accounts (
    id            TEXT NOT NULL PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_id   TEXT NOT NULL,
    account_id    TEXT NOT NULL,
    password_hash TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (provider_id, account_id)
);

CREATE INDEX accounts_user_idx ON accounts (user_id);

-- token_hash: lower-case hex SHA-256 of the session token; the token itself
-- is never stored. active_organization_id has no foreign key: organizations
-- arrive in a later migration, and archiving one clears it explicitly.
CREATE TABLE sessions (
    id                     TEXT NOT NULL PRIMARY KEY,
    token_hash             TEXT NOT NULL UNIQUE,
    user_id                TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at             TEXT NOT NULL,
    remember_me            INTEGER NOT NULL CHECK (remember_me IN (0, 1)),
    ip_address             TEXT NOT NULL DEFAULT '',
    user_agent             TEXT NOT NULL DEFAULT '',
    active_organization_id TEXT,
    created_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL
);

CREATE INDEX sessions_user_idx ON sessions (user_id, created_at DESC);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);
CREATE INDEX sessions_active_organization_idx ON sessions (active_organization_id)
    WHERE active_organization_id IS NOT NULL;
