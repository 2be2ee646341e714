DROP TRIGGER oidc_clients_version;
ALTER TABLE oidc_clients DROP COLUMN version;
