-- A version on each OIDC client, moved by a trigger whenever its row changes (any column, from
-- any connection, replica or program). The token endpoint keeps a client it has read between
-- client_credentials requests and writes each token row only if the client is still at the
-- version it read and its project and organization are not archived (store.OAuthToken's
-- ClientVersion, oauth/kept_clients.go): one statement a token instead of the client's read
-- and the token's write.
ALTER TABLE oidc_clients ADD COLUMN version BIGINT NOT NULL DEFAULT 1;

CREATE FUNCTION oidc_client_version_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;

CREATE TRIGGER oidc_clients_version BEFORE UPDATE ON oidc_clients
    FOR EACH ROW EXECUTE FUNCTION oidc_client_version_move();
