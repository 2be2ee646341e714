package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// jwksKIDs fetches the JWKS from a running server and returns its kids in order.
func jwksKIDs(t *testing.T, base string) []string {
	t.Helper()
	res, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&set) != nil {
		t.Fatalf("GET jwks: %d", res.StatusCode)
	}
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KID)
	}
	return out
}

// signingRows reads the signing_keys rows, newest activation first.
func signingRows(t *testing.T, env func(string) string) []store.SigningKey {
	t.Helper()
	st, err := store.Open(context.Background(), env("GATEHOUSE_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.ListSigningKeys(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestKeysRotateSigning: serve creates the first signing key; rotate-signing publishes the next
// one at once, lets it sign an hour later, and keeps the old one published for the token
// lifetime plus clock skew after that; a second rotation before the first activates is refused.
func TestKeysRotateSigning(t *testing.T) {
	f := newRotationFixture(t)
	keyText, key := newKey(t)
	env := f.withKeys(keyText, "")
	rotate := func(env func(string) string) (int, string) {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"keys", "rotate-signing"}, env, &stderr, nil)
		return code, stderr.String()
	}

	var first string
	serveWith(t, env, func(base string) {
		kids := jwksKIDs(t, base)
		if len(kids) != 1 {
			t.Fatalf("JWKS after start-up: %v, want one key", kids)
		}
		first = kids[0]
	})

	before := time.Now()
	code, out := rotate(env)
	after := time.Now()
	rows := signingRows(t, env)
	if code != 0 || len(rows) != 2 || rows[1].ID != first {
		t.Fatalf("rotate: exit %d, %d rows: %s", code, len(rows), out)
	}
	next, old := rows[0], rows[1]
	if next.RetiresAt != nil || old.RetiresAt == nil {
		t.Fatalf("retirements: next %v, old %v", next.RetiresAt, old.RetiresAt)
	}
	// The next key signs one hour after the rotation; the old one retires 65 minutes after that.
	if next.ActivatesAt.Before(before.Add(time.Hour).Truncate(time.Microsecond)) || next.ActivatesAt.After(after.Add(time.Hour)) {
		t.Errorf("next key activates at %v, want rotation time + 1h (%v .. %v)", next.ActivatesAt, before.Add(time.Hour), after.Add(time.Hour))
	}
	if got := old.RetiresAt.Sub(next.ActivatesAt); got != 65*time.Minute {
		t.Errorf("old key retires %v after the next key activates, want 1h5m", got)
	}
	want := regexp.MustCompile(`^gatehouse: RS256 signing key ` + next.ID + ` published; it signs from \S+; key ` + first + ` stays published until \S+\n$`)
	if !want.MatchString(out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:]) {
		t.Errorf("rotate output: %q", out)
	}
	// Published before it signs: both keys are served, the new one first, and the old one
	// still signs.
	serveWith(t, env, func(base string) {
		if kids := jwksKIDs(t, base); len(kids) != 2 || kids[0] != next.ID || kids[1] != first {
			t.Fatalf("JWKS after rotate: %v, want [%s %s]", kids, next.ID, first)
		}
	})
	if kid := currentSigningKID(t, env, key); kid != first {
		t.Errorf("%s signs right after the rotation, want the old key %s", kid, first)
	}

	// A second rotation before the first activates is refused and changes nothing.
	if code, out := rotate(env); code != 1 || !strings.Contains(out, "rotation is already pending") {
		t.Fatalf("second rotate: exit %d: %s", code, out)
	}
	if rows := signingRows(t, env); len(rows) != 2 {
		t.Fatalf("refused rotation left %d keys", len(rows))
	}
}

