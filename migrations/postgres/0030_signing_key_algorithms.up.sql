-- Token signing keys may be ES256 (ECDSA P-256) or EdDSA (Ed25519) beside RS256
-- (GATEHOUSE_SIGNING_ALG picks the algorithm of new keys). public_key stays the
-- SubjectPublicKeyInfo in PEM and private_key the sealed PKCS #8 DER key, whatever
-- the algorithm.
ALTER TABLE signing_keys DROP CONSTRAINT signing_keys_algorithm_check;
ALTER TABLE signing_keys ADD CONSTRAINT signing_keys_algorithm_check
    CHECK (algorithm IN ('RS256', 'ES256', 'EdDSA'));
