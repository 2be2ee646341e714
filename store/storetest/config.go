package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runConfig covers configuration entries: writes with history, archive and restore, listing,
// versions, the secret-at-rest rule and re-sealing for key rotation.
func runConfig(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("PutCreatesAndReplaces", func(t *testing.T) { testConfigPut(t, open) })
	t.Run("PutInvalid", func(t *testing.T) { testConfigPutInvalid(t, open) })
	t.Run("PutConcurrent", func(t *testing.T) { testConfigPutConcurrent(t, open) })
	t.Run("PutInCallersTx", func(t *testing.T) { testConfigPutRollback(t, open) })
	t.Run("ArchiveRestore", func(t *testing.T) { testConfigArchive(t, open) })
	t.Run("List", func(t *testing.T) { testConfigList(t, open) })
	t.Run("Versions", func(t *testing.T) { testConfigVersions(t, open) })
	t.Run("PerEnvironment", func(t *testing.T) { testConfigPerEnvironment(t, open) })
	t.Run("ResealValues", func(t *testing.T) { testConfigReseal(t, open) })
}

// configFixture is a store with one project, whose environments hold the entries.
type configFixture struct {
	s       *store.Store
	user    store.User
	project store.Project
}

func newConfigFixture(t *testing.T, open func(t *testing.T) *store.Store) configFixture {
	t.Helper()
	s := open(t)
	u := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", u.ID)
	return configFixture{s: s, user: u, project: newProject(t, s, o.ID, "shop")}
}

func (f configFixture) env(i int) string { return f.project.Environments[i].ID }

// put writes one entry as the fixture's user and fails the test on error.
func (f configFixture) put(t *testing.T, w store.ConfigWrite) (store.ConfigEntry, bool) {
	t.Helper()
	if w.ActorType == "" {
		w.ActorType, w.ActorID = store.ActorUser, f.user.ID
	}
	var e store.ConfigEntry
	var created bool
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		e, created, err = tx.PutConfigEntry(testContext(t), w)
		return err
	})
	return e, created
}

func (f configFixture) archive(t *testing.T, envID, key string, archived bool) store.ConfigEntry {
	t.Helper()
	var e store.ConfigEntry
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		e, err = tx.SetConfigEntryArchived(testContext(t), envID, key, archived)
		return err
	})
	return e
}

// fakeSealed is a stand-in for a store/seal value: the store treats it as opaque text.
func fakeSealed(n int) string { return fmt.Sprintf("v1.0000000%d.c2VhbGVk", n) }

func testConfigPut(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env := f.env(0)

	before := f.s.Now()
	e, created := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "FEATURE_FLAGS", Value: `{"newCheckout":true}`})
	after := f.s.Now()
	if !created || e.Version != 1 || e.Secret || e.Value != `{"newCheckout":true}` || e.Description != nil ||
		e.EnvironmentID != env || e.Key != "FEATURE_FLAGS" || e.ArchivedAt != nil {
		t.Fatalf("created entry = %+v, %v", e, created)
	}
	if !idFormat("cfg").MatchString(e.ID) {
		t.Errorf("id %q, want cfg_…", e.ID)
	}
	checkStamped(t, "CreatedAt", e.CreatedAt, before, after)
	if !e.UpdatedAt.Equal(e.CreatedAt) {
		t.Errorf("UpdatedAt %v != CreatedAt %v", e.UpdatedAt, e.CreatedAt)
	}
	if got, err := f.s.ConfigEntry(ctx, env, "FEATURE_FLAGS"); err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("ConfigEntry = %+v, %v; want %+v", got, err, e)
	}

	// Replacing keeps id and creation time, bumps version and replaces every field.
	time.Sleep(2 * time.Millisecond)
	desc := "Processor key"
	r, created := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "FEATURE_FLAGS", Secret: true, Value: fakeSealed(1), Description: &desc})
	if created || r.ID != e.ID || r.Version != 2 || !r.Secret || r.Value != fakeSealed(1) ||
		r.Description == nil || *r.Description != desc || !r.CreatedAt.Equal(e.CreatedAt) || !r.UpdatedAt.After(e.UpdatedAt) {
		t.Fatalf("replaced entry = %+v, %v", r, created)
	}
	r3, _ := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "FEATURE_FLAGS", Value: `null`})
	if r3.Version != 3 || r3.Secret || r3.Value != "null" || r3.Description != nil {
		t.Fatalf("third write = %+v", r3)
	}

	// The same key in another environment is another entry; keys are case-sensitive.
	other, created := f.put(t, store.ConfigWrite{EnvironmentID: f.env(1), Key: "FEATURE_FLAGS", Value: `1`})
	if !created || other.ID == e.ID || other.Version != 1 {
		t.Fatalf("other environment: %+v, %v", other, created)
	}
	if _, created := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "feature_flags", Value: `2`}); !created {
		t.Fatal("lower-case key replaced the upper-case one")
	}
	// JSON text is kept byte for byte.
	raw := `{ "b": 1,  "a": [1.50, "x"] }`
	if got, _ := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "RAW", Value: raw}); got.Value != raw {
		t.Fatalf("value %q, want %q kept as written", got.Value, raw)
	}
	if got, err := f.s.ConfigEntry(ctx, env, "RAW"); err != nil || got.Value != raw {
		t.Fatalf("read back %q, %v", got.Value, err)
	}

	if _, err := f.s.ConfigEntry(ctx, env, "MISSING"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing key: %v, want ErrNotFound", err)
	}
	if _, err := f.s.ConfigEntry(ctx, "env_missing", "FEATURE_FLAGS"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing environment: %v, want ErrNotFound", err)
	}
}

func testConfigPutInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env := f.env(0)
	user := func(w store.ConfigWrite) store.ConfigWrite {
		w.ActorType, w.ActorID = store.ActorUser, f.user.ID
		return w
	}
	for name, c := range map[string]struct {
		w    store.ConfigWrite
		want error
	}{
		"no environment":        {user(store.ConfigWrite{Key: "K", Value: "1"}), store.ErrInvalid},
		"no key":                {user(store.ConfigWrite{EnvironmentID: env, Value: "1"}), store.ErrInvalid},
		"bad actor":             {store.ConfigWrite{EnvironmentID: env, Key: "K", Value: "1", ActorType: "robot"}, store.ErrInvalid},
		"plain value not JSON":  {user(store.ConfigWrite{EnvironmentID: env, Key: "K", Value: "not json"}), store.ErrInvalid},
		"plain value empty":     {user(store.ConfigWrite{EnvironmentID: env, Key: "K", Value: ""}), store.ErrInvalid},
		"plaintext secret":      {user(store.ConfigWrite{EnvironmentID: env, Key: "K", Secret: true, Value: `"hunter2"`}), store.ErrInvalid},
		"empty secret":          {user(store.ConfigWrite{EnvironmentID: env, Key: "K", Secret: true, Value: ""}), store.ErrInvalid},
		"missing environment":   {user(store.ConfigWrite{EnvironmentID: "env_missing", Key: "K", Value: "1"}), store.ErrNotFound},
		"plaintext secret, num": {user(store.ConfigWrite{EnvironmentID: env, Key: "K", Secret: true, Value: `42`}), store.ErrInvalid},
	} {
		wantErr(t, f.s, c.want, name, func(tx *store.Tx) error {
			_, _, err := tx.PutConfigEntry(ctx, c.w)
			return err
		})
	}
	if got, err := f.s.ListConfigEntries(ctx, env, store.StateAll); err != nil || len(got) != 0 {
		t.Fatalf("after refused writes: %v, %v; want nothing stored", got, err)
	}
}

