-- Decision epochs (PostgreSQL): one number per project that moves, in the transaction of the
-- change, whenever a row that an API-key decision on POST /api/v1/authorize about that project
-- reads is inserted, changed or deleted: the key (api_keys; all but last_used_at, which records
-- use), its service account, the project and its organization (an organization's change moves
-- the epoch of each of its projects), and the decision's bindings, roles and role permissions.
-- Triggers move them, so a write from any connection, replica or program counts. The server
-- keeps such decisions between requests and serves one again only while the epoch of the key's
-- project, read on every request, is still the one read with it (store.APIKeyDecision,
-- server/decision_cache.go): one primary-key probe instead of the key's and the decision's
-- joins.
--
-- Per project, not one row: a single row that every RBAC write updates would serialize those
-- writes across all tenants and replicas; here only writes to the same project wait on each
-- other. Each move takes a fresh value of decision_epoch_seq, so a row never shows a value twice
-- (even when transactions commit out of the order they drew their values): "same value" means
-- "no change committed since". Rows are never deleted (a deleted project's row stays, so that
-- an id could never bring back an old value). SQLite keeps one epoch for the whole file
-- (migration 36).
CREATE SEQUENCE decision_epoch_seq;

CREATE TABLE decision_epochs (
    scope_id TEXT COLLATE "C" PRIMARY KEY,
    epoch    BIGINT NOT NULL
);

-- decision_epoch_move moves the epoch of project scope.
CREATE FUNCTION decision_epoch_move(scope TEXT) RETURNS void LANGUAGE sql AS $$
    INSERT INTO decision_epochs (scope_id, epoch) VALUES (scope, nextval('decision_epoch_seq'))
    ON CONFLICT (scope_id) DO UPDATE SET epoch = nextval('decision_epoch_seq')
$$;

-- organizations: each of the organization's projects (a new organization has none yet; when one
-- is deleted its projects go by cascade and move their own).
CREATE FUNCTION decision_epoch_by_organization() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM decision_epoch_move(p.id) FROM projects p WHERE p.organization_id = OLD.id ORDER BY p.id;
    END IF;
    RETURN NULL;
END
$$;

-- projects: the row's own id.
CREATE FUNCTION decision_epoch_by_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM decision_epoch_move(OLD.id);
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM decision_epoch_move(NEW.id);
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.id IS DISTINCT FROM OLD.id THEN
            PERFORM decision_epoch_move(NEW.id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- service_accounts, project_roles and role_bindings: the row's project_id.
CREATE FUNCTION decision_epoch_by_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM decision_epoch_move(OLD.project_id);
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM decision_epoch_move(NEW.project_id);
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.project_id IS DISTINCT FROM OLD.project_id THEN
            PERFORM decision_epoch_move(NEW.project_id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- api_keys: the project of the key's service account. When the account itself is being
-- deleted (the key goes by cascade) it is no longer found, and its own trigger has moved the
-- project's epoch.
CREATE FUNCTION decision_epoch_by_service_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM decision_epoch_move(a.project_id) FROM service_accounts a WHERE a.id = OLD.service_account_id;
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM decision_epoch_move(a.project_id) FROM service_accounts a WHERE a.id = NEW.service_account_id;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.service_account_id IS DISTINCT FROM OLD.service_account_id THEN
            PERFORM decision_epoch_move(a.project_id) FROM service_accounts a WHERE a.id = NEW.service_account_id;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- project_role_permissions: the project of the permission's role (the same cascade rule).
CREATE FUNCTION decision_epoch_by_role() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM decision_epoch_move(r.project_id) FROM project_roles r WHERE r.id = OLD.role_id;
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM decision_epoch_move(r.project_id) FROM project_roles r WHERE r.id = NEW.role_id;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.role_id IS DISTINCT FROM OLD.role_id THEN
            PERFORM decision_epoch_move(r.project_id) FROM project_roles r WHERE r.id = NEW.role_id;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER organizations_decision_epoch AFTER UPDATE OR DELETE ON organizations
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_organization();
CREATE TRIGGER projects_decision_epoch AFTER INSERT OR UPDATE OR DELETE ON projects
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_id();
CREATE TRIGGER service_accounts_decision_epoch AFTER INSERT OR UPDATE OR DELETE ON service_accounts
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_project();
CREATE TRIGGER api_keys_decision_epoch AFTER INSERT OR DELETE
    OR UPDATE OF id, service_account_id, public_id, secret_hash, expires_at, revoked_at, created_at ON api_keys
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_service_account();
CREATE TRIGGER project_roles_decision_epoch AFTER INSERT OR UPDATE OR DELETE ON project_roles
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_project();
CREATE TRIGGER project_role_permissions_decision_epoch AFTER INSERT OR UPDATE OR DELETE ON project_role_permissions
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_role();
CREATE TRIGGER role_bindings_decision_epoch AFTER INSERT OR UPDATE OR DELETE ON role_bindings
    FOR EACH ROW EXECUTE FUNCTION decision_epoch_by_project();
