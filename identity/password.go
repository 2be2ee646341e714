package identity

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/sync/semaphore"
	"golang.org/x/text/unicode/norm"
)

// Password hashing parameters for new hashes: argon2id with OWASP's minimum
// recommendation (19 MiB, two passes, one lane). Stored hashes carry their
// own parameters, so these may be raised later without invalidating them.
const (
	argonMemory  = 19456 // KiB
	argonTime    = 2
	argonThreads = 1
	argonSaltLen = 16
	argonKeyLen  = 32
)

// Bounds VerifyPassword accepts for parameters read from a stored hash, so
// that a corrupted or hostile row cannot make a verify allocate gigabytes or
// run for minutes.
const (
	maxArgonMemory  = 1 << 20 // KiB (1 GiB)
	maxArgonTime    = 16
	maxArgonThreads = 16
	minArgonSaltLen = 8
	minArgonKeyLen  = 16
	maxArgonKeyLen  = 128
)

// ErrMalformedHash is returned by VerifyPassword when the stored hash is not
// an argon2id PHC string it can verify against.
var ErrMalformedHash = errors.New("identity: malformed password hash")

// argonParams are the cost parameters of one hash.
type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

var defaultArgonParams = argonParams{memory: argonMemory, time: argonTime, threads: argonThreads}

// HashPassword returns the argon2id hash of pw as a PHC string,
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>
//
// with a fresh 16-byte salt and a 32-byte key, both in unpadded standard
// base64. The password is NFKC-normalised first (as better-auth does), so
// visually identical compositions of one password match. HashPassword fails
// only if crypto/rand does.
func HashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("identity: hash password: %w", err)
	}
	key := argonKey(pw, salt, defaultArgonParams, argonKeyLen)
	return encodePHC(defaultArgonParams, salt, key), nil
}

