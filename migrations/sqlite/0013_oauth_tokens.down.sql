DROP TABLE IF EXISTS oauth_tokens;
