-- The permissions column comes back as a JSON array in position order.
ALTER TABLE project_roles ADD COLUMN permissions JSONB NOT NULL DEFAULT '[]'
    CHECK (jsonb_typeof(permissions) = 'array');

UPDATE project_roles SET permissions = COALESCE((
    SELECT jsonb_agg(permission ORDER BY position) FROM project_role_permissions p
    WHERE p.role_id = project_roles.id
), '[]'::jsonb);

ALTER TABLE project_roles ALTER COLUMN permissions DROP DEFAULT;

DROP TABLE project_role_permissions;
