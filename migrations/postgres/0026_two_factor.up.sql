-- Second factors (issue 23): TOTP with backup codes, on better-auth's twoFactor wire.
--
-- two_factors: one row per user who started enrolling. secret is the TOTP secret (base32),
-- sealed (store/seal) with additional data "two-factor-secret:<user_id>"; verified turns true at
-- the first accepted code, and only then does sign-in ask for the factor. last_step is the
-- highest RFC 6238 time step accepted so far: a code is accepted only for a later step, so an
-- accepted code cannot be used again within its window.
CREATE TABLE two_factors (
    id         TEXT COLLATE "C" PRIMARY KEY,
    user_id    TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    secret     TEXT NOT NULL,
    verified   BOOLEAN NOT NULL DEFAULT false,
    last_step  BIGINT NOT NULL DEFAULT 0,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- Backup codes: code_hash is the hex SHA-256 of the user id and the code
-- (identity.HashBackupCode); the code itself is shown once. used_at is set by the one use.
CREATE TABLE two_factor_backup_codes (
    id         TEXT COLLATE "C" PRIMARY KEY,
    user_id    TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash  TEXT COLLATE "C" NOT NULL,
    used_at    TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (user_id, code_hash)
);

-- Tokens of the second step: purpose 'sign-in' is the pending sign-in that a password opened
-- (the two_factor cookie; attempts counts wrong codes against it), 'trust-device' a device
-- that may skip the second step (the trust_device cookie). token_hash is the hex SHA-256 of
-- the cookie's token.
CREATE TABLE two_factor_tokens (
    token_hash  TEXT COLLATE "C" PRIMARY KEY,
    purpose     TEXT NOT NULL CHECK (purpose IN ('sign-in', 'trust-device')),
    user_id     TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    remember_me BOOLEAN NOT NULL DEFAULT true,
    attempts    INTEGER NOT NULL DEFAULT 0,
    expires_at  TIMESTAMPTZ NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX two_factor_tokens_user_idx ON two_factor_tokens (user_id, purpose);
CREATE INDEX two_factor_tokens_expires_idx ON two_factor_tokens (expires_at);
