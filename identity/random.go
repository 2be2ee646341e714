package identity

import (
	"crypto/rand"
	"fmt"
)

// base62 is the alphabet of every random string Gatehouse makes: session tokens (better-auth's
// generateId characters) and API key public ids. Membership, not order, is what callers rely on.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// base62Limit is the largest multiple of 62 that fits in a byte (4 × 62): random bytes at or
// above it are discarded, so that b % 62 is uniform (no modulo bias).
const base62Limit = 256 - 256%len(base62)

// RandomBase62 returns n characters drawn uniformly from [0-9A-Za-z] with crypto/rand, by
// rejection sampling (no modulo bias): log2(62) ≈ 5.95 bits of entropy per character. It is
// the code base's one generator of random base62 strings. It fails only if crypto/rand does.
func RandomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	// 248/256 of the bytes are kept: a quarter more than n is nearly always enough.
	buf := make([]byte, n+n/4+1)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("identity: random base62: %w", err)
		}
		for _, b := range buf {
			if int(b) < base62Limit && len(out) < n {
				out = append(out, base62[int(b)%len(base62)])
			}
		}
	}
	return string(out), nil
}
