-- OIDC clients of a project. The id ("cli_…") is the OAuth client_id. A web
-- (confidential) client stores only HMAC-SHA256(pepper, secret) of its secret
-- (secret_hash, 32 bytes); public clients (native, spa) have no secret and may
-- not skip consent. The URI, grant and scope lists are JSON arrays in the
-- order the client registered them (redirect URIs are matched exactly by the
-- protocol routes).
CREATE TABLE oidc_clients (
    id                        TEXT NOT NULL PRIMARY KEY,
    project_id                TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name                      TEXT NOT NULL CHECK (name <> ''),
    type                      TEXT NOT NULL CHECK (type IN ('web', 'native', 'spa')),
    redirect_uris             TEXT NOT NULL CHECK (json_type(redirect_uris) = 'array' AND json_array_length(redirect_uris) >= 1),
    post_logout_redirect_uris TEXT NOT NULL CHECK (json_type(post_logout_redirect_uris) = 'array'),
    grant_types               TEXT NOT NULL CHECK (json_type(grant_types) = 'array' AND json_array_length(grant_types) >= 1),
    scopes                    TEXT NOT NULL CHECK (json_type(scopes) = 'array' AND json_array_length(scopes) >= 1),
    skip_consent              INTEGER NOT NULL CHECK (skip_consent IN (0, 1)),
    secret_hash               BLOB CHECK (secret_hash IS NULL OR (typeof(secret_hash) = 'blob' AND length(secret_hash) = 32)),
    disabled_at               TEXT,
    created_at                TEXT NOT NULL,
    updated_at                TEXT NOT NULL,
    CHECK ((type = 'web') = (secret_hash IS NOT NULL)),
    CHECK (type = 'web' OR skip_consent = 0)
);

CREATE INDEX oidc_clients_project_idx ON oidc_clients (project_id, created_at);
