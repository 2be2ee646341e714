ALTER TABLE oidc_clients DROP COLUMN id_token_signed_response_alg;
