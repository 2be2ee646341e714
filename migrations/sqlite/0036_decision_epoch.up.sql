-- The decision epoch (SQLite only): one number that moves, in the transaction of the change,
-- whenever a row that an API-key decision on POST /api/v1/authorize reads is inserted, changed or
-- deleted: the key (api_keys; all but last_used_at, which records use), its service account,
-- project and organization, and the decision's bindings, roles and role permissions. Triggers
-- move it, so a write from any connection or process counts, with or without Gatehouse's code.
-- The server keeps such decisions between requests and serves one again only while the epoch it
-- read before reading the decision is still the epoch (server/decision_cache.go): the check is
-- one single-row read instead of the key's and the decision's queries. PostgreSQL keeps one epoch
-- per project and organization instead (its migration 37): one row every RBAC write updates
-- would serialize those writes across replicas.
CREATE TABLE decision_epoch (
    id    INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL
);
INSERT INTO decision_epoch (id, epoch) VALUES (1, 0);

CREATE TRIGGER organizations_decision_epoch_insert AFTER INSERT ON organizations
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER organizations_decision_epoch_update AFTER UPDATE ON organizations
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER organizations_decision_epoch_delete AFTER DELETE ON organizations
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER projects_decision_epoch_insert AFTER INSERT ON projects
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER projects_decision_epoch_update AFTER UPDATE ON projects
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER projects_decision_epoch_delete AFTER DELETE ON projects
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER service_accounts_decision_epoch_insert AFTER INSERT ON service_accounts
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER service_accounts_decision_epoch_update AFTER UPDATE ON service_accounts
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER service_accounts_decision_epoch_delete AFTER DELETE ON service_accounts
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER api_keys_decision_epoch_insert AFTER INSERT ON api_keys
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

-- Every column of api_keys but last_used_at (store.TestDecisionEpoch checks the list against
-- the table).
CREATE TRIGGER api_keys_decision_epoch_update AFTER UPDATE OF id, service_account_id, public_id, secret_hash, expires_at, revoked_at, created_at ON api_keys
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER api_keys_decision_epoch_delete AFTER DELETE ON api_keys
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER project_roles_decision_epoch_insert AFTER INSERT ON project_roles
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER project_roles_decision_epoch_update AFTER UPDATE ON project_roles
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER project_roles_decision_epoch_delete AFTER DELETE ON project_roles
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER project_role_permissions_decision_epoch_insert AFTER INSERT ON project_role_permissions
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER project_role_permissions_decision_epoch_update AFTER UPDATE ON project_role_permissions
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER project_role_permissions_decision_epoch_delete AFTER DELETE ON project_role_permissions
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER role_bindings_decision_epoch_insert AFTER INSERT ON role_bindings
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER role_bindings_decision_epoch_update AFTER UPDATE ON role_bindings
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;

CREATE TRIGGER role_bindings_decision_epoch_delete AFTER DELETE ON role_bindings
BEGIN
    UPDATE decision_epoch SET epoch = epoch + 1;
END;
