-- usage_events partitioned by month of received_at (store/usage_partitions.go), with
-- replay detection moved to usage_event_ids.
--
-- The partition key is received_at, the server's clock at ingest, not occurred_at, the
-- sender's timestamp: a late or backdated event still lands in the current month's partition
-- (never in the default one, never refused), retention counts from when Gatehouse received an
-- event, and dropping a partition never takes an event that arrived within the retention.
-- The analytics read the rollups (0015), which hold every day's history whatever partition an
-- event went to; the only reader of raw events (a subject's 50 most recent) probes every
-- partition's subject index.
--
-- A unique constraint of a partitioned table must include the partition key, so
-- (project_id, event_id) is unique in usage_event_ids instead: one row per accepted event
-- with its public id (returned to replays) and received_at. Rows older than the replay window
-- (GATEHOUSE_USAGE_REPLAY_WINDOW) are deleted by the maintenance; the BRIN index (rows arrive
-- in received_at order) finds them at almost no cost per insert.
CREATE TABLE usage_event_ids (
    project_id  TEXT COLLATE "C" NOT NULL,
    event_id    TEXT COLLATE "C" NOT NULL,
    id          TEXT COLLATE "C" NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, event_id)
);
CREATE INDEX usage_event_ids_received_idx ON usage_event_ids USING brin (received_at);

-- The existing table becomes usage_events_legacy (renaming takes its lock for an instant);
-- Gatehouse moves its rows into the partitioned table in batches after start-up
-- (Store.ConvertUsageBatch), while ingest writes to the new table and treats an event id
-- still in the legacy table as a replay. An empty legacy table (a new installation) is
-- dropped here at once.
ALTER TABLE usage_events RENAME TO usage_events_legacy;
ALTER TABLE usage_events_legacy RENAME CONSTRAINT usage_events_pkey TO usage_events_legacy_pkey;
ALTER INDEX usage_events_subject_idx RENAME TO usage_events_legacy_subject_idx;

CREATE TABLE usage_events (
    project_id     TEXT COLLATE "C" NOT NULL,
    event_id       TEXT COLLATE "C" NOT NULL,
    id             TEXT COLLATE "C" NOT NULL,
    environment_id TEXT COLLATE "C" NOT NULL,
    subject_id     TEXT COLLATE "C" NOT NULL,
    meter          TEXT COLLATE "C" NOT NULL,
    quantity       DOUBLE PRECISION NOT NULL CHECK (quantity >= 0),
    occurred_at    TIMESTAMPTZ NOT NULL,
    received_at    TIMESTAMPTZ NOT NULL,
    properties     TEXT
) PARTITION BY RANGE (received_at);
CREATE INDEX usage_events_subject_idx ON usage_events (project_id, subject_id, occurred_at);
-- Events outside every monthly partition (a clock far off, a month not yet created) land
-- here rather than fail; the maintenance moves them into their month's partition when it
-- creates it.
CREATE TABLE usage_events_default PARTITION OF usage_events DEFAULT;

-- The conversion's cursor: the last (project_id, event_id) moved, committed with each batch.
CREATE TABLE usage_events_conversion (
    singleton  BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    project_id TEXT COLLATE "C" NOT NULL,
    event_id   TEXT COLLATE "C" NOT NULL,
    moved      BIGINT NOT NULL
);

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM usage_events_legacy) THEN
        DROP TABLE usage_events_legacy;
    END IF;
END $$;
