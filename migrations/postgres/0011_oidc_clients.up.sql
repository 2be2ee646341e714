-- OIDC clients of a project. The id ("cli_…") is the OAuth client_id. A web
-- (confidential) client stores only HMAC-SHA256(pepper, secret) of its secret
-- (secret_hash, 32 bytes); public clients (native, spa) have no secret and may
-- not skip consent. The URI, grant and scope lists are JSON arrays in the
-- order the client registered them (redirect URIs are matched exactly by the
-- protocol routes).
CREATE TABLE oidc_clients (
    id                        TEXT COLLATE "C" PRIMARY KEY,
    project_id                TEXT COLLATE "C" NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name                      TEXT NOT NULL CHECK (name <> ''),
    type                      TEXT COLLATE "C" NOT NULL CHECK (type IN ('web', 'native', 'spa')),
    redirect_uris             JSONB NOT NULL CHECK (jsonb_typeof(redirect_uris) = 'array' AND jsonb_array_length(redirect_uris) >= 1),
    post_logout_redirect_uris JSONB NOT NULL CHECK (jsonb_typeof(post_logout_redirect_uris) = 'array'),
    grant_types               JSONB NOT NULL CHECK (jsonb_typeof(grant_types) = 'array' AND jsonb_array_length(grant_types) >= 1),
    scopes                    JSONB NOT NULL CHECK (jsonb_typeof(scopes) = 'array' AND jsonb_array_length(scopes) >= 1),
    skip_consent              BOOLEAN NOT NULL,
    secret_hash               BYTEA CHECK (octet_length(secret_hash) = 32),
    disabled_at               TIMESTAMPTZ,
    created_at                TIMESTAMPTZ NOT NULL,
    updated_at                TIMESTAMPTZ NOT NULL,
    CHECK ((type = 'web') = (secret_hash IS NOT NULL)),
    CHECK (type = 'web' OR NOT skip_consent)
);

CREATE INDEX oidc_clients_project_idx ON oidc_clients (project_id, created_at);
