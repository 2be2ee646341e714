CREATE TABLE email_tokens_old (
    id         TEXT NOT NULL PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('verify-email', 'reset-password')),
    user_id    TEXT REFERENCES users (id) ON DELETE CASCADE,
    email      TEXT NOT NULL,
    credential TEXT NOT NULL DEFAULT '',
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);
INSERT INTO email_tokens_old (id, token_hash, purpose, user_id, email, credential, expires_at, used_at, created_at)
    SELECT id, token_hash, purpose, user_id, email, credential, expires_at, used_at, created_at FROM email_tokens
    WHERE purpose <> 'change-email';
DROP TABLE email_tokens;
ALTER TABLE email_tokens_old RENAME TO email_tokens;
CREATE INDEX email_tokens_user_idx ON email_tokens (user_id, purpose);
CREATE INDEX email_tokens_expires_idx ON email_tokens (expires_at);
