-- Usage events and the rollups maintained with them in the same transaction
-- (store/usage.go, store/analytics.go). Accounting rows are kept when a
-- subject is deleted, so nothing here references users; nor environments or
-- projects: a foreign key check on every event would take a KEY SHARE lock
-- on the environment row, which 16 concurrent senders contend for (the
-- server checks that the environment belongs to the project before it writes).
-- day: the UTC date of the event's timestamp as TEXT 'YYYY-MM-DD' (the same
-- on both dialects, also in revenue_daily).
-- WITHOUT ROWID: every table is keyed by its primary key alone, so a row is
-- one B-tree entry instead of a rowid row plus a unique index entry.

-- One row per accepted event, unique per (project_id, event_id); id is the
-- public id (uev_…), returned to replays too. No index on id: nothing reads
-- an event by it. The subject index serves a subject's 50 most recent events.
CREATE TABLE usage_events (
    project_id     TEXT NOT NULL,
    event_id       TEXT NOT NULL,
    id             TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    meter          TEXT NOT NULL,
    quantity       REAL NOT NULL CHECK (quantity >= 0),
    occurred_at    TEXT NOT NULL,
    received_at    TEXT NOT NULL,
    properties     TEXT,
    PRIMARY KEY (project_id, event_id)
) WITHOUT ROWID;
CREATE INDEX usage_events_subject_idx ON usage_events (project_id, subject_id, occurred_at);

-- Per project, subject, day, meter and environment: events and quantity.
-- Keyed subject first: every reader asks about one subject.
CREATE TABLE usage_daily (
    project_id     TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    day            TEXT NOT NULL,
    meter          TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    events         INTEGER NOT NULL,
    quantity       REAL NOT NULL,
    PRIMARY KEY (project_id, subject_id, day, meter, environment_id)
) WITHOUT ROWID;

-- Per project, subject, day and environment: events. A row whose count
-- becomes 1 is the subject's first event that day, which adds one to
-- usage_totals.new_subjects: daily active subjects without a DISTINCT.
CREATE TABLE usage_subject_days (
    project_id     TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    day            TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    events         INTEGER NOT NULL,
    PRIMARY KEY (project_id, subject_id, day, environment_id)
) WITHOUT ROWID;

-- Subject summary per project, environment and subject: first and last seen
-- (event timestamps), lifetime events and quantity, and revenue (the sum of
-- revenue_daily.amount in minor units over all currencies, for sorting).
-- A subject that only has revenue has events 0. No index on last_seen: it
-- changes with nearly every event, and every reader scans the project's
-- rows (one per subject and environment) anyway.
CREATE TABLE usage_subjects (
    project_id     TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    first_seen     TEXT NOT NULL,
    last_seen      TEXT NOT NULL,
    events         INTEGER NOT NULL,
    quantity       REAL NOT NULL,
    revenue        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (project_id, subject_id, environment_id)
) WITHOUT ROWID;

-- Per project, day, environment, meter and shard: events, quantity and the
-- subjects whose first event of the day it carried. shard (0–15, drawn at
-- random for each ingest transaction; earlier releases hashed the subject id)
-- spreads concurrent writers over 16 rows instead of one hot row per day;
-- readers sum the shards.
CREATE TABLE usage_totals (
    project_id     TEXT NOT NULL,
    day            TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    meter          TEXT NOT NULL,
    shard          INTEGER NOT NULL,
    events         INTEGER NOT NULL,
    quantity       REAL NOT NULL,
    new_subjects   INTEGER NOT NULL,
    PRIMARY KEY (project_id, day, environment_id, meter, shard)
) WITHOUT ROWID;
