-- Nothing on PostgreSQL: SQLite's one epoch for the whole file has no counterpart here. One row
-- that every RBAC write updates would serialize those writes across replicas; PostgreSQL keeps
-- one epoch per project and organization instead (migration 37).
SELECT 1;
