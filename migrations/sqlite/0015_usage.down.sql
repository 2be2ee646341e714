DROP TABLE IF EXISTS usage_totals;
DROP TABLE IF EXISTS usage_subjects;
DROP TABLE IF EXISTS usage_subject_days;
DROP TABLE IF EXISTS usage_daily;
DROP TABLE IF EXISTS usage_events;