// VerifyPassword reports whether pw matches encoded, a hash made by
// HashPassword (or any argon2id v=19 PHC string within sane cost bounds: the
// parameters are read from encoded, not from the current defaults). The
// derived key is compared in constant time. A wrong password is (false, nil);
// an encoded value that cannot be parsed is (false, ErrMalformedHash).
func VerifyPassword(encoded, pw string) (bool, error) {
	params, salt, want, err := decodePHC(encoded)
	if err != nil {
		return false, err
	}
	got := argonKey(pw, salt, params, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash has the current default parameters and a fixed salt and key that
// no known password produces.
var dummyHash = encodePHC(defaultArgonParams,
	[]byte("gatehouse-dummy!"),
	[]byte("gatehouse dummy key, never valid"))

// VerifyDummy spends the time of a VerifyPassword against a hash with the
// default parameters and throws the result away. Call it when sign-in finds
// no user (or no password) for the email, so that the response time does not
// reveal whether the account exists.
func VerifyDummy(pw string) {
	_, _ = VerifyPassword(dummyHash, pw)
}

func argonKey(pw string, salt []byte, p argonParams, keyLen uint32) []byte {
	return argon2.IDKey([]byte(norm.NFKC.String(pw)), salt, p.time, p.memory, p.threads, keyLen)
}

func encodePHC(p argonParams, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.memory, p.time, p.threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// decodePHC parses "$argon2id$v=19$m=M,t=T,p=P$salt$key". The parameters
// must appear in that order (as every argon2 implementation writes them).
func decodePHC(encoded string) (argonParams, []byte, []byte, error) {
	malformed := func(what string) (argonParams, []byte, []byte, error) {
		return argonParams{}, nil, nil, fmt.Errorf("%w: %s", ErrMalformedHash, what)
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" {
		return malformed("want $argon2id$v=…$m=…,t=…,p=…$salt$key")
	}
	if parts[1] != "argon2id" {
		return malformed("algorithm is not argon2id")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return malformed("unsupported version")
	}
	var values [3]uint64
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return malformed("parameters")
	}
	for i, name := range []string{"m=", "t=", "p="} {
		digits, ok := strings.CutPrefix(fields[i], name)
		if !ok {
			return malformed("parameters")
		}
		v, err := strconv.ParseUint(digits, 10, 32)
		if err != nil {
			return malformed("parameters")
		}
		values[i] = v
	}
	p := argonParams{memory: uint32(values[0]), time: uint32(values[1]), threads: uint8(min(values[2], 255))}
	if p.time < 1 || p.time > maxArgonTime || values[2] < 1 || values[2] > maxArgonThreads ||
		p.memory < 8*uint32(p.threads) || p.memory > maxArgonMemory {
		return malformed("parameters out of range")
	}
	salt, err := base64.RawStdEncoding.Strict().DecodeString(parts[4])
	if err != nil || len(salt) < minArgonSaltLen {
		return malformed("salt")
	}
	key, err := base64.RawStdEncoding.Strict().DecodeString(parts[5])
	if err != nil || len(key) < minArgonKeyLen || len(key) > maxArgonKeyLen {
		return malformed("key")
	}
	return p, salt, key, nil
}

// HashMemoryKiB is the memory one argon2id computation with the default parameters holds
// (19 MiB), the unit a HashLimiter's budget is counted in.
const HashMemoryKiB = argonMemory

// ErrHashBusy is returned by the HashLimiter methods when no memory for the computation became
// free within the limiter's wait: the server is at its hashing capacity.
var ErrHashBusy = errors.New("identity: password hashing at capacity")

// HashLimiter bounds the memory of the argon2id computations running at once. Each computation
// reserves its hash's memory parameter (HashMemoryKiB for the default; at most the whole
// budget, so an unusually expensive stored hash still runs, alone) before it starts and frees it
// when done. A computation that finds the budget used waits in line (first come, first served:
// golang.org/x/sync/semaphore's weighted semaphore) up to the limiter's wait, then fails with
// ErrHashBusy without hashing: memory stays within the budget (plus the garbage collector's
// headroom) however many requests arrive.
//
// A HashLimiter is safe for concurrent use.
type HashLimiter struct {
	budget int64 // KiB
	wait   time.Duration
	sem    *semaphore.Weighted
}

// NewHashLimiter returns a limiter for concurrency default-parameter hashes at once
// (concurrency × HashMemoryKiB of budget), whose callers wait at most wait for their turn.
// It panics if concurrency < 1 or wait < 0.
func NewHashLimiter(concurrency int, wait time.Duration) *HashLimiter {
	if concurrency < 1 || wait < 0 {
		panic("identity: new hash limiter: concurrency must be at least 1 and wait not negative")
	}
	budget := int64(concurrency) * HashMemoryKiB
	return &HashLimiter{budget: budget, wait: wait, sem: semaphore.NewWeighted(budget)}
}

// Wait is how long a computation waits for memory before ErrHashBusy.
func (l *HashLimiter) Wait() time.Duration { return l.wait }

// HashPassword is HashPassword within the limiter's budget.
func (l *HashLimiter) HashPassword(ctx context.Context, pw string) (string, error) {
	release, err := l.Acquire(ctx, argonMemory)
	if err != nil {
		return "", err
	}
	defer release()
	return HashPassword(pw)
}

// VerifyPassword is VerifyPassword within the limiter's budget, reserving the memory encoded
// asks for. A malformed encoded fails without waiting.
func (l *HashLimiter) VerifyPassword(ctx context.Context, encoded, pw string) (bool, error) {
	params, _, _, err := decodePHC(encoded)
	if err != nil {
		return false, err
	}
	release, err := l.Acquire(ctx, int64(params.memory))
	if err != nil {
		return false, err
	}
	defer release()
	return VerifyPassword(encoded, pw)
}

// VerifyDummy is VerifyDummy within the limiter's budget.
func (l *HashLimiter) VerifyDummy(ctx context.Context, pw string) error {
	release, err := l.Acquire(ctx, argonMemory)
	if err != nil {
		return err
	}
	defer release()
	VerifyDummy(pw)
	return nil
}

// Acquire reserves kib KiB of the budget (capped at the whole budget), waiting in line up to
// the limiter's wait or until ctx is done. It returns the function that frees the reservation
// (calling it again does nothing), or ErrHashBusy (wrapping ctx's error when ctx ended the wait).
func (l *HashLimiter) Acquire(ctx context.Context, kib int64) (release func(), err error) {
	n := min(max(kib, 1), l.budget)
	// TryAcquire first: free room is taken at once even with a zero wait (Acquire refuses an
	// already-expired context before it looks at the room). Both keep the line's order.
	if !l.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, l.wait)
		defer cancel()
		if err := l.sem.Acquire(wctx, n); err != nil {
			if cause := ctx.Err(); cause != nil {
				return nil, fmt.Errorf("%w: %w", ErrHashBusy, cause)
			}
			return nil, ErrHashBusy
		}
	}
	var once sync.Once
	return func() { once.Do(func() { l.sem.Release(n) }) }, nil
}
