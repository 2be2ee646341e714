DROP INDEX IF EXISTS invitations_pending_email_idx;
