-- Failure and rate throttles shared by every replica (store/throttle.go).
-- key_hash: lower-case hex SHA-256 of the throttle key ("email:…", "ip:…",
-- …), so a flood of distinct keys costs a fixed 64 characters per row.
-- A row counts hits in the window ending at expires_at; a hit after it
-- starts a new window. Expired rows are deleted by the throttle's sweep,
-- which the expires_at index serves.
CREATE TABLE throttle_counters (
    key_hash   TEXT COLLATE "C" PRIMARY KEY,
    hits       INTEGER NOT NULL CHECK (hits >= 0),
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX throttle_counters_expires_idx ON throttle_counters (expires_at);
