DROP TABLE email_tokens;
