DROP TABLE IF EXISTS api_keys;
DROP TABLE IF EXISTS service_accounts;
