-- Fails while keys of two algorithms are not scheduled for retirement: rotate to one first.
DROP INDEX signing_keys_one_unretired_idx;
CREATE UNIQUE INDEX signing_keys_one_unretired_idx ON signing_keys ((retires_at IS NULL)) WHERE retires_at IS NULL;