// TestKeysRotateSigningConfig: the publish delay comes from GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY;
// a bad value, or no secret key, is a configuration error naming the variable; on a database
// without keys the first key signs at once.
func TestKeysRotateSigningConfig(t *testing.T) {
	f := newRotationFixture(t)
	keyText, _ := newKey(t)
	with := func(delay string) func(string) string {
		base := f.withKeys(keyText, "")
		return func(k string) string {
			if k == "GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY" {
				return delay
			}
			return base(k)
		}
	}
	rotate := func(env func(string) string) (int, string) {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"keys", "rotate-signing"}, env, &stderr, nil)
		return code, stderr.String()
	}
	for _, bad := range []string{"soon", "-1h"} {
		if code, out := rotate(with(bad)); code != 2 || !strings.Contains(out, "GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY") {
			t.Errorf("delay %q: exit %d: %s", bad, code, out)
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"keys", "rotate-signing"}, testEnv(t, nil), &stderr, nil); code != 2 ||
		!strings.Contains(stderr.String(), "GATEHOUSE_SECRET_KEY") {
		t.Errorf("without a secret key: exit %d: %s", code, stderr.String())
	}

	// The fixture has never served: no key yet, so the first one signs at once.
	before := time.Now().Truncate(time.Microsecond)
	code, out := rotate(with("90m"))
	rows := signingRows(t, f.env)
	if code != 0 || len(rows) != 1 || rows[0].ActivatesAt.Before(before) || rows[0].ActivatesAt.After(time.Now()) ||
		!strings.Contains(out, "signing key "+rows[0].ID+" created; it signs from now on") {
		t.Fatalf("first rotate: exit %d, rows %+v: %s", code, rows, out)
	}
	before = time.Now().Truncate(time.Microsecond)
	if code, out := rotate(with("90m")); code != 0 {
		t.Fatalf("rotate: exit %d: %s", code, out)
	}
	rows = signingRows(t, f.env)
	if len(rows) != 2 || rows[0].ActivatesAt.Before(before.Add(90*time.Minute)) || rows[0].ActivatesAt.After(time.Now().Add(90*time.Minute)) {
		t.Fatalf("with a 90m delay: %+v", rows)
	}
	if got := rows[1].RetiresAt.Sub(rows[0].ActivatesAt); got != 65*time.Minute {
		t.Errorf("old key retires %v after activation, want 1h5m", got)
	}
}

