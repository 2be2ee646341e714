-- The outbox: everything that must leave the process later (a mail today, a webhook delivery
-- later) is written here in the transaction of the change that causes it, and delivered by a
-- worker (identity/outbox) with retries and exponential backoff. kind names the payload's
-- handler ('mail'); payload is the JSON payload sealed with the master key (AES-256-GCM, bound
-- to the row's id and kind), emptied once delivered. A row is pending while sent_at and
-- failed_at are NULL; next_attempt_at is when it is due (a worker that claims it moves it a
-- lease ahead, so no other worker takes it meanwhile; PostgreSQL claims with FOR UPDATE SKIP
-- LOCKED). attempts counts claims; last_error is the latest failure, never the payload.
CREATE TABLE outbox (
    id              TEXT COLLATE "C" PRIMARY KEY,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    sent_at         TIMESTAMPTZ,
    failed_at       TIMESTAMPTZ,
    last_error      TEXT
);

-- The workers' poll: pending rows by due time.
CREATE INDEX outbox_due_idx ON outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;
-- Sweeping finished rows.
CREATE INDEX outbox_created_idx ON outbox (created_at);
