-- An OIDC client's id_token_signed_response_alg (OpenID Connect Dynamic Client
-- Registration 1.0 section 2): the algorithm its ID tokens are signed with, or ''
-- for the algorithm of the key that signs now.
ALTER TABLE oidc_clients ADD COLUMN id_token_signed_response_alg TEXT NOT NULL DEFAULT ''
    CHECK (id_token_signed_response_alg IN ('', 'RS256', 'ES256', 'EdDSA'));
