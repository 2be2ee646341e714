DROP TABLE oauth_client_assertions;
DROP TABLE oauth_par_requests;
ALTER TABLE oidc_clients DROP COLUMN require_par;
ALTER TABLE oidc_clients DROP COLUMN jwks;
ALTER TABLE oidc_clients DROP COLUMN token_endpoint_auth_method;