// testConfigPutConcurrent: concurrent writers of one new key all succeed, one creates it, and
// the versions are 1..n without gaps or duplicates.
func testConfigPutConcurrent(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	createdCount := make(chan bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f.s.InTx(ctx, func(tx *store.Tx) error {
				_, created, err := tx.PutConfigEntry(ctx, store.ConfigWrite{
					EnvironmentID: f.env(0), Key: "RACE", Value: fmt.Sprint(i), ActorType: store.ActorSystem,
				})
				createdCount <- created
				return err
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	close(createdCount)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent put: %v", err)
		}
	}
	creates := 0
	for c := range createdCount {
		if c {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d writers created the entry, want 1", creates)
	}
	versions, err := f.s.ListConfigVersions(ctx, f.env(0), "RACE")
	if err != nil || len(versions) != n {
		t.Fatalf("versions: %d, %v; want %d", len(versions), err, n)
	}
	for i, v := range versions {
		if v.Version != n-i {
			t.Fatalf("versions %v: want %d..1", versions, n)
		}
	}
	if e, _ := f.s.ConfigEntry(ctx, f.env(0), "RACE"); e.Version != n || e.Value != versions[0].Value {
		t.Fatalf("entry %+v does not match the newest version %+v", e, versions[0])
	}
}

// testConfigPutRollback: the entry and its version are written in the caller's transaction.
func testConfigPutRollback(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	boom := errors.New("boom")
	err := f.s.InTx(ctx, func(tx *store.Tx) error {
		if _, _, err := tx.PutConfigEntry(ctx, store.ConfigWrite{EnvironmentID: f.env(0), Key: "K", Value: "1", ActorType: store.ActorSystem}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v", err)
	}
	if _, err := f.s.ConfigEntry(ctx, f.env(0), "K"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("entry after rollback: %v", err)
	}
	if _, err := f.s.ListConfigVersions(ctx, f.env(0), "K"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("versions after rollback: %v", err)
	}
}

func testConfigArchive(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env := f.env(0)
	e, _ := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "K", Value: `"a"`})

	time.Sleep(2 * time.Millisecond)
	a := f.archive(t, env, "K", true)
	if a.ArchivedAt == nil || a.ID != e.ID || a.Version != 1 || a.Value != `"a"` || !a.UpdatedAt.After(e.UpdatedAt) ||
		!a.ArchivedAt.Equal(a.UpdatedAt) {
		t.Fatalf("archived = %+v", a)
	}
	// Archived: not found by key, versions hidden, writes refused, archiving again not found.
	if _, err := f.s.ConfigEntry(ctx, env, "K"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ConfigEntry(archived) = %v, want ErrNotFound", err)
	}
	if _, err := f.s.ListConfigVersions(ctx, env, "K"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ListConfigVersions(archived) = %v, want ErrNotFound", err)
	}
	wantErr(t, f.s, store.ErrArchived, "put on archived", func(tx *store.Tx) error {
		_, _, err := tx.PutConfigEntry(ctx, store.ConfigWrite{EnvironmentID: env, Key: "K", Value: `"b"`, ActorType: store.ActorSystem})
		return err
	})
	wantErr(t, f.s, store.ErrNotFound, "archive twice", func(tx *store.Tx) error {
		_, err := tx.SetConfigEntryArchived(ctx, env, "K", true)
		return err
	})
	for _, archived := range []bool{true, false} {
		wantErr(t, f.s, store.ErrNotFound, fmt.Sprintf("archived=%v on a missing key", archived), func(tx *store.Tx) error {
			_, err := tx.SetConfigEntryArchived(ctx, env, "MISSING", archived)
			return err
		})
	}

	r := f.archive(t, env, "K", false)
	if r.ArchivedAt != nil || r.Version != 1 || r.Value != `"a"` || r.UpdatedAt.Before(a.UpdatedAt) {
		t.Fatalf("restored = %+v", r)
	}
	if got, err := f.s.ConfigEntry(ctx, env, "K"); err != nil || got.Version != 1 {
		t.Fatalf("after restore: %+v, %v", got, err)
	}
	// Restoring an active entry changes nothing.
	if again := f.archive(t, env, "K", false); !reflect.DeepEqual(again, r) {
		t.Errorf("restore of an active entry = %+v, want %+v", again, r)
	}
	// The history survived and writes continue it.
	if w, created := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "K", Value: `"b"`}); created || w.Version != 2 {
		t.Fatalf("put after restore = %+v, %v", w, created)
	}
}

