-- The OAuth 2.1 / OpenID Connect provider's grant state, one row per token or code that fosite
-- stores (package oauth, fositestore.go). kind is one of
--   code     an authorization code (signature = the code's HMAC signature),
--   pkce     the PKCE challenge of an authorization code (same signature as the code),
--   oidc     the OpenID Connect request of an authorization code (keyed by the code signature),
--   access   an access token (signature = the JWT's signature part),
--   refresh  a refresh token (signature = its HMAC signature; access_signature = its access token).
-- request_id ties every row of one grant together (the "family": a code, the tokens it gave and
-- every rotation of them); revocation and reuse detection work on it. active is 0 for a used
-- authorization code and a rotated or revoked refresh token: such rows are kept (never deleted)
-- so that a replay is recognised and revokes the family. client_id has no foreign key: tokens of
-- a deleted client simply stop resolving (the adapter looks the client up on every read).
-- The request columns (scopes, granted_scopes, requested_audience, granted_audience) hold JSON
-- arrays; form holds the url-encoded request form without secrets; session the fosite session
-- as JSON. requested_at is when the grant was requested; expires_at when the row may be purged.
CREATE TABLE oauth_tokens (
    kind               TEXT NOT NULL CHECK (kind IN ('code', 'pkce', 'oidc', 'access', 'refresh')),
    signature          TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    client_id          TEXT NOT NULL,
    subject            TEXT NOT NULL,
    active             INTEGER NOT NULL CHECK (active IN (0, 1)),
    scopes             TEXT NOT NULL,
    granted_scopes     TEXT NOT NULL,
    requested_audience TEXT NOT NULL,
    granted_audience   TEXT NOT NULL,
    form               TEXT NOT NULL,
    session            BLOB NOT NULL,
    access_signature   TEXT NOT NULL DEFAULT '',
    requested_at       TEXT NOT NULL,
    expires_at         TEXT NOT NULL,
    PRIMARY KEY (kind, signature)
);

-- Revocation by grant (RevokeRefreshToken, RevokeAccessToken, code replay).
CREATE INDEX oauth_tokens_request_idx ON oauth_tokens (request_id, kind);
-- Per-client and per-subject lookups (client disablement, subject deletion) and purging.
CREATE INDEX oauth_tokens_client_idx ON oauth_tokens (client_id, subject);
CREATE INDEX oauth_tokens_subject_idx ON oauth_tokens (subject);
CREATE INDEX oauth_tokens_expires_idx ON oauth_tokens (expires_at);
