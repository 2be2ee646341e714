-- Back to one unpartitioned table (not batched: a development tool).
CREATE TABLE usage_events_flat (
    project_id     TEXT COLLATE "C" NOT NULL,
    event_id       TEXT COLLATE "C" NOT NULL,
    id             TEXT COLLATE "C" NOT NULL,
    environment_id TEXT COLLATE "C" NOT NULL,
    subject_id     TEXT COLLATE "C" NOT NULL,
    meter          TEXT COLLATE "C" NOT NULL,
    quantity       DOUBLE PRECISION NOT NULL CHECK (quantity >= 0),
    occurred_at    TIMESTAMPTZ NOT NULL,
    received_at    TIMESTAMPTZ NOT NULL,
    properties     TEXT,
    PRIMARY KEY (project_id, event_id)
);
INSERT INTO usage_events_flat SELECT * FROM usage_events ON CONFLICT DO NOTHING;
DO $$
BEGIN
    IF to_regclass('usage_events_legacy') IS NOT NULL THEN
        INSERT INTO usage_events_flat SELECT * FROM usage_events_legacy ON CONFLICT DO NOTHING;
        DROP TABLE usage_events_legacy;
    END IF;
END $$;
DROP TABLE usage_events;
DROP TABLE usage_events_conversion;
DROP TABLE usage_event_ids;
ALTER TABLE usage_events_flat RENAME TO usage_events;
ALTER TABLE usage_events RENAME CONSTRAINT usage_events_flat_pkey TO usage_events_pkey;
ALTER TABLE usage_events RENAME CONSTRAINT usage_events_flat_quantity_check TO usage_events_quantity_check;
CREATE INDEX usage_events_subject_idx ON usage_events (project_id, subject_id, occurred_at);
