package storetest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runServiceAccounts covers service accounts, their API keys and the
// authentication lookup.
func runServiceAccounts(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Create", func(t *testing.T) { testCreateServiceAccount(t, open) })
	t.Run("CreateInvalid", func(t *testing.T) { testCreateServiceAccountInvalid(t, open) })
	t.Run("List", func(t *testing.T) { testListServiceAccounts(t, open) })
	t.Run("Disable", func(t *testing.T) { testSetServiceAccountDisabled(t, open) })
	t.Run("AddAPIKey", func(t *testing.T) { testAddAPIKey(t, open) })
	t.Run("RevokeAPIKey", func(t *testing.T) { testRevokeAPIKey(t, open) })
	t.Run("APIKeyByPublicID", func(t *testing.T) { testAPIKeyByPublicID(t, open) })
	t.Run("TouchAPIKey", func(t *testing.T) { testTouchAPIKey(t, open) })
	t.Run("APIKeyUsable", testAPIKeyUsable)
	t.Run("APIKeyRule", func(t *testing.T) { testAPIKeyRule(t, open) })
}

// saFixture is an organization with two projects.
type saFixture struct {
	s       *store.Store
	org     store.Organization
	project store.Project
	other   store.Project
}

func newSAFixture(t *testing.T, open func(t *testing.T) *store.Store) saFixture {
	t.Helper()
	s := open(t)
	owner := newUser(t, s, "Owner", "sa-owner@example.com")
	org := newOrganization(t, s, "sa-org", owner.ID)
	return saFixture{
		s: s, org: org,
		project: newProject(t, s, org.ID, "sa-one"),
		other:   newProject(t, s, org.ID, "sa-two"),
	}
}

// saKey returns a key with a random 12-character public id and the SHA-256
// of a random secret as its hash.
func saKey(t *testing.T, expiresAt *time.Time) *store.APIKey {
	t.Helper()
	sum := sha256.Sum256([]byte(rand.Text()))
	return &store.APIKey{PublicID: rand.Text()[:store.APIKeyPublicIDLen], SecretHash: sum[:], ExpiresAt: expiresAt}
}

func createSA(t *testing.T, s *store.Store, sa *store.ServiceAccount, key *store.APIKey) {
	t.Helper()
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateServiceAccount(testContext(t), sa, key) })
}

func getSA(t *testing.T, s *store.Store, projectID, id string) store.ServiceAccount {
	t.Helper()
	got, err := s.ServiceAccount(testContext(t), projectID, id)
	if err != nil {
		t.Fatalf("ServiceAccount(%s, %s): %v", projectID, id, err)
	}
	return got
}

// checkNoHashes fails if a read returned secret material.
func checkNoHashes(t *testing.T, what string, accounts ...store.ServiceAccount) {
	t.Helper()
	for _, sa := range accounts {
		for _, k := range sa.Keys {
			if k.SecretHash != nil {
				t.Errorf("%s: key %s carries a secret hash", what, k.ID)
			}
		}
	}
}

