-- Consents a user gave an OIDC client (the provider's consent page, package server
-- oauth_authorize.go): one row per (user, client, scope set). scopes is the set, sorted and
-- space-separated; a request is covered by a row of the same user and client whose set holds
-- every requested scope. skipConsent clients never write rows. Deleting the user or the client
-- deletes its consents.
CREATE TABLE oauth_consents (
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id  TEXT NOT NULL REFERENCES oidc_clients (id) ON DELETE CASCADE,
    scopes     TEXT NOT NULL,
    granted_at TEXT NOT NULL,
    PRIMARY KEY (user_id, client_id, scopes)
);

-- Per-client lookups (subject deletion asks which clients of a project hold a consent).
CREATE INDEX oauth_consents_client_idx ON oauth_consents (client_id);
