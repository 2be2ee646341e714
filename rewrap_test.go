package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// rotationFixture is a database with a user session and a project, shared by several runs of
// the binary with different keys.
type rotationFixture struct {
	env   func(string) string
	token string
	envID string
}

// withKeys returns the fixture's environment with the given current and old keys.
func (f rotationFixture) withKeys(current, old string) func(string) string {
	return func(k string) string {
		switch k {
		case "GATEHOUSE_SECRET_KEY":
			return current
		case "GATEHOUSE_SECRET_KEYS_OLD":
			return old
		}
		return f.env(k)
	}
}

// fixturePassword is the rotation fixture user's password.
const fixturePassword = "fixture-password-1"

func newRotationFixture(t *testing.T) rotationFixture {
	t.Helper()
	env := testEnv(t, nil)
	ctx := context.Background()
	st, err := store.Open(ctx, env("GATEHOUSE_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	token, err := identity.NewSessionToken()
	if err != nil {
		t.Fatal(err)
	}
	u := store.User{Name: "Owner", Email: "owner@example.com"}
	p := store.Project{Name: "Shop", Slug: "shop"}
	hash, err := identity.HashPassword(fixturePassword)
	if err != nil {
		t.Fatal(err)
	}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, &u, hash); err != nil {
			return err
		}
		sess := store.Session{UserID: u.ID, TokenHash: identity.HashToken(token), ExpiresAt: time.Now().Add(time.Hour)}
		if err := tx.CreateSession(ctx, &sess); err != nil {
			return err
		}
		o := store.Organization{Name: "Acme", Slug: "acme"}
		if _, err := tx.CreateOrganization(ctx, &o, u.ID); err != nil {
			return err
		}
		p.OrganizationID = o.ID
		return tx.CreateProject(ctx, &p)
	})
	if err != nil {
		t.Fatal(err)
	}
	return rotationFixture{env: env, token: token, envID: p.Environments[0].ID}
}

func newKey(t *testing.T) (string, []byte) {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b), b
}

