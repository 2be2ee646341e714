DROP TABLE IF EXISTS role_bindings;
DROP INDEX IF EXISTS project_roles_id_project_idx;
