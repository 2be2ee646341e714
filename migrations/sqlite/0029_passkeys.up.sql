-- Passkeys (issue 23): WebAuthn credentials on better-auth's passkey wire.
--
-- passkeys: one row per registered credential. credential_id is the credential's id
-- (base64url, no padding), unique across users; public_key the COSE public key (base64,
-- standard); counter the authenticator's last signature counter (a counter that goes
-- backwards is refused); backup_eligible and backed_up the authenticator's BE and BS flags,
-- device_type better-auth's 'singleDevice' or 'multiDevice' (backup eligible); transports
-- comma-separated; aaguid the authenticator model. name is the user's label.
CREATE TABLE passkeys (
    id              TEXT NOT NULL PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name            TEXT,
    credential_id   TEXT NOT NULL UNIQUE,
    public_key      TEXT NOT NULL,
    counter         INTEGER NOT NULL DEFAULT 0,
    device_type     TEXT NOT NULL CHECK (device_type IN ('singleDevice', 'multiDevice')),
    backup_eligible INTEGER NOT NULL DEFAULT 0 CHECK (backup_eligible IN (0, 1)),
    backed_up       INTEGER NOT NULL DEFAULT 0 CHECK (backed_up IN (0, 1)),
    transports      TEXT NOT NULL DEFAULT '',
    aaguid          TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE INDEX passkeys_user_idx ON passkeys (user_id);

-- WebAuthn ceremonies under way: token_hash is the hex SHA-256 of the gatehouse.passkey
-- cookie's token; session is the ceremony's state (challenge, user handle; JSON). A row is
-- taken (deleted) by its first verification, so a challenge is used once; it expires after
-- 5 minutes.
CREATE TABLE passkey_challenges (
    token_hash TEXT NOT NULL PRIMARY KEY,
    purpose    TEXT NOT NULL CHECK (purpose IN ('register', 'authenticate')),
    user_id    TEXT REFERENCES users (id) ON DELETE CASCADE,
    session    TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE INDEX passkey_challenges_expires_idx ON passkey_challenges (expires_at);
