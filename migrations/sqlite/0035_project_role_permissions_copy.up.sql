-- A copy of each role's permissions on the role's own row, as a JSON array of strings in
-- position order, written by the same statements that write its project_role_permissions rows
-- (store/rbac.go). A batch decision and a principal's effective permissions read a bound role's
-- permissions as this one value with the role's row, instead of aggregating its permission
-- rows per request; the rows stay the source for the lookups by permission (a single decision,
-- who holds a permission, the role list).
ALTER TABLE project_roles ADD COLUMN permissions TEXT NOT NULL DEFAULT '[]'
    CHECK (json_type(permissions) = 'array');

UPDATE project_roles SET permissions = (
    SELECT COALESCE(json_group_array(permission), '[]') FROM (
        SELECT permission FROM project_role_permissions p
        WHERE p.role_id = project_roles.id ORDER BY position
    )
);
