DROP TABLE IF EXISTS config_versions;
DROP TABLE IF EXISTS config_entries;
