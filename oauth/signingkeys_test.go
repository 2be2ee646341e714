package oauth_test

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v3"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func testRing(t testing.TB, b byte) *seal.Keyring {
	t.Helper()
	r, err := seal.NewKeyring(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// kids returns the kid of every key of a JWKS, in order.
func kids(t *testing.T, ks *oauth.KeySet) string {
	t.Helper()
	set, err := ks.JWKS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range set.Keys {
		ids = append(ids, k.KeyID)
	}
	return strings.Join(ids, ",")
}

func currentID(t *testing.T, ks *oauth.KeySet) string {
	t.Helper()
	k, err := ks.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

// TestSigningKeyTimeline drives a rotation with an injected clock: the next key is published
// before it signs, and the old key stays published for a token lifetime plus clock skew after
// it stops signing.
func TestSigningKeyTimeline(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			t0 := time.Date(2031, 3, 4, 10, 0, 0, 0, time.UTC)
			clk := storetest.NewClock(t0)
			ks := oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{Now: clk.Now})
			// A replica with the default cache, on the same clock.
			replica := oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{Now: clk.Now})

			if got := kids(t, ks); got != "" {
				t.Fatalf("JWKS of an empty database: %q", got)
			}
			first, err := ks.Ensure(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !first.ActivatesAt.Equal(t0) || first.RetiresAt != nil || first.Key.(*rsa.PrivateKey).N.BitLen() != 2048 || !strings.HasPrefix(first.ID, "sig_") {
				t.Fatalf("first key: id %s, activates %v, retires %v, %d bits", first.ID, first.ActivatesAt, first.RetiresAt, first.Key.(*rsa.PrivateKey).N.BitLen())
			}
			if again, err := ks.Ensure(ctx); err != nil || again.ID != first.ID {
				t.Fatalf("second Ensure: %s, %v", again.ID, err)
			}
			a := first.ID
			if got := currentID(t, replica); got != a || kids(t, replica) != a {
				t.Fatalf("replica: current %s, JWKS %s", got, kids(t, replica))
			}

			// Rotate 10 minutes in, with the default publish delay of 1 h.
			clk.Set(t0.Add(10 * time.Minute))
			rot, err := ks.Rotate(ctx, oauth.DefaultPublishDelay)
			if err != nil {
				t.Fatal(err)
			}
			bID := rot.KeyID
			wantActivation := time.Date(2031, 3, 4, 11, 10, 0, 0, time.UTC) // t0 + 10 min + 1 h
			wantRetirement := time.Date(2031, 3, 4, 12, 15, 0, 0, time.UTC) // + 1 h tokens + 5 min skew
			if bID == a || rot.RetiredKeyID != a || !rot.ActivatesAt.Equal(wantActivation) || !rot.RetiresAt.Equal(wantRetirement) {
				t.Fatalf("rotation: %+v", rot)
			}
			// Published before it signs: the old key signs, both are in the JWKS, new first.
			if got := currentID(t, ks); got != a {
				t.Errorf("after rotate: %s signs, want the old key %s", got, a)
			}
			if got := kids(t, ks); got != bID+","+a {
				t.Errorf("after rotate: JWKS %s, want %s,%s", got, bID, a)
			}
			// Another rotation before the new key signs is refused and changes nothing.
			if _, err := ks.Rotate(ctx, oauth.DefaultPublishDelay); !errors.Is(err, oauth.ErrRotationPending) {
				t.Errorf("second rotation while pending: %v", err)
			}
			// The replica's cache (1 min) still holds one key; past its TTL it sees both.
			clk.Set(t0.Add(11 * time.Minute))
			if got := kids(t, replica); got != bID+","+a {
				t.Errorf("replica after its cache TTL: JWKS %s", got)
			}

			for _, step := range []struct {
				at                 time.Time
				signs, jwks, label string
			}{
				{at: wantActivation.Add(-time.Microsecond), signs: a, jwks: bID + "," + a, label: "just before activation"},
				{at: wantActivation, signs: bID, jwks: bID + "," + a, label: "at activation"},
				{at: wantRetirement.Add(-time.Microsecond), signs: bID, jwks: bID + "," + a, label: "just before retirement"},
				{at: wantRetirement, signs: bID, jwks: bID, label: "at retirement"},
				{at: wantRetirement.Add(30 * 24 * time.Hour), signs: bID, jwks: bID, label: "a month on"},
			} {
				clk.Set(step.at)
				for name, k := range map[string]*oauth.KeySet{"rotating replica": ks, "other replica": replica} {
					if got := currentID(t, k); got != step.signs {
						t.Errorf("%s, %s: %s signs, want %s", step.label, name, got, step.signs)
					}
					if got := kids(t, k); got != step.jwks {
						t.Errorf("%s, %s: JWKS %s, want %s", step.label, name, got, step.jwks)
					}
				}
			}
			// The old key's row is kept (sealed) after retirement; only the JWKS drops it.
			if all, err := st.ListSigningKeys(ctx, time.Time{}); err != nil || len(all) != 2 {
				t.Errorf("rows after retirement: %d, %v", len(all), err)
			}
		})
	}
}

