-- Token signing keys of the OAuth 2.1 / OpenID Connect provider. id is the JWK "kid".
-- private_key is the PKCS #8 DER key sealed by package store/seal with the additional data
-- "signing-key:<id>" (never plaintext); public_key is the SubjectPublicKeyInfo in PEM, which
-- the JWKS publishes. A key signs from activates_at on (the newest activated key signs) and is
-- published from its creation until retires_at; retires_at is NULL for the newest key only.
CREATE TABLE signing_keys (
    id           TEXT NOT NULL PRIMARY KEY,
    algorithm    TEXT NOT NULL CHECK (algorithm = 'RS256'),
    private_key  TEXT NOT NULL CHECK (private_key LIKE 'v1.%'),
    public_key   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    activates_at TEXT NOT NULL,
    retires_at   TEXT,
    CHECK (retires_at IS NULL OR retires_at > activates_at)
);

-- At most one key is not scheduled for retirement: the newest. Two replicas that both find no
-- key and insert one, or two concurrent rotations, collide here and one of them rolls back.
CREATE UNIQUE INDEX signing_keys_one_unretired_idx ON signing_keys ((retires_at IS NULL)) WHERE retires_at IS NULL;
CREATE INDEX signing_keys_retires_idx ON signing_keys (retires_at);
