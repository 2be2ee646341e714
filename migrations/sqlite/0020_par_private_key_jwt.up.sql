-- Pushed authorization requests (RFC 9126) and private_key_jwt client
-- authentication (RFC 7523 section 2.2) for OIDC clients (oauth/fositestore_par.go).
--
-- token_endpoint_auth_method: '' for the methods the client type implies
-- (client_secret_basic or client_secret_post for web, none for native and spa)
-- or 'private_key_jwt' for a web client that authenticates with a JWT signed by
-- one of its jwks (a JSON Web Key Set of public keys, NULL otherwise). Such a
-- client has no secret anyone knows: its secret_hash (required of web clients
-- by 0011) is the hash of a discarded random value. require_par refuses the
-- client's authorization requests that do not come through the PAR endpoint.
ALTER TABLE oidc_clients ADD COLUMN token_endpoint_auth_method TEXT NOT NULL DEFAULT ''
    CHECK (token_endpoint_auth_method IN ('', 'private_key_jwt'));
ALTER TABLE oidc_clients ADD COLUMN jwks TEXT;
ALTER TABLE oidc_clients ADD COLUMN require_par INTEGER NOT NULL DEFAULT 0 CHECK (require_par IN (0, 1));

-- Pushed authorization requests: id is the lower-case hex SHA-256 of the
-- request_uri; request the fosite authorization request as JSON (without
-- client credentials). A row is deleted when its request_uri is used (once)
-- and swept after expires_at.
CREATE TABLE oauth_par_requests (
    id         TEXT NOT NULL PRIMARY KEY,
    client_id  TEXT NOT NULL,
    request    TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

CREATE INDEX oauth_par_requests_expires_idx ON oauth_par_requests (expires_at);

-- The jti of every client assertion accepted, kept until the assertion expires so
-- that it is never accepted twice; swept after expires_at.
CREATE TABLE oauth_client_assertions (
    jti        TEXT NOT NULL PRIMARY KEY,
    expires_at TEXT NOT NULL
);

CREATE INDEX oauth_client_assertions_expires_idx ON oauth_client_assertions (expires_at);
