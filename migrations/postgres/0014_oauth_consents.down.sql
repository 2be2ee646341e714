DROP TABLE oauth_consents;
