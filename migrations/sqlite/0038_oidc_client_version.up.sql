-- A version on each OIDC client, moved by a trigger whenever its row changes (see
-- migrations/postgres/0038). SQLite runs the trigger's UPDATE without firing the trigger again
-- (recursive triggers are off), and the WHEN clause leaves a change that set the version itself.
ALTER TABLE oidc_clients ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

CREATE TRIGGER oidc_clients_version AFTER UPDATE ON oidc_clients
    FOR EACH ROW WHEN NEW.version = OLD.version
BEGIN
    UPDATE oidc_clients SET version = OLD.version + 1 WHERE id = NEW.id;
END;
