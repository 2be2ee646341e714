-- Token signing keys may be ES256 (ECDSA P-256) or EdDSA (Ed25519) beside RS256
-- (GATEHOUSE_SIGNING_ALG picks the algorithm of new keys). public_key stays the
-- SubjectPublicKeyInfo in PEM and private_key the sealed PKCS #8 DER key, whatever
-- the algorithm. SQLite cannot alter a CHECK constraint: the table is rebuilt.
CREATE TABLE signing_keys_new (
    id           TEXT NOT NULL PRIMARY KEY,
    algorithm    TEXT NOT NULL CHECK (algorithm IN ('RS256', 'ES256', 'EdDSA')),
    private_key  TEXT NOT NULL CHECK (private_key LIKE 'v1.%'),
    public_key   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    activates_at TEXT NOT NULL,
    retires_at   TEXT,
    CHECK (retires_at IS NULL OR retires_at > activates_at)
);
INSERT INTO signing_keys_new SELECT id, algorithm, private_key, public_key, created_at, activates_at, retires_at FROM signing_keys;
DROP TABLE signing_keys;
ALTER TABLE signing_keys_new RENAME TO signing_keys;
CREATE UNIQUE INDEX signing_keys_one_unretired_idx ON signing_keys ((retires_at IS NULL)) WHERE retires_at IS NULL;
CREATE INDEX signing_keys_retires_idx ON signing_keys (retires_at);
