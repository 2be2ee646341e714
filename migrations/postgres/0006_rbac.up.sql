-- Project RBAC: role bindings. A binding gives one project role to one
-- principal (an opaque id chosen by the product); expires_at NULL never
-- expires. A binding's project is its role's project: the composite foreign
-- key below guarantees it. Deleting a referenced role is refused (NO
-- ACTION); the store deletes the bindings first when asked to force it.

-- The parent key of the composite foreign key (id alone is already unique).
CREATE UNIQUE INDEX project_roles_id_project_idx ON project_roles (id, project_id);

CREATE TABLE role_bindings (
    id             TEXT COLLATE "C" PRIMARY KEY,
    project_id     TEXT COLLATE "C" NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    role_id        TEXT COLLATE "C" NOT NULL,
    principal_type TEXT NOT NULL CHECK (principal_type IN ('user', 'service_account')),
    principal_id   TEXT COLLATE "C" NOT NULL,
    expires_at     TIMESTAMPTZ,
    created_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (role_id, principal_type, principal_id),
    FOREIGN KEY (role_id, project_id) REFERENCES project_roles (id, project_id)
);

-- The decision: one index-only range scan finds a principal's bindings in a
-- project with their roles and expiry, then one primary-key probe per role.
CREATE INDEX role_bindings_decision_idx ON role_bindings (project_id, principal_type, principal_id)
    INCLUDE (role_id, expires_at);

-- Listing a project's bindings oldest first.
CREATE INDEX role_bindings_project_created_idx ON role_bindings (project_id, created_at, id);
