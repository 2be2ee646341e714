-- Social sign-in (GitHub, Google; server/authapi_social.go).
-- accounts already holds one row per (provider_id, account_id): a social
-- account's account_id is the provider's user id (GitHub's numeric id, Google's
-- sub). scope records the scopes the provider granted, comma-separated, as
-- better-auth's list-accounts reports them.
ALTER TABLE accounts ADD COLUMN scope TEXT NOT NULL DEFAULT '';

-- One row per started social sign-in: id is the lower-case hex SHA-256 of the
-- flow's state. The callback deletes the row; only the request whose delete
-- removed it may continue, so a replayed callback is refused even with the
-- flow cookie. Expired rows are swept when new flows start.
CREATE TABLE social_states (
    id         TEXT COLLATE "C" PRIMARY KEY,
    provider   TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX social_states_expires_idx ON social_states (expires_at);
