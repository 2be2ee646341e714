DELETE FROM email_tokens WHERE purpose = 'change-email';
ALTER TABLE email_tokens DROP COLUMN new_email;
ALTER TABLE email_tokens DROP CONSTRAINT email_tokens_purpose_check;
ALTER TABLE email_tokens ADD CONSTRAINT email_tokens_purpose_check
    CHECK (purpose IN ('verify-email', 'reset-password'));
