-- Single-use tokens of the links Gatehouse mails: email verification (24 hours) and password
-- reset (1 hour). token_hash is the lower-case hex SHA-256 of the token; the token itself is
-- only ever in the mail. email is the address the link was sent to (a link for an address the
-- user no longer has does not work). credential, on a verification token, is the SHA-256 of
-- the password hash the account had when the link was issued: the password the mailbox's
-- owner confirms by opening it (identity.VerifyEmail). used_at is set by the one use. A NULL
-- user_id is a decoy that never works: a reset request for an address without an account
-- stores one, so that it does the same work as a request for an address with one.
CREATE TABLE email_tokens (
    id         TEXT COLLATE "C" PRIMARY KEY,
    token_hash TEXT COLLATE "C" NOT NULL UNIQUE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('verify-email', 'reset-password')),
    user_id    TEXT COLLATE "C" REFERENCES users (id) ON DELETE CASCADE,
    email      TEXT NOT NULL,
    credential TEXT NOT NULL DEFAULT '',
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX email_tokens_user_idx ON email_tokens (user_id, purpose);
CREATE INDEX email_tokens_expires_idx ON email_tokens (expires_at);