func testConfigList(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env := f.env(0)
	for _, k := range []string{"b", "A", "a", "_x", "B.1"} {
		f.put(t, store.ConfigWrite{EnvironmentID: env, Key: k, Value: `true`})
	}
	f.put(t, store.ConfigWrite{EnvironmentID: f.env(2), Key: "OTHER_ENV", Value: `true`})
	f.archive(t, env, "a", true)
	keys := func(state store.State) []string {
		t.Helper()
		got, err := f.s.ListConfigEntries(ctx, env, state)
		if err != nil {
			t.Fatalf("ListConfigEntries(%q): %v", state, err)
		}
		out := []string{}
		for _, e := range got {
			out = append(out, e.Key)
		}
		return out
	}
	for state, want := range map[store.State][]string{
		"":                  {"A", "B.1", "_x", "b"},
		store.StateActive:   {"A", "B.1", "_x", "b"},
		store.StateArchived: {"a"},
		store.StateAll:      {"A", "B.1", "_x", "a", "b"},
	} {
		if got := keys(state); !reflect.DeepEqual(got, want) {
			t.Errorf("state %q: %v, want %v", state, got, want)
		}
	}
	if _, err := f.s.ListConfigEntries(ctx, env, "deleted"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown state: %v, want ErrInvalid", err)
	}
	if got, err := f.s.ListConfigEntries(ctx, f.env(1), store.StateAll); err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty environment: %#v, %v; want an empty slice", got, err)
	}
}

func testConfigVersions(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env := f.env(0)
	desc := "db"
	f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "DB", Value: `"v1"`, Description: &desc})
	f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "DB", Secret: true, Value: fakeSealed(2), ActorType: store.ActorServiceAccount, ActorID: "sa_1"})
	e, _ := f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "DB", Value: `"v3"`, ActorType: store.ActorSystem})
	f.put(t, store.ConfigWrite{EnvironmentID: env, Key: "OTHER", Value: `0`})

	got, err := f.s.ListConfigVersions(ctx, env, "DB")
	if err != nil || len(got) != 3 {
		t.Fatalf("ListConfigVersions = %+v, %v", got, err)
	}
	want := []struct {
		version            int
		secret             bool
		value              string
		desc               *string
		actorType, actorID string
	}{
		{3, false, `"v3"`, nil, store.ActorSystem, ""},
		{2, true, fakeSealed(2), nil, store.ActorServiceAccount, "sa_1"},
		{1, false, `"v1"`, &desc, store.ActorUser, f.user.ID},
	}
	for i, w := range want {
		v := got[i]
		if v.Version != w.version || v.Secret != w.secret || v.Value != w.value || !reflect.DeepEqual(v.Description, w.desc) ||
			v.ActorType != w.actorType || v.ActorID != w.actorID || v.EntryID != e.ID || !idFormat("cfv").MatchString(v.ID) {
			t.Errorf("version %d = %+v, want %+v", i, v, w)
		}
		if v.CreatedAt.Location() != time.UTC || v.CreatedAt.IsZero() {
			t.Errorf("version %d CreatedAt = %v", i, v.CreatedAt)
		}
	}
	if !got[0].CreatedAt.Equal(e.UpdatedAt) {
		t.Errorf("newest version at %v, entry updated at %v", got[0].CreatedAt, e.UpdatedAt)
	}
	if _, err := f.s.ListConfigVersions(ctx, env, "MISSING"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := f.s.ListConfigVersions(ctx, f.env(1), "DB"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("key of another environment: %v", err)
	}
}

// testConfigPerEnvironment: the key space is per environment, and so is the ConfigValueAAD
// that callers bind sealed values to.
func testConfigPerEnvironment(t *testing.T, open func(t *testing.T) *store.Store) {
	if got := string(store.ConfigValueAAD("env_1", "K")); got != "config:env_1:K" {
		t.Errorf("ConfigValueAAD = %q", got)
	}
	if string(store.ConfigValueAAD("env_1", "K")) == string(store.ConfigValueAAD("env_2", "K")) {
		t.Error("AAD does not depend on the environment")
	}
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	f.put(t, store.ConfigWrite{EnvironmentID: f.env(0), Key: "K", Value: "1"})
	f.put(t, store.ConfigWrite{EnvironmentID: f.env(1), Key: "K", Value: "2"})
	a, _ := f.s.ConfigEntry(ctx, f.env(0), "K")
	b, _ := f.s.ConfigEntry(ctx, f.env(1), "K")
	if a.Value != "1" || b.Value != "2" {
		t.Fatalf("per-environment values: %q, %q", a.Value, b.Value)
	}
}

