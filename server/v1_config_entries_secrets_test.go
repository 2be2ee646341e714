package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// rawDB opens the database behind a backend URL directly, for tests that read or sabotage
// tables under the store.
func rawDB(t *testing.T, url string) *sqlx.DB {
	t.Helper()
	driver, dsn := "postgres", url
	if rest, ok := strings.CutPrefix(url, "sqlite:"); ok {
		// Waits for the store's own writes (a key's recorded use, say), as any other program
		// writing the file would.
		driver, dsn = "sqlite", rest+"?_pragma=busy_timeout(5000)"
	}
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openURL opens and migrates a store on url with opts (store.WithClock, say); the store is
// closed when the test ends.
func openURL(t *testing.T, url string, opts ...store.Option) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConfigRevealFailsWithoutAudit: when the config.reveal audit row cannot be written, the
// reveal fails and the secret is not sent.
func TestConfigRevealFailsWithoutAudit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		url := b.URL(t)
		f := newConfigFixtureOn(t, openURL(t, url))
		const canary = "canary-no-audit-7c1d"
		if r := f.call(RoleOwner, "PUT", "/TOKEN", `{"value":"`+canary+`","secret":true}`); r.Code != 201 {
			t.Fatalf("put: %d %s", r.Code, r.Body)
		}
		db := rawDB(t, url)
		sabotage := []string{`CREATE TRIGGER refuse_reveal BEFORE INSERT ON audit_logs
			WHEN NEW.action = 'config.reveal' BEGIN SELECT RAISE(ABORT, 'audit unavailable'); END`}
		if b.Name == string(store.Postgres) {
			sabotage = []string{
				`CREATE FUNCTION refuse_reveal() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'audit unavailable'; END $$`,
				`CREATE TRIGGER refuse_reveal BEFORE INSERT ON audit_logs
				FOR EACH ROW WHEN (NEW.action = 'config.reveal') EXECUTE FUNCTION refuse_reveal()`,
			}
		}
		for _, stmt := range sabotage {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		res := f.call(RoleOwner, "GET", "/TOKEN", "")
		res.wantProblem(t, http.StatusInternalServerError, kindInternal, titleInternal)
		if strings.Contains(res.Body.String(), canary) {
			t.Fatalf("secret sent without its audit row: %s", res.Body)
		}
		// Plain values need no audit row and are still served.
		f.call(RoleOwner, "PUT", "/PLAIN", `{"value":1}`)
		if r := f.call(RoleOwner, "GET", "/PLAIN", ""); r.Code != 200 {
			t.Errorf("plain read: %d %s", r.Code, r.Body)
		}
	})
}

