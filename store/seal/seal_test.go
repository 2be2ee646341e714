package seal_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/seal"
)

func master(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func ring(t testing.TB, current []byte, old ...[]byte) *seal.Keyring {
	t.Helper()
	k, err := seal.NewKeyring(current, old...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustSeal(t testing.TB, k *seal.Keyring, plaintext, aad string) string {
	t.Helper()
	s, err := k.Seal([]byte(plaintext), []byte(aad))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTripAndFormat(t *testing.T) {
	k := ring(t, master(1))
	aad := "config:env_1:STRIPE_SECRET_KEY"
	for _, pt := range []string{"", `"sk_live_123"`, strings.Repeat("x", 70000)} {
		s := mustSeal(t, k, pt, aad)
		parts := strings.Split(s, ".")
		if len(parts) != 3 || parts[0] != "v1" || parts[1] != k.KeyID() {
			t.Fatalf("sealed %q: want v1.<keyID>.<body>", s)
		}
		raw, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil || len(raw) != len(pt)+seal.Overhead {
			t.Fatalf("body: %d bytes, %v; want %d", len(raw), err, len(pt)+seal.Overhead)
		}
		if strings.Contains(s, "sk_live") {
			t.Fatal("plaintext visible in the sealed value")
		}
		got, err := k.Open(s, []byte(aad))
		if err != nil || string(got) != pt {
			t.Fatalf("Open = %q, %v", got, err)
		}
		if got == nil {
			t.Fatal("Open returned nil plaintext for a success")
		}
	}
}

// TestKeyID: the id is the first 8 hex digits of SHA-256 of the derived sealing key, so it is
// not a hash of the master key (which also keys cookies) and differs from other purposes.
func TestKeyID(t *testing.T) {
	m := master(7)
	sum := sha256.Sum256(seal.DeriveKey(m, "seal"))
	want := hex.EncodeToString(sum[:4])
	k := ring(t, m)
	if k.KeyID() != want {
		t.Fatalf("KeyID = %q, want %q", k.KeyID(), want)
	}
	direct := sha256.Sum256(m)
	cookie := sha256.Sum256(seal.DeriveKey(m, "session-cookie"))
	if k.KeyID() == hex.EncodeToString(direct[:4]) || k.KeyID() == hex.EncodeToString(cookie[:4]) {
		t.Fatal("sealing key is not specific to its purpose")
	}
	if id, ok := seal.KeyIDOf(mustSeal(t, k, "x", "a")); !ok || id != want {
		t.Fatalf("KeyIDOf = %q, %v", id, ok)
	}
	if _, ok := seal.KeyIDOf("plain text"); ok {
		t.Fatal("KeyIDOf accepted a non-sealed value")
	}
}

func TestFreshNonce(t *testing.T) {
	k := ring(t, master(1))
	a, b := mustSeal(t, k, "same", "aad"), mustSeal(t, k, "same", "aad")
	if a == b {
		t.Fatal("two seals of one value are identical: nonce reused")
	}
}

// TestBoundToRow: a ciphertext copied into another row (another aad) does not open.
func TestBoundToRow(t *testing.T) {
	k := ring(t, master(1))
	s := mustSeal(t, k, `"secret"`, "config:env_a:DB_PASSWORD")
	for _, aad := range []string{"config:env_b:DB_PASSWORD", "config:env_a:OTHER", "", "config:env_a:DB_PASSWORD "} {
		if got, err := k.Open(s, []byte(aad)); !errors.Is(err, seal.ErrOpen) || got != nil {
			t.Errorf("Open with aad %q = %q, %v; want ErrOpen and no plaintext", aad, got, err)
		}
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := master(1), master(2)
	before := ring(t, oldKey)
	sealedOld := mustSeal(t, before, `{"a":1}`, "row")

	after := ring(t, newKey, oldKey)
	if after.KeyID() == before.KeyID() {
		t.Fatal("different keys share an id")
	}
	// The old key still opens what it sealed.
	if got, err := after.Open(sealedOld, []byte("row")); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("old value under the rotated ring: %q, %v", got, err)
	}
	if !after.NeedsRewrap(sealedOld) {
		t.Fatal("NeedsRewrap(old) = false")
	}
	// New seals use the new key.
	sealedNew := mustSeal(t, after, "v", "row")
	if after.NeedsRewrap(sealedNew) {
		t.Fatal("NeedsRewrap(new) = true")
	}
	if id, _ := seal.KeyIDOf(sealedNew); id != after.KeyID() {
		t.Fatalf("new seal under %q, want %q", id, after.KeyID())
	}
	// Rewrap moves an old value to the current key and keeps the plaintext.
	re, changed, err := after.Rewrap(sealedOld, []byte("row"))
	if err != nil || !changed || after.NeedsRewrap(re) {
		t.Fatalf("Rewrap = %q, %v, %v", re, changed, err)
	}
	if got, err := after.Open(re, []byte("row")); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("rewrapped: %q, %v", got, err)
	}
	if same, changed, err := after.Rewrap(sealedNew, []byte("row")); same != sealedNew || changed || err != nil {
		t.Fatalf("Rewrap of a current value = %q, %v, %v", same, changed, err)
	}
	if _, _, err := after.Rewrap(sealedOld, []byte("other row")); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("Rewrap with the wrong aad: %v", err)
	}
	// Without the old key, old values no longer open: unknown key id.
	if _, err := ring(t, newKey).Open(sealedOld, []byte("row")); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("old value without the old key: %v", err)
	}
	// The old ring cannot open values of the new key either.
	if _, err := before.Open(sealedNew, []byte("row")); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("new value under the old ring: %v", err)
	}
}