func testCreateServiceAccount(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	env := f.project.Environments[2]
	expires := time.Now().Add(48 * time.Hour).Round(0).In(time.FixedZone("X", 3600))
	key := saKey(t, &expires)
	hash := bytes.Clone(key.SecretHash)

	before := f.s.Now()
	sa := store.ServiceAccount{
		ProjectID: f.project.ID, Name: "checkout", Description: ptr("reads production"),
		EnvironmentID: ptr(env.ID), Scopes: []string{"config:read", "usage:write"},
	}
	createSA(t, f.s, &sa, key)
	after := f.s.Now()

	if !idFormat("sa").MatchString(sa.ID) || !idFormat("key").MatchString(key.ID) {
		t.Errorf("ids %q, %q; want sa_… and key_…", sa.ID, key.ID)
	}
	checkStamped(t, "CreatedAt", sa.CreatedAt, before, after)
	if !sa.UpdatedAt.Equal(sa.CreatedAt) || sa.DisabledAt != nil {
		t.Errorf("UpdatedAt %v, DisabledAt %v; want CreatedAt, nil", sa.UpdatedAt, sa.DisabledAt)
	}
	if key.ServiceAccountID != sa.ID || !key.CreatedAt.Equal(sa.CreatedAt) || key.RevokedAt != nil || key.LastUsedAt != nil {
		t.Errorf("key = %+v", key)
	}
	if want := expires.UTC().Truncate(time.Microsecond); !key.ExpiresAt.Equal(want) || key.ExpiresAt.Location() != time.UTC {
		t.Errorf("key ExpiresAt = %v, want %v in UTC", key.ExpiresAt, want)
	}
	if !bytes.Equal(key.SecretHash, hash) {
		t.Error("CreateServiceAccount changed the caller's key hash")
	}
	wantKey := *key
	wantKey.SecretHash = nil
	if !reflect.DeepEqual(sa.Keys, []store.APIKey{wantKey}) {
		t.Errorf("sa.Keys = %+v, want [%+v] without hash", sa.Keys, wantKey)
	}

	got := getSA(t, f.s, f.project.ID, sa.ID)
	if !reflect.DeepEqual(got, sa) {
		t.Errorf("ServiceAccount =\n%+v\nwant\n%+v", got, sa)
	}
	checkNoHashes(t, "ServiceAccount", got)

	// Without a key, description or pin.
	bare := store.ServiceAccount{ProjectID: f.project.ID, Name: "bare", Scopes: []string{"*"}}
	createSA(t, f.s, &bare, nil)
	if bare.Keys == nil || len(bare.Keys) != 0 {
		t.Errorf("bare.Keys = %#v, want empty", bare.Keys)
	}
	if got := getSA(t, f.s, f.project.ID, bare.ID); !reflect.DeepEqual(got, bare) ||
		got.Description != nil || got.EnvironmentID != nil {
		t.Errorf("bare account = %+v, want %+v", got, bare)
	}

	// Another project does not see it.
	if _, err := f.s.ServiceAccount(ctx, f.other.ID, sa.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ServiceAccount from another project: %v, want ErrNotFound", err)
	}
	if _, err := f.s.ServiceAccount(ctx, f.project.ID, "sa_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ServiceAccount(missing): %v, want ErrNotFound", err)
	}
}

func testCreateServiceAccountInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	valid := func() store.ServiceAccount {
		return store.ServiceAccount{ProjectID: f.project.ID, Name: "svc", Scopes: []string{"project:read"}}
	}
	taken := saKey(t, nil)
	first := valid()
	createSA(t, f.s, &first, taken)

	cases := []struct {
		name   string
		sa     func() store.ServiceAccount
		key    *store.APIKey
		target error
	}{
		{"no name", func() store.ServiceAccount { sa := valid(); sa.Name = ""; return sa }, saKey(t, nil), store.ErrInvalid},
		{"no project", func() store.ServiceAccount { sa := valid(); sa.ProjectID = ""; return sa }, saKey(t, nil), store.ErrInvalid},
		{"no scopes", func() store.ServiceAccount { sa := valid(); sa.Scopes = []string{}; return sa }, saKey(t, nil), store.ErrInvalid},
		{"environment of another project", func() store.ServiceAccount {
			sa := valid()
			sa.EnvironmentID = ptr(f.other.Environments[0].ID)
			return sa
		}, saKey(t, nil), store.ErrInvalid},
		{"unknown environment", func() store.ServiceAccount { sa := valid(); sa.EnvironmentID = ptr("env_missing"); return sa }, saKey(t, nil), store.ErrInvalid},
		{"unknown project", func() store.ServiceAccount { sa := valid(); sa.ProjectID = "prj_missing"; return sa }, saKey(t, nil), store.ErrNotFound},
		{"short public id", valid, &store.APIKey{PublicID: "abc", SecretHash: make([]byte, 32)}, store.ErrInvalid},
		{"short hash", valid, &store.APIKey{PublicID: "abcdefghijkl", SecretHash: make([]byte, 16)}, store.ErrInvalid},
		{"no hash", valid, &store.APIKey{PublicID: "abcdefghijkl"}, store.ErrInvalid},
		{"public id taken", valid, &store.APIKey{PublicID: taken.PublicID, SecretHash: make([]byte, 32)}, store.ErrConflict},
		{"account id taken", func() store.ServiceAccount { sa := valid(); sa.ID = first.ID; return sa }, saKey(t, nil), store.ErrConflict},
	}
	for _, c := range cases {
		sa := c.sa()
		wantErr(t, f.s, c.target, c.name, func(tx *store.Tx) error { return tx.CreateServiceAccount(ctx, &sa, c.key) })
	}
	// Nothing but the first account was written.
	got, err := f.s.ListServiceAccounts(ctx, f.project.ID)
	if err != nil || len(got) != 1 || len(got[0].Keys) != 1 {
		t.Errorf("after failed creates: %+v, %v; want only the first account with one key", got, err)
	}
}

