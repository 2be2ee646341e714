-- Project role permissions become rows: one per (role, permission), with
-- position keeping the order the role lists them in. The primary key serves
-- the decision's lookup of a bound role's requested permission or "*".
CREATE TABLE project_role_permissions (
    role_id    TEXT COLLATE "C" NOT NULL REFERENCES project_roles (id) ON DELETE CASCADE,
    permission TEXT COLLATE "C" NOT NULL CHECK (permission <> ''),
    position   INTEGER NOT NULL,
    PRIMARY KEY (role_id, permission)
);

INSERT INTO project_role_permissions (role_id, permission, position)
    SELECT r.id, p.value, p.ordinality - 1
    FROM project_roles r, jsonb_array_elements_text(r.permissions) WITH ORDINALITY AS p (value, ordinality);

ALTER TABLE project_roles DROP COLUMN permissions;
