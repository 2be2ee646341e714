DROP TRIGGER oidc_clients_version ON oidc_clients;
DROP FUNCTION oidc_client_version_move();
ALTER TABLE oidc_clients DROP COLUMN version;