func testListServiceAccounts(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)

	empty, err := f.s.ListServiceAccounts(ctx, f.project.ID)
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("ListServiceAccounts(empty) = %#v, %v; want an empty slice", empty, err)
	}

	a := store.ServiceAccount{ProjectID: f.project.ID, Name: "a", Scopes: []string{"*"}}
	createSA(t, f.s, &a, saKey(t, nil))
	other := store.ServiceAccount{ProjectID: f.other.ID, Name: "other", Scopes: []string{"*"}}
	createSA(t, f.s, &other, saKey(t, nil))
	b := store.ServiceAccount{ProjectID: f.project.ID, Name: "b", Scopes: []string{"config:read"}}
	createSA(t, f.s, &b, nil)
	second := saKey(t, nil)
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.AddAPIKey(ctx, f.project.ID, a.ID, second) })
	second.SecretHash = nil
	a.Keys = append(a.Keys, *second)

	got, err := f.s.ListServiceAccounts(ctx, f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.ServiceAccount{a, b}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListServiceAccounts =\n%+v\nwant\n%+v", got, want)
	}
	checkNoHashes(t, "ListServiceAccounts", got...)
	if got, err := f.s.ListServiceAccounts(ctx, f.other.ID); err != nil || len(got) != 1 || got[0].ID != other.ID {
		t.Errorf("other project's list = %+v, %v", got, err)
	}
}

func testSetServiceAccountDisabled(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "svc", Scopes: []string{"*"}}
	createSA(t, f.s, &sa, saKey(t, nil))

	set := func(projectID string, disabled bool) (store.ServiceAccount, error) {
		var out store.ServiceAccount
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			out, err = tx.SetServiceAccountDisabled(ctx, projectID, sa.ID, disabled)
			return err
		})
		return out, err
	}
	before := f.s.Now()
	disabled, err := set(f.project.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if disabled.DisabledAt == nil || !disabled.UpdatedAt.Equal(*disabled.DisabledAt) {
		t.Fatalf("disabled = %+v", disabled)
	}
	checkStamped(t, "DisabledAt", *disabled.DisabledAt, before, f.s.Now())
	if len(disabled.Keys) != 1 {
		t.Errorf("disabled account keys = %+v, want its key", disabled.Keys)
	}
	checkNoHashes(t, "SetServiceAccountDisabled", disabled)

	again, err := set(f.project.ID, true)
	if err != nil || !again.DisabledAt.Equal(*disabled.DisabledAt) {
		t.Errorf("disabling twice: %+v, %v; want the first DisabledAt %v", again.DisabledAt, err, disabled.DisabledAt)
	}
	if got := getSA(t, f.s, f.project.ID, sa.ID); !reflect.DeepEqual(got, again) {
		t.Errorf("read back %+v, want %+v", got, again)
	}

	enabled, err := set(f.project.ID, false)
	if err != nil || enabled.DisabledAt != nil || enabled.UpdatedAt.Before(again.UpdatedAt) {
		t.Errorf("enabled = %+v, %v", enabled, err)
	}
	if _, err := set(f.other.ID, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("disable through another project: %v, want ErrNotFound", err)
	}
	if got := getSA(t, f.s, f.project.ID, sa.ID); got.DisabledAt != nil {
		t.Error("a refused disable changed the account")
	}
}

