-- One key not scheduled for retirement per algorithm rather than overall: every algorithm the
-- provider offers (GATEHOUSE_SIGNING_ALGS) keeps its own line of keys.
DROP INDEX signing_keys_one_unretired_idx;
CREATE UNIQUE INDEX signing_keys_one_unretired_idx ON signing_keys (algorithm) WHERE retires_at IS NULL;
