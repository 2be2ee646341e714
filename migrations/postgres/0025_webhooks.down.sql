ALTER TABLE outbox DROP COLUMN partition_key;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
