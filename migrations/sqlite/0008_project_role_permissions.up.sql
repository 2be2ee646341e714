-- Project role permissions become rows: one per (role, permission), with
-- position keeping the order the role lists them in. The primary key serves
-- the decision's lookup of a bound role's requested permission or "*".
CREATE TABLE project_role_permissions (
    role_id    TEXT NOT NULL REFERENCES project_roles (id) ON DELETE CASCADE,
    permission TEXT NOT NULL CHECK (permission <> ''),
    position   INTEGER NOT NULL,
    PRIMARY KEY (role_id, permission)
) WITHOUT ROWID;

INSERT INTO project_role_permissions (role_id, permission, position)
    SELECT r.id, p.value, p.key FROM project_roles r, json_each(r.permissions) p;

ALTER TABLE project_roles DROP COLUMN permissions;
