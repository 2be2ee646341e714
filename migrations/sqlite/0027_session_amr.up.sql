-- How each session's user signed in: RFC 8176 authentication method reference values,
-- space-separated in the order they were used ("pwd", "pwd otp mfa", "github", …). The ID
-- tokens of the OAuth provider carry them as amr; the session's created_at is its auth_time.
-- Sessions started before this migration record nothing ('').
ALTER TABLE sessions ADD COLUMN amr TEXT NOT NULL DEFAULT '';
