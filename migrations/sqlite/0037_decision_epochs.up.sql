-- Nothing on SQLite: one epoch for the whole file (migration 36) already serves it. PostgreSQL
-- keeps one per project (migrations/postgres/0037).
SELECT 1;
