-- Email change (POST /api/auth/change-email): a token of purpose 'change-email' is mailed to
-- the new address; email is the address the user had when asking (the link stops working when
-- it changes meanwhile) and new_email the address the link moves the account to.
ALTER TABLE email_tokens DROP CONSTRAINT email_tokens_purpose_check;
ALTER TABLE email_tokens ADD CONSTRAINT email_tokens_purpose_check
    CHECK (purpose IN ('verify-email', 'reset-password', 'change-email'));
ALTER TABLE email_tokens ADD COLUMN new_email TEXT NOT NULL DEFAULT '';
