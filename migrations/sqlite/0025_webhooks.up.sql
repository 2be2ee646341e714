-- Outbound webhooks (Standard Webhooks). An endpoint belongs to a project (and, when
-- environment_id is set, receives only that environment's events); event_types is a JSON array
-- of event types or ["*"]. secret is the signing secret (whsec_…) sealed with the master key
-- (AES-256-GCM, bound to the endpoint's id); previous_secret is the one a rotation replaced,
-- sealed the same way, which keeps signing alongside until previous_secret_expires_at.
-- disabled_at is set when an operator disables the endpoint or when it has failed continuously
-- for three days (disabled_reason 'manual' or 'failing'); failing_since is the first failed
-- attempt of the current run of failures (NULL after a success).
CREATE TABLE webhook_endpoints (
    id                         TEXT NOT NULL PRIMARY KEY,
    project_id                 TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment_id             TEXT REFERENCES environments (id) ON DELETE CASCADE,
    url                        TEXT NOT NULL,
    description                TEXT NOT NULL DEFAULT '',
    event_types                TEXT NOT NULL,
    secret                     TEXT NOT NULL,
    previous_secret            TEXT,
    previous_secret_expires_at TEXT,
    disabled_at                TEXT,
    disabled_reason            TEXT,
    failing_since              TEXT,
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT NOT NULL
);

CREATE INDEX webhook_endpoints_project_idx ON webhook_endpoints (project_id, created_at);

-- The events delivered to endpoints: the exact JSON body that is signed and sent (never a
-- secret, config value, key or token). id is the audit entry's id for events that record a
-- mutation, or evt_… for the others (billing events, ping). Written only when at least one
-- endpoint subscribes to the event, in the transaction of the change.
CREATE TABLE webhook_events (
    id          TEXT NOT NULL PRIMARY KEY,
    project_id  TEXT NOT NULL,
    type        TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

-- One row per delivery attempt of an event to an endpoint: pending (scheduled at
-- next_attempt_at), then succeeded or failed with the response code, latency and the first
-- 4 KiB of the response body. outbox_id is the outbox row that carries the delivery (a
-- redelivery is a new outbox row); (outbox_id, attempt) is unique.
CREATE TABLE webhook_deliveries (
    id              TEXT NOT NULL PRIMARY KEY,
    endpoint_id     TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    outbox_id       TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    response_code   INTEGER,
    latency_ms      INTEGER,
    response_body   TEXT,
    error           TEXT,
    next_attempt_at TEXT,
    created_at      TEXT NOT NULL,
    UNIQUE (outbox_id, attempt)
);

CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);

-- The outbox's ordering key: rows with the same key (a webhook endpoint) are attempted one
-- after the other, oldest first, by one worker; NULL rows are independent.
ALTER TABLE outbox ADD COLUMN partition_key TEXT;
