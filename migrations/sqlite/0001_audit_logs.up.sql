-- occurred_at: fixed-width RFC 3339 UTC text, "2006-01-02T15:04:05.000000Z".
-- metadata: a JSON object as text, or NULL.
CREATE TABLE audit_logs (
    id              TEXT NOT NULL PRIMARY KEY,
    occurred_at     TEXT NOT NULL,
    actor_type      TEXT NOT NULL CHECK (actor_type IN ('user', 'service_account', 'system')),
    actor_id        TEXT NOT NULL,
    action          TEXT NOT NULL,
    target_type     TEXT NOT NULL,
    target_id       TEXT NOT NULL,
    organization_id TEXT,
    project_id      TEXT,
    request_id      TEXT NOT NULL DEFAULT '',
    ip_address      TEXT NOT NULL DEFAULT '',
    user_agent      TEXT NOT NULL DEFAULT '',
    metadata        TEXT CHECK (metadata IS NULL OR json_type(metadata) = 'object')
);

CREATE INDEX audit_logs_project_idx ON audit_logs (project_id, occurred_at DESC, id DESC);
CREATE INDEX audit_logs_organization_idx ON audit_logs (organization_id, occurred_at DESC, id DESC);
