DROP INDEX IF EXISTS throttle_counters_expires_idx;
DROP TABLE IF EXISTS throttle_counters;