// TestConfigNoPlaintextAtRest reads the tables (and, on SQLite, the database files) directly:
// a secret's plaintext is nowhere, every secret value is sealed under the server's key and
// bound to its row, and plain values are stored as JSON.
func TestConfigNoPlaintextAtRest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		url := b.URL(t)
		f := newConfigFixtureOn(t, openURL(t, url))
		const canary1, canary2 = "canary-at-rest-one-b7e2", "canary-at-rest-two-41aa"
		for i, body := range []string{
			`{"value":"` + canary1 + `","secret":true}`,
			`{"value":{"password":"` + canary2 + `"},"secret":true,"description":"db"}`,
		} {
			if r := f.call(RoleOwner, "PUT", "/DB", body); r.Code != []int{201, 200}[i] {
				t.Fatalf("put %d: %d %s", i, r.Code, r.Body)
			}
		}
		f.call(RoleOwner, "PUT", "/PLAIN", `{"value":{"visible":true}}`)
		f.call(RoleOwner, "GET", "/DB", "") // a reveal, audited
		f.call(RoleOwner, "DELETE", "/DB", "")

		ring, err := seal.NewKeyring(testConfig().SecretKey)
		if err != nil {
			t.Fatal(err)
		}
		db := rawDB(t, url)
		type row struct {
			Secret   bool   `db:"secret"`
			Value    string `db:"value"`
			EnvID    string `db:"environment_id"`
			Key      string `db:"key"`
			FromWhat string `db:"source"`
		}
		var rows []row
		err = db.Select(&rows, `SELECT secret, value, environment_id, key, 'entry' AS source FROM config_entries
			UNION ALL SELECT v.secret, v.value, e.environment_id, e.key, 'version' AS source
			FROM config_versions v JOIN config_entries e ON e.id = v.entry_id`)
		if err != nil {
			t.Fatal(err)
		}
		secrets := 0
		for _, r := range rows {
			if strings.Contains(r.Value, canary1) || strings.Contains(r.Value, canary2) {
				t.Errorf("%s %s holds plaintext: %s", r.FromWhat, r.Key, r.Value)
			}
			if !r.Secret {
				if !json.Valid([]byte(r.Value)) {
					t.Errorf("plain %s %s not JSON: %s", r.FromWhat, r.Key, r.Value)
				}
				continue
			}
			secrets++
			if id, ok := seal.KeyIDOf(r.Value); !ok || id != ring.KeyID() {
				t.Errorf("%s %s: %q is not sealed under %s", r.FromWhat, r.Key, r.Value, ring.KeyID())
			}
			if _, err := ring.Open(r.Value, store.ConfigValueAAD(r.EnvID, r.Key)); err != nil {
				t.Errorf("%s %s does not open with its row's aad: %v", r.FromWhat, r.Key, err)
			}
			if _, err := ring.Open(r.Value, store.ConfigValueAAD(r.EnvID, "PLAIN")); err == nil {
				t.Errorf("%s %s opens with another row's aad", r.FromWhat, r.Key)
			}
		}
		if secrets != 3 { // the entry and its two versions
			t.Errorf("%d sealed values, want 3", secrets)
		}
		var audit []string
		if err := db.Select(&audit, `SELECT COALESCE(CAST(metadata AS TEXT), '') FROM audit_logs`); err != nil {
			t.Fatal(err)
		}
		for _, md := range audit {
			if strings.Contains(md, canary1) || strings.Contains(md, canary2) {
				t.Errorf("audit metadata holds plaintext: %s", md)
			}
		}
		if b.Name == string(store.SQLite) {
			path := strings.TrimPrefix(url, "sqlite:")
			for _, file := range []string{path, path + "-wal"} {
				raw, err := os.ReadFile(file)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				if strings.Contains(string(raw), canary1) || strings.Contains(string(raw), canary2) {
					t.Errorf("%s contains a plaintext secret", file)
				}
				if strings.Contains(string(raw), string(testConfig().SecretKey)) {
					t.Errorf("%s contains the master key", file)
				}
			}
		}
	})
}

// TestConfigOldKeys: a server configured with an older key still reveals what it sealed, and
// writes under the current key.
func TestConfigOldKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		f := newConfigFixtureOn(t, st)
		if r := f.call(RoleOwner, "PUT", "/OLD", `{"value":"sealed-before-rotation","secret":true}`); r.Code != 201 {
			t.Fatalf("put: %d %s", r.Code, r.Body)
		}
		cfg := testConfig()
		oldKey := cfg.SecretKey
		cfg.SecretKey = []byte("fedcba9876543210fedcba9876543210")
		cfg.OldSecretKeys = [][]byte{oldKey}
		rotated := f
		rotated.app = newTestApp(t, st, cfg)
		// Sessions are signed with the current key: re-sign the owner's cookie.
		owner := f.ten.members[RoleOwner]
		owner.Cookie = rotated.app.srv.sessionCookieName + "=" + identity.CookieValue(rotated.app.srv.cookieKey, owner.Token)
		rotated.ten.members = map[string]testUser{RoleOwner: owner}

		wantEntry(t, decodeEntry(t, rotated.call(RoleOwner, "GET", "/OLD", "")), "OLD", 1, true, `"sealed-before-rotation"`)
		rotated.call(RoleOwner, "PUT", "/NEW", `{"value":"after","secret":true}`)
		e, err := st.ConfigEntry(context.Background(), f.env, "NEW")
		if err != nil {
			t.Fatal(err)
		}
		if id, _ := seal.KeyIDOf(e.Value); id != rotated.app.srv.keyring.KeyID() || id == f.app.srv.keyring.KeyID() {
			t.Errorf("new value under key %q, want the current key %q", id, rotated.app.srv.keyring.KeyID())
		}
		// Without the old key, the old value cannot be revealed: a 500, never garbage.
		cfg.OldSecretKeys = nil
		bare := rotated
		bare.app = newTestApp(t, st, cfg)
		bare.call(RoleOwner, "GET", "/OLD", "").wantProblem(t, 500, kindInternal, titleInternal)
	})
}
