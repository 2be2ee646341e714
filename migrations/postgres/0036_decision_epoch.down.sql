-- Nothing on PostgreSQL (see the up migration).
SELECT 1;
