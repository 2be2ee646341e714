-- PostgreSQL partitions usage_events by month (0038 there); SQLite keeps one table.
SELECT 1;
