package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runSigningKeys(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Lifecycle", func(t *testing.T) { testSigningKeyLifecycle(t, open) })
	t.Run("PerAlgorithm", func(t *testing.T) { testSigningKeyPerAlgorithm(t, open) })
	t.Run("Invalid", func(t *testing.T) { testSigningKeyInvalid(t, open) })
	t.Run("Reseal", func(t *testing.T) { testSigningKeyReseal(t, open) })
	t.Run("ConcurrentFirstKey", func(t *testing.T) { testSigningKeyConcurrentFirst(t, open) })
}

// signingKey is a key with placeholder material: the store does not interpret it.
func signingKey(id string, activates time.Time) *store.SigningKey {
	return &store.SigningKey{
		ID: id, Algorithm: "RS256", PrivateKey: "v1.0000000a.sealed-" + id,
		PublicKey: "-----BEGIN PUBLIC KEY-----\n" + id + "\n-----END PUBLIC KEY-----\n", ActivatesAt: activates,
	}
}

func signingKeyIDs(keys []store.SigningKey) string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return strings.Join(ids, ",")
}

func testSigningKeyLifecycle(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

	if keys, err := s.ListSigningKeys(ctx, time.Time{}); err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("empty list: %v, %v", keys, err)
	}
	a := signingKey("sig_a", t0)
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateSigningKey(ctx, a) })
	if a.CreatedAt.IsZero() || !a.ActivatesAt.Equal(t0.Truncate(time.Microsecond)) {
		t.Fatalf("created: %+v", a)
	}
	// A second key not scheduled for retirement collides with the first.
	wantErr(t, s, store.ErrConflict, "second unretired key", func(tx *store.Tx) error {
		return tx.CreateSigningKey(ctx, signingKey("sig_b", t0.Add(time.Hour)))
	})

	// Rotation: retire a, then add b, in one transaction.
	retire := t0.Add(2*time.Hour + 5*time.Minute)
	b := signingKey("sig_b", t0.Add(time.Hour))
	mustTx(t, s, func(tx *store.Tx) error {
		n, err := tx.RetireSigningKeys(ctx, retire)
		if err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("retired %d keys, want 1", n)
		}
		return tx.CreateSigningKey(ctx, b)
	})
	all, err := s.ListSigningKeys(ctx, time.Time{})
	if err != nil || signingKeyIDs(all) != "sig_b,sig_a" {
		t.Fatalf("list all: %s, %v", signingKeyIDs(all), err)
	}
	got := all[1]
	if got.Algorithm != "RS256" || got.PrivateKey != a.PrivateKey || got.PublicKey != a.PublicKey ||
		!got.CreatedAt.Equal(a.CreatedAt) || !got.ActivatesAt.Equal(a.ActivatesAt) ||
		got.RetiresAt == nil || !got.RetiresAt.Equal(retire.Truncate(time.Microsecond)) {
		t.Errorf("sig_a read back: %+v", got)
	}
	if all[0].RetiresAt != nil {
		t.Errorf("sig_b retires at %v, want nil", all[0].RetiresAt)
	}
	// At a time before a's retirement both are listed; at and after it only b.
	for at, want := range map[time.Time]string{
		t0:                            "sig_b,sig_a",
		retire.Add(-time.Microsecond): "sig_b,sig_a",
		retire:                        "sig_b",
		retire.Add(time.Hour):         "sig_b",
	} {
		if keys, err := s.ListSigningKeys(ctx, at); err != nil || signingKeyIDs(keys) != want {
			t.Errorf("list at %v: %s, %v; want %s", at, signingKeyIDs(keys), err, want)
		}
	}
	// Retiring again leaves a's time alone and schedules only b.
	mustTx(t, s, func(tx *store.Tx) error {
		n, err := tx.RetireSigningKeys(ctx, t0.Add(10*time.Hour))
		if n != 1 {
			t.Errorf("second retirement scheduled %d keys, want 1", n)
		}
		return err
	})
	all, _ = s.ListSigningKeys(ctx, time.Time{})
	if len(all) != 2 || !all[1].RetiresAt.Equal(retire.Truncate(time.Microsecond)) || !all[0].RetiresAt.Equal(t0.Add(10*time.Hour).Truncate(time.Microsecond)) {
		t.Errorf("after second retirement: %+v", all)
	}
	// With no unretired key left, a new one may be created; ids stay unique.
	wantErr(t, s, store.ErrConflict, "duplicate id", func(tx *store.Tx) error {
		return tx.CreateSigningKey(ctx, signingKey("sig_a", t0.Add(20*time.Hour)))
	})
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateSigningKey(ctx, signingKey("sig_c", time.Time{})) })

	// ES256 and EdDSA keys are stored and read back with their algorithm (migration 0030).
	for _, alg := range []string{"ES256", "EdDSA"} {
		k := signingKey("sig_"+alg, t0.Add(30*time.Hour))
		k.Algorithm = alg
		mustTx(t, s, func(tx *store.Tx) error {
			if _, err := tx.RetireSigningKeys(ctx, t0.Add(40*time.Hour)); err != nil {
				return err
			}
			return tx.CreateSigningKey(ctx, k)
		})
	}
	all, _ = s.ListSigningKeys(ctx, time.Time{})
	algs := map[string]string{}
	for _, k := range all {
		algs[k.ID] = k.Algorithm
	}
	if algs["sig_ES256"] != "ES256" || algs["sig_EdDSA"] != "EdDSA" || algs["sig_c"] != "RS256" {
		t.Errorf("algorithms read back: %v", algs)
	}
}

func testSigningKeyInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	before := t0.Add(-time.Second)
	for name, k := range map[string]*store.SigningKey{
		"no id":            {Algorithm: "RS256", PrivateKey: "v1.0000000a.x", PublicKey: "p"},
		"no private key":   {ID: "sig_x", Algorithm: "RS256", PublicKey: "p"},
		"no public key":    {ID: "sig_x", Algorithm: "RS256", PrivateKey: "v1.0000000a.x"},
		"HS256":            {ID: "sig_x", Algorithm: "HS256", PrivateKey: "v1.0000000a.x", PublicKey: "p"},
		"lower-case es256": {ID: "sig_x", Algorithm: "es256", PrivateKey: "v1.0000000a.x", PublicKey: "p"},
		"no algorithm":     {ID: "sig_x", PrivateKey: "v1.0000000a.x", PublicKey: "p"},
		"unsealed":         {ID: "sig_x", Algorithm: "RS256", PrivateKey: "-----BEGIN PRIVATE KEY-----", PublicKey: "p"},
		"retires at start": {ID: "sig_x", Algorithm: "RS256", PrivateKey: "v1.0000000a.x", PublicKey: "p", ActivatesAt: t0, RetiresAt: &t0},
		"retires before":   {ID: "sig_x", Algorithm: "RS256", PrivateKey: "v1.0000000a.x", PublicKey: "p", ActivatesAt: t0, RetiresAt: &before},
	} {
		wantErr(t, s, store.ErrInvalid, name, func(tx *store.Tx) error { return tx.CreateSigningKey(ctx, k) })
	}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateSigningKey(ctx, signingKey("sig_a", t0)) })
	wantErr(t, s, store.ErrInvalid, "retire before activation", func(tx *store.Tx) error {
		_, err := tx.RetireSigningKeys(ctx, t0)
		return err
	})
	if keys, _ := s.ListSigningKeys(ctx, time.Time{}); len(keys) != 1 || keys[0].RetiresAt != nil {
		t.Errorf("after refused retirement: %+v", keys)
	}
}

