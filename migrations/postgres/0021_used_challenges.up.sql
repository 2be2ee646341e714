-- Single-use browser challenges of the OAuth provider (oauth/browser_consent.go,
-- oauth/browser_authorize.go): a consent challenge, or the sign-in continuation of a
-- pushed authorization request, is recorded here when it is used, so that it is
-- refused the second time on any replica. id is the lower-case hex SHA-256 of the
-- challenge's kind and signature; a row is kept until the challenge expires and
-- swept after that by later inserts.
CREATE TABLE oauth_used_challenges (
    id         TEXT COLLATE "C" PRIMARY KEY,
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX oauth_used_challenges_expires_idx ON oauth_used_challenges (expires_at);
