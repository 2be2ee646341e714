DROP TABLE oauth_used_challenges;