// testSigningKeyReseal: ResealValues hands out every signing key's sealed private key, bound to
// "signing-key:<id>", after the config values, and stores replacements.
func testSigningKeyReseal(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	retire := t0.Add(time.Hour)
	a := signingKey("sig_a", t0)
	a.RetiresAt = &retire
	b := signingKey("sig_b", t0.Add(time.Minute))
	mustTx(t, s, func(tx *store.Tx) error {
		if err := tx.CreateSigningKey(ctx, a); err != nil {
			return err
		}
		return tx.CreateSigningKey(ctx, b)
	})
	var seen []string
	mustTx(t, s, func(tx *store.Tx) error {
		n, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			seen = append(seen, v.Table+" "+v.ID+" "+string(v.AAD)+" "+v.Sealed)
			if v.ID == "sig_a" {
				return "v1.0000000b.resealed", true, nil
			}
			return v.Sealed, false, nil
		})
		if n != 1 {
			t.Errorf("replaced %d, want 1", n)
		}
		return err
	})
	want := "signing_keys sig_a signing-key:sig_a v1.0000000a.sealed-sig_a|" +
		"signing_keys sig_b signing-key:sig_b v1.0000000a.sealed-sig_b"
	if got := strings.Join(seen, "|"); got != want {
		t.Errorf("ResealValues saw\n%s\nwant\n%s", got, want)
	}
	keys, _ := s.ListSigningKeys(ctx, time.Time{})
	if len(keys) != 2 || keys[1].ID != "sig_a" || keys[1].PrivateKey != "v1.0000000b.resealed" || keys[0].PrivateKey != b.PrivateKey {
		t.Errorf("after reseal: %+v", keys)
	}
	if !keys[1].RetiresAt.Equal(retire) || !keys[1].ActivatesAt.Equal(t0) {
		t.Errorf("reseal changed the timeline: %+v", keys[1])
	}
	for _, bad := range []string{"-----BEGIN PRIVATE KEY-----", `"x"`, ""} {
		wantErr(t, s, store.ErrInvalid, "reseal to "+bad, func(tx *store.Tx) error {
			_, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) { return bad, true, nil })
			return err
		})
	}
}

// testSigningKeyConcurrentFirstKey: replicas that each look for an unretired key and create one
// when there is none, at the same time, end up with exactly one key; the others see
// ErrConflict (or, serialised, find the winner's key).
func testSigningKeyConcurrentFirst(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	created := make([]bool, n)
	start := make(chan struct{})
	// Every replica waits, inside its transaction and after its check, until all have checked
	// (PostgreSQL) or a moment has passed (SQLite, whose writers take turns).
	var listed sync.WaitGroup
	listed.Add(n)
	allListed := make(chan struct{})
	go func() { listed.Wait(); close(allListed) }()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			first := true
			errs[i] = s.InTx(ctx, func(tx *store.Tx) error {
				keys, err := tx.ListSigningKeys(ctx, time.Now())
				if first {
					first = false
					listed.Done()
				}
				if err != nil || len(keys) > 0 {
					return err
				}
				select {
				case <-allListed:
				case <-time.After(200 * time.Millisecond):
				}
				created[i] = true
				return tx.CreateSigningKey(ctx, signingKey(store.NewID("sig"), time.Time{}))
			})
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil && created[i]:
			wins++
		case err != nil && !errors.Is(err, store.ErrConflict):
			t.Errorf("replica %d: %v", i, err)
		}
	}
	keys, err := s.ListSigningKeys(ctx, time.Time{})
	if err != nil || len(keys) != 1 || wins != 1 {
		t.Fatalf("%d keys (%v), %d successful creations; want exactly 1", len(keys), err, wins)
	}
}

// testSigningKeyPerAlgorithm: each algorithm has its own key not scheduled for retirement, and
// RetireSigningKeys with algorithms schedules only theirs.
func testSigningKeyPerAlgorithm(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	t0 := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
	es := func(id string, at time.Time) *store.SigningKey {
		k := signingKey(id, at)
		k.Algorithm = "ES256"
		return k
	}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateSigningKey(ctx, signingKey("sig_rs", t0)) })
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateSigningKey(ctx, es("sig_es", t0)) })
	wantErr(t, s, store.ErrConflict, "second unretired ES256 key", func(tx *store.Tx) error {
		return tx.CreateSigningKey(ctx, es("sig_es2", t0.Add(time.Hour)))
	})
	mustTx(t, s, func(tx *store.Tx) error {
		n, err := tx.RetireSigningKeys(ctx, t0.Add(3*time.Hour), "ES256")
		if n != 1 {
			t.Errorf("retired %d ES256 keys, want 1", n)
		}
		if err != nil {
			return err
		}
		return tx.CreateSigningKey(ctx, es("sig_es2", t0.Add(time.Hour)))
	})
	all, err := s.ListSigningKeys(ctx, time.Time{})
	if err != nil || signingKeyIDs(all) != "sig_es2,sig_rs,sig_es" {
		t.Fatalf("list: %s, %v", signingKeyIDs(all), err)
	}
	for _, k := range all {
		if (k.ID == "sig_es") != (k.RetiresAt != nil) {
			t.Errorf("%s retires at %v; want only sig_es scheduled", k.ID, k.RetiresAt)
		}
	}
}
