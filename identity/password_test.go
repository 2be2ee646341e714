package identity

import (
	"context"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

func TestHashPasswordFormat(t *testing.T) {
	h, err := HashPassword("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	phc := regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$([A-Za-z0-9+/]{22})\$([A-Za-z0-9+/]{43})$`)
	m := phc.FindStringSubmatch(h)
	if m == nil {
		t.Fatalf("HashPassword = %q, want $argon2id$v=19$m=19456,t=2,p=1$<22>$<43>", h)
	}
	// Independent recomputation with the parameters of the string.
	salt, _ := base64.RawStdEncoding.DecodeString(m[1])
	key := argon2.IDKey([]byte("correct horse battery staple"), salt, 2, 19456, 1, 32)
	if got := base64.RawStdEncoding.EncodeToString(key); got != m[2] {
		t.Errorf("key = %s, want %s", m[2], got)
	}

	other, err := HashPassword("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	if other == h {
		t.Error("two hashes of one password are equal: salt not random")
	}
}

func TestVerifyPassword(t *testing.T) {
	h, err := HashPassword("s3cret-pässword")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pw   string
		want bool
	}{
		{"s3cret-pässword", true},
		{"s3cret-pa\u0308ssword", true}, // decomposed ä: NFKC composes it
		{"s3cret-passwort", false},
		{"", false},
		{"S3cret-pässword", false},
	} {
		ok, err := VerifyPassword(h, tc.pw)
		if err != nil || ok != tc.want {
			t.Errorf("VerifyPassword(%q) = %v, %v; want %v", tc.pw, ok, err, tc.want)
		}
	}
}

// TestVerifyPasswordParams: parameters come from the string, not from the
// current defaults.
func TestVerifyPasswordParams(t *testing.T) {
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte("pw"), salt, 1, 64, 2, 24)
	h := "$argon2id$v=19$m=64,t=1,p=2$" + base64.RawStdEncoding.EncodeToString(salt) + "$" + base64.RawStdEncoding.EncodeToString(key)
	if ok, err := VerifyPassword(h, "pw"); !ok || err != nil {
		t.Errorf("VerifyPassword(custom params) = %v, %v; want true", ok, err)
	}
	if ok, err := VerifyPassword(h, "px"); ok || err != nil {
		t.Errorf("VerifyPassword(custom params, wrong) = %v, %v; want false, nil", ok, err)
	}
}

func TestVerifyPasswordMalformed(t *testing.T) {
	good, err := HashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, "$")
	salt, key := parts[4], parts[5]
	for _, h := range []string{
		"",
		"plain",
		"$argon2id$",
		"$argon2i$v=19$m=19456,t=2,p=1$" + salt + "$" + key,
		"$argon2id$v=16$m=19456,t=2,p=1$" + salt + "$" + key,
		"$argon2id$m=19456,t=2,p=1$" + salt + "$" + key,
		"$argon2id$v=19$t=2,m=19456,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=2$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=0,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=2,p=0$" + salt + "$" + key,
		"$argon2id$v=19$m=-1,t=2,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=4194304,t=2,p=1$" + salt + "$" + key, // 4 GiB
		"$argon2id$v=19$m=19456,t=1000,p=1$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=2,p=256$" + salt + "$" + key,
		"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "==$" + key,
		"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key + "$",
		"$argon2id$v=19$m=19456,t=2,p=1$$" + key,
		"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$",
		"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key[:10],
		"$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$!" + key[1:],
		"x$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key,
	} {
		ok, err := VerifyPassword(h, "pw")
		if ok || !errors.Is(err, ErrMalformedHash) {
			t.Errorf("VerifyPassword(%q) = %v, %v; want false, ErrMalformedHash", h, ok, err)
		}
	}
}

func TestDummyHash(t *testing.T) {
	params, salt, key, err := decodePHC(dummyHash)
	if err != nil {
		t.Fatalf("dummy hash %q: %v", dummyHash, err)
	}
	if params != defaultArgonParams || len(salt) != argonSaltLen || len(key) != argonKeyLen {
		t.Errorf("dummy hash %q: params %+v, salt %d, key %d bytes; want the defaults", dummyHash, params, len(salt), len(key))
	}
	VerifyDummy("anything") // must not panic
}

func BenchmarkVerifyPassword(b *testing.B) {
	h, err := HashPassword("benchmark password")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_, _ = VerifyPassword(h, "benchmark password")
	}
}

func BenchmarkVerifyDummy(b *testing.B) {
	for b.Loop() {
		VerifyDummy("benchmark password")
	}
}

func TestHashLimiter(t *testing.T) {
	ctx := context.Background()
	l := NewHashLimiter(2, 50*time.Millisecond)
	r1, err := l.Acquire(ctx, HashMemoryKiB)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire(ctx, HashMemoryKiB)
	if err != nil {
		t.Fatal(err)
	}
	// The budget is used: the next one waits its 50 ms and gives up, without hashing.
	start := time.Now()
	if _, err := l.HashPassword(ctx, "pw"); !errors.Is(err, ErrHashBusy) {
		t.Fatalf("HashPassword at capacity = %v, want ErrHashBusy", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > time.Second {
		t.Errorf("gave up after %v, want about 50ms", took)
	}
	if ok, err := l.VerifyPassword(ctx, dummyHash, "pw"); ok || !errors.Is(err, ErrHashBusy) {
		t.Errorf("VerifyPassword at capacity = %v, %v", ok, err)
	}
	// A malformed hash fails at once, whatever the capacity.
	if _, err := l.VerifyPassword(ctx, "nope", "pw"); !errors.Is(err, ErrMalformedHash) {
		t.Errorf("malformed: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.VerifyDummy(cctx, "pw"); !errors.Is(err, ErrHashBusy) || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled wait = %v", err)
	}

	// A waiter gets the memory freed while it waits.
	wl := NewHashLimiter(1, 5*time.Second)
	hold, _ := wl.Acquire(ctx, HashMemoryKiB)
	done := make(chan error)
	go func() { _, err := wl.HashPassword(ctx, "pw"); done <- err }()
	time.Sleep(20 * time.Millisecond)
	hold()
	hold() // idempotent: frees once
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// A hash asking for more than the budget runs alone rather than never.
	if release, err := wl.Acquire(ctx, 1<<20); err != nil {
		t.Errorf("oversized: %v", err)
	} else {
		release()
	}
	r1()
	r2()
	if h, err := l.HashPassword(ctx, "pw"); err != nil || h == "" {
		t.Errorf("after release: %q, %v", h, err)
	}
}