// serveWith runs `gatehouse serve` with env until fn returns.
func serveWith(t *testing.T, env func(string) string, fn func(base string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan int, 1)
	var stderr lockedBuffer
	go func() { done <- run(ctx, []string{"serve"}, env, &stderr, ready) }()
	select {
	case addr := <-ready:
		fn("http://" + addr.String())
	case code := <-done:
		cancel()
		t.Fatalf("serve exited with %d: %s", code, stderr.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("server did not start")
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exit %d: %s", code, stderr.String())
	}
}

// call sends one request authenticated by the fixture's session, its cookie signed with a key
// derived from master as the server signs it, and returns the status and body.
func (f rotationFixture) call(t *testing.T, base string, master []byte, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://localhost:8080") // the default base URL
	req.AddCookie(&http.Cookie{
		Name:  identity.SessionCookieName(false),
		Value: identity.CookieValue(seal.DeriveKey(master, "session-cookie"), f.token),
	})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// enableTOTP enrols the fixture's user in TOTP through the API and returns the otpauth URI.
func (f rotationFixture) enableTOTP(t *testing.T, base string, master []byte) string {
	t.Helper()
	code, body := f.call(t, base, master, http.MethodPost, "/api/auth/two-factor/enable", `{"password":"`+fixturePassword+`"}`)
	var e struct {
		TotpURI string `json:"totpURI"`
	}
	if code != 200 || json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.TotpURI, "otpauth://totp/") {
		t.Fatalf("enable: %d %s", code, body)
	}
	return strings.ReplaceAll(e.TotpURI, "&", `\u0026`)
}

// sealedKeyIDs returns the key id of every sealed value in the database.
func sealedKeyIDs(t *testing.T, env func(string) string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, env("GATEHOUSE_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ids []string
	err = st.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			id, ok := seal.KeyIDOf(v.Sealed)
			if !ok {
				t.Errorf("%s %s: not a sealed value", v.Table, v.ID)
			}
			ids = append(ids, id)
			return "", false, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// signingKeySet returns a key set over the fixture's database with master as the only secret
// key; the store closes when the test ends.
func signingKeySet(t *testing.T, env func(string) string, master []byte) *oauth.KeySet {
	t.Helper()
	st, err := store.Open(context.Background(), env("GATEHOUSE_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ring, err := seal.NewKeyring(master)
	if err != nil {
		t.Fatal(err)
	}
	return oauth.NewKeySet(st, ring, oauth.KeySetOptions{})
}

// currentSigningKID opens the signing key with master alone and returns its kid.
func currentSigningKID(t *testing.T, env func(string) string, master []byte) string {
	t.Helper()
	k, err := signingKeySet(t, env, master).Current(context.Background())
	if err != nil {
		t.Fatalf("signing key under %s: %v", keyIDOf(t, master), err)
	}
	return k.ID
}

func keyIDOf(t *testing.T, master []byte) string {
	t.Helper()
	k, err := seal.NewKeyring(master)
	if err != nil {
		t.Fatal(err)
	}
	return k.KeyID()
}

func allEqual(ids []string, want string) bool {
	for _, id := range ids {
		if id != want {
			return false
		}
	}
	return len(ids) > 0
}

// TestKeysRewrap rotates the secret key: secrets written under key A are rewrapped under key B
// (with A as an old key), after which B alone reveals them.
func TestKeysRewrap(t *testing.T) {
	f := newRotationFixture(t)
	aText, a := newKey(t)
	bText, b := newKey(t)
	_, c := newKey(t)
	cText := base64.StdEncoding.EncodeToString(c)
	path := "/api/v1/environments/" + f.envID + "/configs/"
	var totpURI string

	// Written under A: a secret with two versions and a plain value.
	serveWith(t, f.withKeys(aText, ""), func(base string) {
		for i, body := range []string{`{"value":"sk_old","secret":true}`, `{"value":"sk_live_123","secret":true}`} {
			if code, out := f.call(t, base, a, http.MethodPut, path+"STRIPE_KEY", body); code != []int{201, 200}[i] {
				t.Fatalf("put %d: %d %s", i, code, out)
			}
		}
		if code, out := f.call(t, base, a, http.MethodPut, path+"PLAIN", `{"value":{"n":1}}`); code != 201 {
			t.Fatalf("put plain: %d %s", code, out)
		}
		// The user's TOTP secret, sealed under A too.
		totpURI = f.enableTOTP(t, base, a)
	})
	// Serving also created the token signing key, sealed under A.
	if ids := sealedKeyIDs(t, f.env); len(ids) != 5 || !allEqual(ids, keyIDOf(t, a)) {
		t.Fatalf("before rewrap: key ids %v, want 5 × %s", ids, keyIDOf(t, a))
	}
	signingKID := currentSigningKID(t, f.env, a)

	rewrapWith := func(env func(string) string) (int, string) {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"keys", "rewrap"}, env, &stderr, nil)
		return code, stderr.String()
	}
	// A key that opens nothing: the run fails and changes nothing.
	if code, out := rewrapWith(f.withKeys(cText, "")); code != 1 || !strings.Contains(out, "does not open") {
		t.Fatalf("rewrap without the old key: exit %d: %s", code, out)
	}
	if ids := sealedKeyIDs(t, f.env); !allEqual(ids, keyIDOf(t, a)) {
		t.Fatalf("a failed rewrap changed key ids: %v", ids)
	}
	// A malformed old key is a configuration error naming the variable.
	if code, out := rewrapWith(f.withKeys(bText, aText+",nope")); code != 2 || !strings.Contains(out, "GATEHOUSE_SECRET_KEYS_OLD") || strings.Contains(out, aText) {
		t.Fatalf("bad old key: exit %d: %s", code, out)
	}

	code, out := rewrapWith(f.withKeys(bText, cText+", "+aText))
	if code != 0 || !strings.Contains(out, "rewrapped 5 of 5 sealed values") {
		t.Fatalf("rewrap: exit %d: %s", code, out)
	}
	if ids := sealedKeyIDs(t, f.env); len(ids) != 5 || !allEqual(ids, keyIDOf(t, b)) {
		t.Fatalf("after rewrap: key ids %v, want 5 × %s", ids, keyIDOf(t, b))
	}
	if code, out := rewrapWith(f.withKeys(bText, aText)); code != 0 || !strings.Contains(out, "rewrapped 0 of 5") {
		t.Fatalf("second rewrap: exit %d: %s", code, out)
	}
	// The signing key is the same key, now opened by B alone and no longer by A.
	if kid := currentSigningKID(t, f.env, b); kid != signingKID {
		t.Fatalf("signing key after rewrap: %s, want %s", kid, signingKID)
	}
	if _, err := signingKeySet(t, f.env, a).Current(context.Background()); err == nil {
		t.Fatal("the old secret key still opens the rewrapped signing key")
	}

	// B alone now reveals the secret; the plain value and the history are intact.
	serveWith(t, f.withKeys(bText, ""), func(base string) {
		code, body := f.call(t, base, b, http.MethodGet, path+"STRIPE_KEY", "")
		var got struct {
			Data struct {
				Value   any  `json:"value"`
				Masked  bool `json:"masked"`
				Version int  `json:"version"`
			} `json:"data"`
		}
		if code != 200 || json.Unmarshal(body, &got) != nil || got.Data.Value != "sk_live_123" || got.Data.Masked || got.Data.Version != 2 {
			t.Fatalf("reveal after rewrap: %d %s", code, body)
		}
		if code, body := f.call(t, base, b, http.MethodGet, path+"PLAIN", ""); code != 200 || !strings.Contains(string(body), `"value":{"n":1}`) {
			t.Fatalf("plain value after rewrap: %d %s", code, body)
		}
		if code, body := f.call(t, base, b, http.MethodGet, path+"STRIPE_KEY/versions", ""); code != 200 || strings.Count(string(body), `"masked":true`) != 2 {
			t.Fatalf("versions after rewrap: %d %s", code, body)
		}
		// The TOTP secret opens under B: the same otpauth URI as at enrolment.
		if code, body := f.call(t, base, b, http.MethodPost, "/api/auth/two-factor/get-totp-uri", `{"password":"`+fixturePassword+`"}`); code != 200 ||
			!strings.Contains(string(body), `"totpURI":"`+totpURI+`"`) {
			t.Fatalf("get-totp-uri after rewrap: %d %s, want %s", code, body, totpURI)
		}
	})
}

// TestOldKeysInvalid: serve refuses a malformed GATEHOUSE_SECRET_KEYS_OLD with one line naming
// the variable.
func TestOldKeysInvalid(t *testing.T) {
	key, _ := newKey(t)
	var stderr bytes.Buffer
	code := run(context.Background(), nil, testEnv(t, map[string]string{
		"GATEHOUSE_SECRET_KEY": key, "GATEHOUSE_SECRET_KEYS_OLD": "c2hvcnQ=",
	}), &stderr, nil)
	out := strings.TrimSpace(stderr.String())
	if code != 2 || strings.Count(out, "\n") != 0 || !strings.Contains(out, "GATEHOUSE_SECRET_KEYS_OLD") {
		t.Fatalf("exit %d, stderr %q", code, out)
	}
}

// TestKeysRewrapNeedsKey: rewrap never generates a key to rewrap under.
func TestKeysRewrapNeedsKey(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"keys", "rewrap"}, testEnv(t, nil), &stderr, nil)
	if code != 2 || !strings.Contains(stderr.String(), "GATEHOUSE_SECRET_KEY") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for the server's goroutines to log into.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