func testConfigReseal(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newConfigFixture(t, open)
	ctx := testContext(t)
	env0, env1 := f.env(0), f.env(1)
	f.put(t, store.ConfigWrite{EnvironmentID: env0, Key: "PLAIN", Value: `"p"`})
	f.put(t, store.ConfigWrite{EnvironmentID: env0, Key: "S1", Secret: true, Value: "old:1"})
	f.put(t, store.ConfigWrite{EnvironmentID: env0, Key: "S1", Secret: true, Value: "old:2"})
	f.put(t, store.ConfigWrite{EnvironmentID: env1, Key: "S2", Secret: true, Value: "new:3"})
	f.put(t, store.ConfigWrite{EnvironmentID: env1, Key: "MIXED", Value: `1`})
	f.put(t, store.ConfigWrite{EnvironmentID: env1, Key: "MIXED", Secret: true, Value: "old:4"})
	f.archive(t, env1, "MIXED", true) // archived entries are re-sealed too

	var seen []string
	var n int
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		n, err = tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			seen = append(seen, v.Table+" "+string(v.AAD)+" "+v.Sealed)
			if rest, ok := strings.CutPrefix(v.Sealed, "old:"); ok {
				return "new:" + rest, true, nil
			}
			return v.Sealed, false, nil
		})
		return err
	})
	// Entries: S1 (old:2), S2 (new:3), MIXED (old:4). Versions: S1 v1, v2, S2 v1, MIXED v2.
	if len(seen) != 7 {
		t.Fatalf("fn saw %d values, want 7 (no plain value): %v", len(seen), seen)
	}
	wantSeen := map[string]bool{
		"config_entries config:" + env0 + ":S1 old:2":     true,
		"config_entries config:" + env1 + ":S2 new:3":     true,
		"config_entries config:" + env1 + ":MIXED old:4":  true,
		"config_versions config:" + env0 + ":S1 old:1":    true,
		"config_versions config:" + env0 + ":S1 old:2":    true,
		"config_versions config:" + env1 + ":S2 new:3":    true,
		"config_versions config:" + env1 + ":MIXED old:4": true,
	}
	for _, s := range seen {
		if !wantSeen[s] {
			t.Errorf("unexpected value %q", s)
		}
	}
	if n != 5 {
		t.Errorf("replaced %d, want 5", n)
	}
	if e, _ := f.s.ConfigEntry(ctx, env0, "S1"); e.Value != "new:2" || e.Version != 2 {
		t.Errorf("S1 after reseal: %+v", e)
	}
	vs, _ := f.s.ListConfigVersions(ctx, env0, "S1")
	if len(vs) != 2 || vs[0].Value != "new:2" || vs[1].Value != "new:1" {
		t.Errorf("S1 versions after reseal: %+v", vs)
	}
	all, _ := f.s.ListConfigEntries(ctx, env1, store.StateArchived)
	if len(all) != 1 || all[0].Value != "new:4" {
		t.Errorf("archived MIXED after reseal: %+v", all)
	}
	if e, _ := f.s.ConfigEntry(ctx, env0, "PLAIN"); e.Value != `"p"` {
		t.Errorf("plain value changed: %+v", e)
	}

	// An error stops the walk and the caller's rollback undoes earlier replacements.
	boom := errors.New("cannot open")
	calls := 0
	err := f.s.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			calls++
			if calls == 2 {
				return "", false, boom
			}
			return "x:" + v.Sealed, true, nil
		})
		return err
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Fatalf("failing reseal: %v after %d calls", err, calls)
	}
	if e, _ := f.s.ConfigEntry(ctx, env0, "S1"); e.Value != "new:2" {
		t.Errorf("rolled-back reseal left %q", e.Value)
	}
	// A replacement that is not sealed (JSON text) is refused.
	wantErr(t, f.s, store.ErrInvalid, "reseal to plaintext", func(tx *store.Tx) error {
		_, err := tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) { return `"plain"`, true, nil })
		return err
	})
}
