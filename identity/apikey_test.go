package identity

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// apiKeyShape is the spec's ApiKeySecret pattern.
var apiKeyShape = regexp.MustCompile(`^svc_sk_[A-Za-z0-9]{12}_[A-Za-z0-9_-]{43}$`)

func mustNewAPIKey(t testing.TB) (publicID, secret, full string) {
	t.Helper()
	publicID, secret, full, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	return publicID, secret, full
}

func TestNewAPIKey(t *testing.T) {
	const n = 2000
	seenKeys := map[string]bool{}
	seenIDs := map[string]bool{}
	counts := map[rune]int{}
	underscores := 0
	for range n {
		publicID, secret, full := mustNewAPIKey(t)
		if !apiKeyShape.MatchString(full) || len(full) != APIKeyLen {
			t.Fatalf("key %q does not have the svc_sk_<12>_<43> shape", full)
		}
		if full != "svc_sk_"+publicID+"_"+secret {
			t.Fatalf("full %q is not svc_sk_%s_%s", full, publicID, secret)
		}
		raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
		if err != nil || len(raw) != 32 {
			t.Fatalf("secret %q decodes to %d bytes, %v; want 32", secret, len(raw), err)
		}
		gotID, gotSecret, ok := ParseAPIKey(full)
		if !ok || gotID != publicID || gotSecret != secret {
			t.Fatalf("ParseAPIKey(%q) = %q, %q, %v", full, gotID, gotSecret, ok)
		}
		if seenKeys[full] || seenIDs[publicID] {
			t.Fatalf("duplicate key or public id after %d keys", len(seenKeys))
		}
		seenKeys[full], seenIDs[publicID] = true, true
		for _, c := range publicID {
			counts[c]++
		}
		underscores += strings.Count(secret, "_")
	}
	// Every base62 character shows up, none wildly more often than the others (24,000 draws,
	// about 387 each): a crude check that no modulo bias or alphabet slip crept in.
	if len(counts) != 62 {
		t.Errorf("public ids use %d distinct characters, want 62", len(counts))
	}
	for c, k := range counts {
		if k < 250 || k > 550 {
			t.Errorf("character %q drawn %d times of %d, want about %d", c, k, n*12, n*12/62)
		}
	}
	// Secrets do contain '_' (so parsing by splitting would break); about 2,700 expected.
	if underscores == 0 {
		t.Error("no secret contained '_' in 2000 keys")
	}
}

func TestParseAPIKey(t *testing.T) {
	publicID, secret, valid := mustNewAPIKey(t)
	tricky := "svc_sk_Ab3dE6gH9jK2_" + "__________________________________________A" // '_' everywhere in the secret
	cases := []struct {
		name, key string
		ok        bool
	}{
		{"minted", valid, true},
		{"secret full of underscores", tricky, true},
		{"spec example", "svc_sk_Ab3dE6gH9jK2_3q2-7wEJ0eQpXbV_lY9tKfA1sR8mN4cZ6uH5gD0iW7o", true},
		{"empty", "", false},
		{"prefix only", "svc_sk_", false},
		{"one short", valid[:len(valid)-1], false},
		{"one long", valid + "A", false},
		{"padded", valid[:len(valid)-1] + "=", false},
		{"wrong prefix", "svc_pk_" + valid[7:], false},
		{"upper-case prefix", "SVC_SK_" + valid[7:], false},
		{"separator not underscore", valid[:19] + "-" + valid[20:], false},
		{"public id with underscore", valid[:7] + "_" + valid[8:], false},
		{"public id with dash", valid[:7] + "-" + valid[8:], false},
		{"secret with plus", valid[:20] + "+" + valid[21:], false},
		{"secret with slash", valid[:20] + "/" + valid[21:], false},
		{"secret with space", valid[:20] + " " + valid[21:], false},
		{"secret with NUL", valid[:20] + "\x00" + valid[21:], false},
		// 43 characters carry 258 bits for 32 bytes: the last one must leave the 2 spare bits zero.
		{"non-canonical last character", valid[:62] + "B", false},
		{"non-canonical spec example", "svc_sk_Zx8cV7bN6mL5_Qw3eR5tY7uI9oP1aS3dF5gH7jK9lZ1xC3vB5nM7qW9e", false},
		{"multi-byte rune", valid[:30] + "é" + valid[32:], false},
		{"whitespace around", " " + valid[:62], false},
		{"split shape 12/42", "svc_sk_" + publicID + "_" + secret[:42], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, sec, ok := ParseAPIKey(c.key)
			if ok != c.ok {
				t.Fatalf("ParseAPIKey(%q) ok = %v, want %v", c.key, ok, c.ok)
			}
			if !ok && (id != "" || sec != "") {
				t.Errorf("rejected key returned %q, %q", id, sec)
			}
			if ok && "svc_sk_"+id+"_"+sec != c.key {
				t.Errorf("parts %q, %q do not rebuild %q", id, sec, c.key)
			}
		})
	}
}

func TestParseAPIKeyAllocations(t *testing.T) {
	_, _, valid := mustNewAPIKey(t)
	bad := valid[:62] + "!"
	allocs := testing.AllocsPerRun(100, func() {
		_, _, _ = ParseAPIKey(valid)
		_, _, _ = ParseAPIKey(bad)
	})
	if allocs != 0 {
		t.Errorf("ParseAPIKey allocates %.0f times per call pair, want 0", allocs)
	}
}