func testAddAPIKey(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "svc", Scopes: []string{"*"}}
	first := saKey(t, nil)
	createSA(t, f.s, &sa, first)

	expires := time.Now().Add(time.Hour)
	k := saKey(t, &expires)
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.AddAPIKey(ctx, f.project.ID, sa.ID, k) })
	if !idFormat("key").MatchString(k.ID) || k.ServiceAccountID != sa.ID || k.CreatedAt.IsZero() {
		t.Errorf("added key = %+v", k)
	}
	got := getSA(t, f.s, f.project.ID, sa.ID)
	if len(got.Keys) != 2 || got.Keys[0].ID != first.ID || got.Keys[1].ID != k.ID ||
		!got.Keys[1].ExpiresAt.Equal(expires.UTC().Truncate(time.Microsecond)) {
		t.Errorf("keys = %+v, want [%s %s]", got.Keys, first.ID, k.ID)
	}
	checkNoHashes(t, "after AddAPIKey", got)

	wantErr(t, f.s, store.ErrNotFound, "add key through another project", func(tx *store.Tx) error {
		return tx.AddAPIKey(ctx, f.other.ID, sa.ID, saKey(t, nil))
	})
	wantErr(t, f.s, store.ErrNotFound, "add key to a missing account", func(tx *store.Tx) error {
		return tx.AddAPIKey(ctx, f.project.ID, "sa_missing", saKey(t, nil))
	})
	wantErr(t, f.s, store.ErrConflict, "add key with a taken public id", func(tx *store.Tx) error {
		return tx.AddAPIKey(ctx, f.project.ID, sa.ID, &store.APIKey{PublicID: first.PublicID, SecretHash: make([]byte, 32)})
	})
	wantErr(t, f.s, store.ErrInvalid, "add malformed key", func(tx *store.Tx) error {
		return tx.AddAPIKey(ctx, f.project.ID, sa.ID, &store.APIKey{PublicID: "short", SecretHash: make([]byte, 32)})
	})
	if got := getSA(t, f.s, f.project.ID, sa.ID); len(got.Keys) != 2 {
		t.Errorf("after refused adds: %d keys, want 2", len(got.Keys))
	}
}

func testRevokeAPIKey(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "svc", Scopes: []string{"*"}}
	k := saKey(t, nil)
	createSA(t, f.s, &sa, k)
	otherSA := store.ServiceAccount{ProjectID: f.project.ID, Name: "other", Scopes: []string{"*"}}
	createSA(t, f.s, &otherSA, saKey(t, nil))

	revoke := func(projectID, accountID, keyID string) (store.APIKey, error) {
		var out store.APIKey
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			out, err = tx.RevokeAPIKey(ctx, projectID, accountID, keyID)
			return err
		})
		return out, err
	}
	for _, c := range []struct{ name, project, account, key string }{
		{"another project", f.other.ID, sa.ID, k.ID},
		{"another account", f.project.ID, otherSA.ID, k.ID},
		{"missing key", f.project.ID, sa.ID, "key_missing"},
	} {
		if _, err := revoke(c.project, c.account, c.key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoke through %s: %v, want ErrNotFound", c.name, err)
		}
	}
	if got := getSA(t, f.s, f.project.ID, sa.ID); got.Keys[0].RevokedAt != nil {
		t.Fatal("a refused revoke revoked the key")
	}

	before := f.s.Now()
	got, err := revoke(f.project.ID, sa.ID, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RevokedAt == nil || got.ID != k.ID || got.PublicID != k.PublicID || got.SecretHash != nil {
		t.Fatalf("revoked key = %+v", got)
	}
	checkStamped(t, "RevokedAt", *got.RevokedAt, before, f.s.Now())
	again, err := revoke(f.project.ID, sa.ID, k.ID)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("revoking twice = %+v, %v; want %+v (first RevokedAt kept)", again, err, got)
	}
	if listed := getSA(t, f.s, f.project.ID, sa.ID); !reflect.DeepEqual(listed.Keys, []store.APIKey{got}) {
		t.Errorf("listed keys = %+v, want [%+v]", listed.Keys, got)
	}
	if other := getSA(t, f.s, f.project.ID, otherSA.ID); other.Keys[0].RevokedAt != nil {
		t.Error("revoking one account's key revoked another's")
	}
}

