-- The permissions column comes back as a JSON array in position order. (The
-- column keeps the '[]' default: SQLite cannot drop a default.)
ALTER TABLE project_roles ADD COLUMN permissions TEXT NOT NULL DEFAULT '[]'
    CHECK (json_type(permissions) = 'array');

UPDATE project_roles SET permissions = (
    SELECT COALESCE(json_group_array(permission), '[]') FROM (
        SELECT permission FROM project_role_permissions p
        WHERE p.role_id = project_roles.id ORDER BY position
    )
);

DROP TABLE project_role_permissions;
