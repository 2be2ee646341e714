ALTER TABLE project_roles DROP COLUMN permissions;