// TestJWKSVerifiesCurrentToken: a JWS signed with Current's key verifies against the JWKS as
// JSON, found by the kid of its header; the JWKS carries RSA public members only.
func TestJWKSVerifiesCurrentToken(t *testing.T) {
	st := openStore(t, storetest.Backends(t)[0].URL(t))
	ks := oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{})
	ctx := context.Background()
	key, err := ks.Current(ctx) // creates the first key
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key.JSONWebKey()},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"iss":"http://localhost:8080","sub":"usr_1"}`)
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	token, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}

	set, err := ks.JWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{`"d"`, `"p"`, `"q"`, `"dp"`, `"dq"`, `"qi"`} {
		if strings.Contains(string(raw), member) {
			t.Errorf("JWKS holds private member %s: %s", member, raw)
		}
	}
	var shape struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil || len(shape.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", raw, err)
	}
	k := shape.Keys[0]
	if len(k) != 6 || k["kty"] != "RSA" || k["use"] != "sig" || k["alg"] != "RS256" || k["kid"] != key.ID || k["e"] != "AQAB" {
		t.Errorf("JWK members: %v", k)
	}
	if n, _ := k["n"].(string); n != base64.RawURLEncoding.EncodeToString(key.Key.(*rsa.PrivateKey).N.Bytes()) {
		t.Errorf("JWK n = %q", n)
	}

	var published jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &published); err != nil {
		t.Fatal(err)
	}
	parsed, err := jose.ParseSigned(token)
	if err != nil {
		t.Fatal(err)
	}
	hdr := parsed.Signatures[0].Header
	if hdr.KeyID != key.ID || hdr.Algorithm != "RS256" {
		t.Fatalf("header: kid %q alg %q", hdr.KeyID, hdr.Algorithm)
	}
	found := published.Key(hdr.KeyID)
	if len(found) != 1 || !found[0].IsPublic() {
		t.Fatalf("JWKS keys for kid %s: %d", hdr.KeyID, len(found))
	}
	got, err := parsed.Verify(found[0])
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("verify against the JWKS: %q, %v", got, err)
	}
	// A token signed by another key with the same kid does not verify.
	other, err := oauth.NewKeySet(openStore(t, storetest.Backends(t)[0].URL(t)), testRing(t, 2), oauth.KeySetOptions{}).Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256,
		Key: &jose.JSONWebKey{Key: other.Key, KeyID: key.ID}}, nil)
	fobj, _ := forged.Sign(payload)
	ftoken, _ := fobj.CompactSerialize()
	fparsed, _ := jose.ParseSigned(ftoken)
	if _, err := fparsed.Verify(found[0]); err == nil {
		t.Fatal("a token signed by another key verified")
	}
}

// TestSigningKeySealedAtRest: no plaintext private key reaches the database. The SQLite file
// (and its WAL) holds neither a PEM header nor D in raw, base64 or base64url form; the stored
// value is sealed and bound to its kid.
func TestSigningKeySealedAtRest(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			url := b.URL(t)
			st := openStore(t, url)
			ring := testRing(t, 1)
			ks := oauth.NewKeySet(st, ring, oauth.KeySetOptions{})
			key, err := ks.Ensure(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d := key.Key.(*rsa.PrivateKey).D.Bytes()
			needles := map[string][]byte{
				"PEM header":   []byte("PRIVATE KEY"),
				"D":            d,
				"base64 D":     []byte(base64.StdEncoding.EncodeToString(d)[:40]),
				"base64url D":  []byte(base64.RawURLEncoding.EncodeToString(d)[:40]),
				"first prime":  key.Key.(*rsa.PrivateKey).Primes[0].Bytes(),
				"second prime": key.Key.(*rsa.PrivateKey).Primes[1].Bytes(),
			}
			rows, err := st.ListSigningKeys(ctx, time.Time{})
			if err != nil || len(rows) != 1 {
				t.Fatalf("rows: %v, %v", rows, err)
			}
			row := rows[0]
			for name, needle := range needles {
				for col, v := range map[string]string{"private_key": row.PrivateKey, "public_key": row.PublicKey} {
					if bytes.Contains([]byte(v), needle) {
						t.Errorf("%s column holds the %s", col, name)
					}
				}
			}
			if id, ok := seal.KeyIDOf(row.PrivateKey); !ok || id != ring.KeyID() {
				t.Errorf("private_key is not sealed under the ring: %.20q", row.PrivateKey)
			}
			if _, err := ring.Open(row.PrivateKey, []byte("signing-key:"+row.ID)); err != nil {
				t.Errorf("sealed key does not open with its kid: %v", err)
			}
			if _, err := ring.Open(row.PrivateKey, []byte("signing-key:sig_other")); !errors.Is(err, seal.ErrOpen) {
				t.Errorf("sealed key opens for another kid: %v", err)
			}
			if !strings.HasPrefix(row.PublicKey, "-----BEGIN PUBLIC KEY-----") {
				t.Errorf("public_key: %.40q", row.PublicKey)
			}
			if b.Name != string(store.SQLite) {
				return
			}
			path := strings.TrimPrefix(url, "sqlite:")
			var raw []byte
			for _, f := range []string{path, path + "-wal"} {
				if data, err := os.ReadFile(f); err == nil {
					raw = append(raw, data...)
				} else if !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			if len(raw) == 0 || !bytes.Contains(raw, []byte(row.ID)) {
				t.Fatalf("the database files in %s do not hold the key row", filepath.Dir(path))
			}
			for name, needle := range needles {
				if bytes.Contains(raw, needle) {
					t.Errorf("the database file holds the %s", name)
				}
			}
		})
	}
}

// TestEnsureConcurrent: two replicas (separate store handles on one database) that find no key
// at the same time end up with one key, and both sign with it.
func TestEnsureConcurrent(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			url := b.URL(t)
			stores := []*store.Store{openStore(t, url), openStore(t, url)}
			var wg sync.WaitGroup
			got := make([]oauth.SigningKey, len(stores))
			errs := make([]error, len(stores))
			for i, st := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], errs[i] = oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{}).Ensure(context.Background())
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("replica %d: %v", i, err)
				}
			}
			rows, err := stores[0].ListSigningKeys(context.Background(), time.Time{})
			if err != nil || len(rows) != 1 {
				t.Fatalf("%d keys after concurrent Ensure (%v), want 1", len(rows), err)
			}
			if got[0].ID != rows[0].ID || got[1].ID != rows[0].ID || !got[0].Key.(*rsa.PrivateKey).Equal(got[1].Key) {
				t.Fatalf("replicas sign with %s and %s, stored %s", got[0].ID, got[1].ID, rows[0].ID)
			}
		})
	}
}

// TestSigningKeyWrongSecret: a key set whose secret key cannot open the stored private key
// refuses to sign (and never replaces the key), while the JWKS still publishes it.
func TestSigningKeyWrongSecret(t *testing.T) {
	url := storetest.Backends(t)[0].URL(t)
	st := openStore(t, url)
	ctx := context.Background()
	k, err := oauth.NewKeySet(st, testRing(t, 1), oauth.KeySetOptions{}).Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wrong := oauth.NewKeySet(st, testRing(t, 2), oauth.KeySetOptions{})
	if _, err := wrong.Current(ctx); err == nil {
		t.Fatal("Current opened a key sealed under another secret key")
	}
	if got := kids(t, wrong); got != k.ID {
		t.Fatalf("JWKS: %s", got)
	}
}