// jwksAlgs fetches the JWKS from a running server and returns "kid alg kty" per key, in order.
func jwksAlgs(t *testing.T, base string) []string {
	t.Helper()
	res, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
			Alg string `json:"alg"`
			Kty string `json:"kty"`
			Crv string `json:"crv"`
		} `json:"keys"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&set) != nil {
		t.Fatalf("GET jwks: %d", res.StatusCode)
	}
	var out []string
	for _, k := range set.Keys {
		out = append(out, strings.TrimSpace(k.KID+" "+k.Alg+" "+k.Kty+" "+k.Crv))
	}
	return out
}

// TestKeysRotateSigningToES256: an instance that started with the default RS256 key rotates to
// ES256 with GATEHOUSE_SIGNING_ALG=ES256: the new key is an EC P-256 key published beside the
// RS256 one, which keeps signing until the new one activates; a server started with
// GATEHOUSE_SIGNING_ALG=EdDSA on a fresh database creates an Ed25519 key.
func TestKeysRotateSigningToES256(t *testing.T) {
	f := newRotationFixture(t)
	keyText, key := newKey(t)
	base := f.withKeys(keyText, "")
	with := func(alg string) func(string) string {
		return func(k string) string {
			if k == "GATEHOUSE_SIGNING_ALG" {
				return alg
			}
			return base(k)
		}
	}
	var first string
	serveWith(t, base, func(url string) {
		algs := jwksAlgs(t, url)
		if len(algs) != 1 || !strings.HasSuffix(algs[0], " RS256 RSA") {
			t.Fatalf("JWKS after start-up: %v, want one RS256 key", algs)
		}
		first = strings.Fields(algs[0])[0]
	})
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"keys", "rotate-signing"}, with("ES256"), &stderr, nil)
	rows := signingRows(t, base)
	if code != 0 || len(rows) != 2 || rows[0].Algorithm != "ES256" || rows[1].Algorithm != "RS256" || rows[1].ID != first {
		var got []string
		for _, r := range rows {
			got = append(got, r.ID+" "+r.Algorithm)
		}
		t.Fatalf("rotate to ES256: exit %d, rows %v: %s", code, got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "gatehouse: ES256 signing key "+rows[0].ID+" published; it signs from ") {
		t.Errorf("rotate output: %q", stderr.String())
	}
	serveWith(t, with("ES256"), func(url string) {
		want := []string{rows[0].ID + " ES256 EC P-256", first + " RS256 RSA"}
		if got := jwksAlgs(t, url); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("JWKS after the rotation: %v, want %v", got, want)
		}
	})
	if kid := currentSigningKID(t, base, key); kid != first {
		t.Errorf("%s signs right after the rotation, want the RS256 key %s until the ES256 key activates", kid, first)
	}

	fresh := newRotationFixture(t)
	freshText, _ := newKey(t)
	freshBase := fresh.withKeys(freshText, "")
	serveWith(t, func(k string) string {
		if k == "GATEHOUSE_SIGNING_ALG" {
			return "EdDSA"
		}
		return freshBase(k)
	}, func(url string) {
		if algs := jwksAlgs(t, url); len(algs) != 1 || !strings.HasSuffix(algs[0], " EdDSA OKP Ed25519") {
			t.Fatalf("JWKS of an EdDSA instance: %v", algs)
		}
	})
}

// TestSigningAlgUnknownExitsTwo: serve and rotate-signing refuse an algorithm they do not sign
// with (case matters, as in JWS), naming the variable, before touching the database.
func TestSigningAlgUnknownExitsTwo(t *testing.T) {
	for _, bad := range []string{"HS256", "es256", "none", "RS512", "ES384"} {
		for _, args := range [][]string{nil, {"keys", "rotate-signing"}} {
			var stderr bytes.Buffer
			code := run(context.Background(), args, testEnv(t, map[string]string{"GATEHOUSE_SIGNING_ALG": bad}), &stderr, nil)
			want := "gatehouse: invalid GATEHOUSE_SIGNING_ALG: want RS256, ES256 or EdDSA"
			if out := strings.TrimSpace(stderr.String()); code != 2 || out != want {
				t.Errorf("%s %v: exit %d, stderr %q; want 2 and %q", bad, args, code, out, want)
			}
		}
	}
}

// TestSigningAlgsStartUp: serve with GATEHOUSE_SIGNING_ALGS=ES256,EdDSA beside the default RS256
// makes a key of each at start-up, all published; a list naming anything else exits 2 naming
// the variable.
func TestSigningAlgsStartUp(t *testing.T) {
	f := newRotationFixture(t)
	keyText, _ := newKey(t)
	base := f.withKeys(keyText, "")
	serveWith(t, func(k string) string {
		if k == "GATEHOUSE_SIGNING_ALGS" {
			return "ES256, EdDSA"
		}
		return base(k)
	}, func(url string) {
		var got []string
		for _, a := range jwksAlgs(t, url) {
			got = append(got, strings.SplitN(a, " ", 2)[1])
		}
		slices.Sort(got)
		if want := []string{"ES256 EC P-256", "EdDSA OKP Ed25519", "RS256 RSA"}; !slices.Equal(got, want) {
			t.Fatalf("JWKS after start-up: %v, want %v", got, want)
		}
	})
	var stderr bytes.Buffer
	code := run(context.Background(), nil, testEnv(t, map[string]string{"GATEHOUSE_SIGNING_ALGS": "ES256,HS256"}), &stderr, nil)
	want := "gatehouse: invalid GATEHOUSE_SIGNING_ALGS: want a comma-separated list of RS256, ES256 and EdDSA"
	if out := strings.TrimSpace(stderr.String()); code != 2 || out != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, out, want)
	}
}