func TestHashAPIKeySecret(t *testing.T) {
	pepper := []byte("0123456789abcdef0123456789abcdef")
	_, secret, _ := mustNewAPIKey(t)
	sum := HashAPIKeySecret(pepper, secret)

	m := hmac.New(sha256.New, pepper)
	m.Write([]byte(secret))
	if want := m.Sum(nil); !bytes.Equal(sum, want) || len(sum) != 32 {
		t.Fatalf("HashAPIKeySecret = %x, want HMAC-SHA256 %x", sum, want)
	}
	if !bytes.Equal(HashAPIKeySecret(pepper, secret), sum) {
		t.Error("HashAPIKeySecret is not deterministic")
	}
	plain := sha256.Sum256([]byte(secret))
	if bytes.Equal(sum, plain[:]) {
		t.Error("hash ignores the pepper")
	}
	if bytes.Equal(HashAPIKeySecret([]byte("another pepper, also 32 bytes..."), secret), sum) {
		t.Error("hash does not depend on the pepper")
	}
	flipped := []byte(secret)
	flipped[0] ^= 1
	if hmac.Equal(HashAPIKeySecret(pepper, string(flipped)), sum) {
		t.Error("another secret hashes the same")
	}
}

// FuzzParseAPIKey: ParseAPIKey never panics; what it accepts has exactly the documented shape,
// splits into parts that rebuild the input, and carries a secret that is the canonical
// encoding of 32 bytes. A single-byte mutation of a valid key is rejected or still exactly
// well-formed.
func FuzzParseAPIKey(f *testing.F) {
	_, _, minted := mustNewAPIKey(f)
	for _, seed := range []string{
		minted,
		"svc_sk_Ab3dE6gH9jK2_3q2-7wEJ0eQpXbV_lY9tKfA1sR8mN4cZ6uH5gD0iW7o",
		"svc_sk_Zx8cV7bN6mL5_Qw3eR5tY7uI9oP1aS3dF5gH7jK9lZ1xC3vB5nM7qW9e",
		"svc_sk_abcdefghijkl_" + strings.Repeat("a", 43),
		"svc_sk_abcdefghijkl_" + strings.Repeat("_", 43),
		"", "svc_sk_", "svc_sk__", strings.Repeat("_", 63), "svc_sk_" + strings.Repeat("é", 28),
	} {
		f.Add(seed, uint8(0), byte('A'))
	}
	f.Add(minted, uint8(19), byte('-'))
	f.Add(minted, uint8(62), byte('B'))
	f.Add(minted, uint8(7), byte('_'))

	base := "svc_sk_Ab3dE6gH9jK2_3q2-7wEJ0eQpXbV_lY9tKfA1sR8mN4cZ6uH5gD0iW7o"
	f.Fuzz(func(t *testing.T, s string, pos uint8, b byte) {
		checkParsed(t, s)

		mutated := []byte(base)
		i := int(pos) % len(mutated)
		mutated[i] = b
		id, sec, ok := checkParsed(t, string(mutated))
		switch {
		case b == base[i] && !ok:
			t.Fatalf("the unmutated base key was rejected")
		case ok && i != 19 && i >= 7:
			// Only the mutated part may differ from the base key's.
			if i < 19 && sec != base[20:] || i > 19 && id != base[7:19] {
				t.Fatalf("mutating byte %d changed the other part: %q %q", i, id, sec)
			}
		case ok && b != base[i] && (i < 7 || i == 19):
			t.Fatalf("mutating fixed byte %d to %q was accepted", i, b)
		}
	})
}

// checkParsed parses s and checks every property an accepted key must have.
func checkParsed(t *testing.T, s string) (id, secret string, ok bool) {
	t.Helper()
	id, secret, ok = ParseAPIKey(s)
	if !ok {
		if id != "" || secret != "" {
			t.Fatalf("ParseAPIKey(%q) rejected but returned %q, %q", s, id, secret)
		}
		return
	}
	if len(s) != 63 || !apiKeyShape.MatchString(s) || "svc_sk_"+id+"_"+secret != s || len(id) != 12 || len(secret) != 43 {
		t.Fatalf("ParseAPIKey accepted %q as %q, %q", s, id, secret)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
	if err != nil || len(raw) != 32 {
		t.Fatalf("accepted secret %q decodes to %d bytes, %v", secret, len(raw), err)
	}
	if again := base64.RawURLEncoding.EncodeToString(raw); again != secret {
		t.Fatalf("accepted secret %q is not canonical (re-encodes to %q)", secret, again)
	}
	return id, secret, ok
}

func BenchmarkParseAPIKey(b *testing.B) {
	_, _, key := mustNewAPIKey(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := ParseAPIKey(key); !ok {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkHashAPIKeySecret(b *testing.B) {
	_, secret, _ := mustNewAPIKey(b)
	pepper := seal.DeriveKey([]byte("a 32-byte master key for benches"), "api-key")
	b.ReportAllocs()
	for b.Loop() {
		HashAPIKeySecret(pepper, secret)
	}
}