func testAPIKeyByPublicID(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	env := f.project.Environments[1]
	expires := time.Now().Add(time.Hour)
	k := saKey(t, &expires)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "checkout", EnvironmentID: ptr(env.ID),
		Scopes: []string{"config:read", "usage:write"}}
	createSA(t, f.s, &sa, k)

	got, err := f.s.APIKeyByPublicID(ctx, k.PublicID)
	if err != nil {
		t.Fatal(err)
	}
	want := store.APIKeyAuth{
		KeyID: k.ID, PublicID: k.PublicID, SecretHash: k.SecretHash, ExpiresAt: k.ExpiresAt,
		AccountID: sa.ID, AccountName: "checkout", ProjectID: f.project.ID, OrganizationID: f.org.ID,
		EnvironmentID: env.ID, Scopes: []string{"config:read", "usage:write"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("APIKeyByPublicID =\n%+v\nwant\n%+v", got, want)
	}

	if _, err := f.s.APIKeyByPublicID(ctx, "AAAAAAAAAAAA"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown public id: %v, want ErrNotFound", err)
	}
	// Public ids are case-sensitive (base62).
	swapped := []byte(k.PublicID)
	for i, c := range swapped {
		switch {
		case c >= 'a' && c <= 'z':
			swapped[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			swapped[i] = c - 'A' + 'a'
		}
	}
	if string(swapped) != k.PublicID {
		if _, err := f.s.APIKeyByPublicID(ctx, string(swapped)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("case-swapped public id: %v, want ErrNotFound", err)
		}
	}

	// An unpinned account has EnvironmentID "".
	k2 := saKey(t, nil)
	bare := store.ServiceAccount{ProjectID: f.other.ID, Name: "bare", Scopes: []string{"*"}}
	createSA(t, f.s, &bare, k2)
	if got, err := f.s.APIKeyByPublicID(ctx, k2.PublicID); err != nil || got.EnvironmentID != "" ||
		got.ExpiresAt != nil || got.ProjectID != f.other.ID || !reflect.DeepEqual(got.Scopes, []string{"*"}) {
		t.Errorf("unpinned key = %+v, %v", got, err)
	}

	// States are reported, not judged.
	var disabledAt, revokedAt time.Time
	mustTx(t, f.s, func(tx *store.Tx) error {
		d, err := tx.SetServiceAccountDisabled(ctx, f.project.ID, sa.ID, true)
		if err != nil {
			return err
		}
		r, err := tx.RevokeAPIKey(ctx, f.project.ID, sa.ID, k.ID)
		if err != nil {
			return err
		}
		disabledAt, revokedAt = *d.DisabledAt, *r.RevokedAt
		if _, err := tx.SetProjectArchived(ctx, f.project.ID, true); err != nil {
			return err
		}
		_, err = tx.SetOrganizationArchived(ctx, f.org.ID, true)
		return err
	})
	got, err = f.s.APIKeyByPublicID(ctx, k.PublicID)
	if err != nil {
		t.Fatal(err)
	}
	if got.DisabledAt == nil || !got.DisabledAt.Equal(disabledAt) || got.RevokedAt == nil ||
		!got.RevokedAt.Equal(revokedAt) || !got.ProjectArchived || !got.OrganizationArchived {
		t.Errorf("after disable, revoke and archive: %+v", got)
	}
	if got, err := f.s.APIKeyByPublicID(ctx, k2.PublicID); err != nil || got.ProjectArchived || !got.OrganizationArchived {
		t.Errorf("key of an active project in an archived organization: %+v, %v", got, err)
	}
}

func testTouchAPIKey(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	k := saKey(t, nil)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "svc", Scopes: []string{"*"}}
	createSA(t, f.s, &sa, k)

	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", -7200))
	if err := f.s.TouchAPIKey(ctx, k.ID, at); err != nil {
		t.Fatal(err)
	}
	wantAt := at.UTC().Truncate(time.Microsecond)
	lastUsed := func() *time.Time {
		t.Helper()
		auth, err := f.s.APIKeyByPublicID(ctx, k.PublicID)
		if err != nil {
			t.Fatal(err)
		}
		if listed := getSA(t, f.s, f.project.ID, sa.ID); !reflect.DeepEqual(listed.Keys[0].LastUsedAt, auth.LastUsedAt) {
			t.Errorf("listed LastUsedAt %v, auth lookup %v", listed.Keys[0].LastUsedAt, auth.LastUsedAt)
		}
		return auth.LastUsedAt
	}
	if got := lastUsed(); got == nil || !got.Equal(wantAt) {
		t.Errorf("LastUsedAt = %v, want %v", got, wantAt)
	}
	// It never moves back.
	if err := f.s.TouchAPIKey(ctx, k.ID, at.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); got == nil || !got.Equal(wantAt) {
		t.Errorf("after an older touch LastUsedAt = %v, want %v", got, wantAt)
	}
	later := wantAt.Add(90 * time.Second)
	if err := f.s.TouchAPIKey(ctx, k.ID, later); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); got == nil || !got.Equal(later) {
		t.Errorf("after a later touch LastUsedAt = %v, want %v", got, later)
	}
	if err := f.s.TouchAPIKey(ctx, "key_missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TouchAPIKey(missing) = %v, want ErrNotFound", err)
	}
}
