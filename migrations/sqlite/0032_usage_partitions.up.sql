-- PostgreSQL partitions usage_events by month (0032 there); SQLite keeps one table.
SELECT 1;