// TestRelabelledKeyID: a value whose header names another key of the ring does not open,
// because the header is part of the additional data.
func TestRelabelledKeyID(t *testing.T) {
	a, b := master(1), master(2)
	k := ring(t, a, b)
	s := mustSeal(t, k, "v", "row")
	other := ring(t, b).KeyID()
	relabelled := strings.Replace(s, k.KeyID(), other, 1)
	if _, err := k.Open(relabelled, []byte("row")); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("relabelled value: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	k := ring(t, master(1))
	good := mustSeal(t, k, "value", "row")
	body := good[len("v1.")+seal.KeyIDLen+1:]
	for name, s := range map[string]string{
		"empty":            "",
		"plaintext":        `"value"`,
		"no body":          "v1." + k.KeyID() + ".",
		"short body":       "v1." + k.KeyID() + ".AAAA",
		"v2":               "v2" + good[2:],
		"upper-case id":    "v1." + strings.ToUpper(k.KeyID()) + "." + body,
		"short id":         "v1.abc." + body,
		"padded":           good + "==",
		"std base64":       "v1." + k.KeyID() + "." + strings.NewReplacer("-", "+", "_", "/").Replace(body) + "+",
		"newline in body":  good[:20] + "\n" + good[20:],
		"trailing garbage": good + ".x",
		"unknown key":      "v1.00000000." + body,
		"truncated":        good[:len(good)-1],
	} {
		if got, err := k.Open(s, []byte("row")); !errors.Is(err, seal.ErrOpen) || got != nil {
			t.Errorf("%s: Open = %q, %v; want ErrOpen", name, got, err)
		}
		if !k.NeedsRewrap(s) && s != good {
			if id, ok := seal.KeyIDOf(s); !ok || id != k.KeyID() {
				t.Errorf("%s: NeedsRewrap false for a value not under the current key", name)
			}
		}
	}
}

// TestFlippedBytes: altering any single character of a sealed value makes Open fail.
func TestFlippedBytes(t *testing.T) {
	k := ring(t, master(1))
	good := mustSeal(t, k, `"hunter2"`, "row")
	for i := range len(good) {
		for _, c := range []byte{'A', 'z', '0', '-', '_', '.', 0, 0xff} {
			if good[i] == c {
				continue
			}
			b := []byte(good)
			b[i] = c
			if _, err := k.Open(string(b), []byte("row")); err == nil {
				t.Fatalf("byte %d set to %q: Open succeeded", i, c)
			}
		}
	}
}

func TestNewKeyring(t *testing.T) {
	if _, err := seal.NewKeyring(make([]byte, 16)); err == nil {
		t.Error("16-byte master key accepted")
	}
	if _, err := seal.NewKeyring(master(1), make([]byte, 31)); err == nil {
		t.Error("short old key accepted")
	}
	// The current key repeated among the old ones is harmless.
	k := ring(t, master(1), master(1), master(2), master(2))
	if got, err := k.Open(mustSeal(t, ring(t, master(2)), "x", "a"), []byte("a")); err != nil || string(got) != "x" {
		t.Fatalf("duplicate keys: %q, %v", got, err)
	}
}

// FuzzOpen: Open never panics on any input, and never accepts a mutation of a sealed value:
// after setting one byte of a fresh seal, Open fails unless the byte was unchanged.
func FuzzOpen(f *testing.F) {
	k := ring(f, master(1), master(2))
	// seed is `"seed"` sealed under master(1) with aad "row": a constant, because fuzz workers
	// are separate processes and must agree on it.
	const seed = "v1.22e295e5.c5vwUhjpL3DmUFebFAHB1byKpXs1IC486Gh4mztCOfY-fA"
	if got, err := k.Open(seed, []byte("row")); err != nil || string(got) != `"seed"` {
		f.Fatalf("seed: %q, %v", got, err)
	}
	f.Add([]byte(`"seed"`), []byte("row"), uint16(0), byte('x'), seed)
	f.Add([]byte{}, []byte{}, uint16(40), byte(0), "v1.")
	f.Add([]byte(`{"a":[1,2]}`), []byte("config:env:KEY"), uint16(11), byte('.'), "v1.00000000.AAAA")
	f.Add([]byte("x"), []byte("y"), uint16(65535), byte(0xff), "")
	f.Fuzz(func(t *testing.T, plaintext, aad []byte, pos uint16, b byte, raw string) {
		// Arbitrary input: no panic, and never a success without the right aad.
		if got, err := k.Open(raw, aad); err == nil {
			// Only a value truly sealed by this ring opens (the fuzzer cannot forge one): the
			// seed, with its own aad.
			if raw != seed || string(aad) != "row" || string(got) != `"seed"` {
				t.Fatalf("arbitrary input %q opened to %q", raw, got)
			}
		} else if got != nil {
			t.Fatalf("failure returned plaintext %q", got)
		}
		_ = k.NeedsRewrap(raw)
		_, _ = seal.KeyIDOf(raw)

		sealed, err := k.Seal(plaintext, aad)
		if err != nil {
			t.Fatal(err)
		}
		mutated := []byte(sealed)
		mutated[int(pos)%len(mutated)] = b
		got, err := k.Open(string(mutated), aad)
		if string(mutated) == sealed {
			if err != nil || !bytes.Equal(got, plaintext) {
				t.Fatalf("unmutated value: %q, %v", got, err)
			}
			return
		}
		if err == nil || got != nil {
			t.Fatalf("mutated value (byte %d = %q) opened: %q, %v", int(pos)%len(mutated), b, got, err)
		}
		if !errors.Is(err, seal.ErrOpen) {
			t.Fatalf("error %v is not ErrOpen", err)
		}
	})
}
