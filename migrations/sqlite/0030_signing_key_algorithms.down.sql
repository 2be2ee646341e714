-- Fails while an ES256 or EdDSA key is stored: retire and delete them first.
CREATE TABLE signing_keys_old (
    id           TEXT NOT NULL PRIMARY KEY,
    algorithm    TEXT NOT NULL CHECK (algorithm = 'RS256'),
    private_key  TEXT NOT NULL CHECK (private_key LIKE 'v1.%'),
    public_key   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    activates_at TEXT NOT NULL,
    retires_at   TEXT,
    CHECK (retires_at IS NULL OR retires_at > activates_at)
);
INSERT INTO signing_keys_old SELECT id, algorithm, private_key, public_key, created_at, activates_at, retires_at FROM signing_keys;
DROP TABLE signing_keys;
ALTER TABLE signing_keys_old RENAME TO signing_keys;
CREATE UNIQUE INDEX signing_keys_one_unretired_idx ON signing_keys ((retires_at IS NULL)) WHERE retires_at IS NULL;
CREATE INDEX signing_keys_retires_idx ON signing_keys (retires_at);
