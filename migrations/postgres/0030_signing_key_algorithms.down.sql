-- Fails while an ES256 or EdDSA key is stored: retire and delete them first.
ALTER TABLE signing_keys DROP CONSTRAINT signing_keys_algorithm_check;
ALTER TABLE signing_keys ADD CONSTRAINT signing_keys_algorithm_check CHECK (algorithm = 'RS256');
