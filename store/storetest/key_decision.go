package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runKeyDecision covers APIKeyDecision, the one-query key lookup and decision of
// POST /api/v1/authorize.
func runKeyDecision(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Decisions", func(t *testing.T) { testKeyDecision(t, open) })
	t.Run("FollowsChanges", func(t *testing.T) { testKeyDecisionFollowsChanges(t, open) })
}

func testKeyDecision(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	now := f.s.Now()
	editor := f.role(t, f.project.ID, "editor", "document:read", "document:write")
	billing := f.role(t, f.project.ID, "billing", "invoice:read")
	expired := f.role(t, f.project.ID, "expired", "document:delete")
	root := f.role(t, f.project.ID, "root", "*")
	foreign := f.role(t, f.otherProject.ID, "foreign", "*")
	past, soon := now.Add(-time.Minute), now.Add(30*time.Minute).Truncate(time.Second)
	f.bind(t, editor, store.PrincipalUser, "alice", nil)
	f.bind(t, billing, store.PrincipalUser, "alice", &soon)
	f.bind(t, expired, store.PrincipalUser, "alice", &past)
	f.bind(t, root, store.PrincipalServiceAccount, "alice", nil)
	f.bind(t, foreign, store.PrincipalUser, "alice", nil)

	expires := now.Add(time.Hour)
	k := saKey(t, &expires)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "authorizer", Scopes: []string{"project:read"}}
	createSA(t, f.s, &sa, k)
	wantKey := store.APIKeyAuth{
		KeyID: k.ID, PublicID: k.PublicID, SecretHash: k.SecretHash, ExpiresAt: k.ExpiresAt,
		AccountID: sa.ID, AccountName: "authorizer", ProjectID: f.project.ID, OrganizationID: f.project.OrganizationID,
		Scopes: []string{"project:read"},
	}

	for _, tc := range []struct {
		name             string
		project, typ, id string
		permission       string
		want             *store.Decision
		until            *time.Time // the earliest expiry of the bindings read
	}{
		{"allowed by one of two roles", f.project.ID, store.PrincipalUser, "alice", "invoice:read",
			&store.Decision{Allowed: true, Roles: []string{"billing", "editor"}}, &soon},
		{"denied, expired binding ignored", f.project.ID, store.PrincipalUser, "alice", "document:delete",
			&store.Decision{Allowed: false, Roles: []string{"billing", "editor"}}, &soon},
		{"wildcard role", f.project.ID, store.PrincipalServiceAccount, "alice", "anything:at-all",
			&store.Decision{Allowed: true, Roles: []string{"root"}}, nil},
		{"no bindings", f.project.ID, store.PrincipalUser, "bob", "document:read",
			&store.Decision{Allowed: false, Roles: []string{}}, nil},
		{"another project: no decision", f.otherProject.ID, store.PrincipalUser, "alice", "document:read", nil, nil},
		{"unknown project: no decision", "prj_missing", store.PrincipalUser, "alice", "document:read", nil, nil},
	} {
		read, err := f.s.APIKeyDecision(ctx, k.PublicID, tc.project, tc.typ, tc.id, tc.permission, now)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(read.Key, wantKey) {
			t.Errorf("%s: key =\n%+v\nwant\n%+v", tc.name, read.Key, wantKey)
		}
		if !reflect.DeepEqual(read.Decision, tc.want) {
			t.Errorf("%s: decision = %+v, want %+v", tc.name, read.Decision, tc.want)
		}
		if (read.Until == nil) != (tc.until == nil) || read.Until != nil && !read.Until.Equal(*tc.until) {
			t.Errorf("%s: until = %v, want %v", tc.name, read.Until, tc.until)
		}
		if read.Epoch == 0 {
			t.Errorf("%s: epoch %d: none read", tc.name, read.Epoch)
		}
	}
	if _, err := f.s.APIKeyDecision(ctx, "AAAAAAAAAAAA", f.project.ID, store.PrincipalUser, "alice", "document:read", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown public id: %v, want ErrNotFound", err)
	}
}

// testKeyDecisionFollowsChanges: the very next read sees a revoked key, a disabled account, a
// deleted binding and an archived project: nothing is remembered between calls.
func testKeyDecisionFollowsChanges(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	ctx := testContext(t)
	editor := f.role(t, f.project.ID, "editor", "document:write")
	b := f.bind(t, editor, store.PrincipalUser, "alice", nil)
	k := saKey(t, nil)
	sa := store.ServiceAccount{ProjectID: f.project.ID, Name: "authorizer", Scopes: []string{"project:read"}}
	createSA(t, f.s, &sa, k)
	read := func() (store.APIKeyAuth, *store.Decision) {
		t.Helper()
		read, err := f.s.APIKeyDecision(ctx, k.PublicID, f.project.ID, store.PrincipalUser, "alice", "document:write", f.s.Now())
		if err != nil {
			t.Fatal(err)
		}
		return read.Key, read.Decision
	}
	if _, d := read(); d == nil || !d.Allowed {
		t.Fatalf("before: decision %+v, want allowed", d)
	}
	mustTx(t, f.s, func(tx *store.Tx) error { _, err := tx.DeleteRoleBinding(ctx, f.project.ID, b.ID); return err })
	if _, d := read(); d == nil || d.Allowed || len(d.Roles) != 0 {
		t.Errorf("after deleting the binding: decision %+v, want denied with no roles", d)
	}
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, err := tx.SetServiceAccountDisabled(ctx, f.project.ID, sa.ID, true)
		return err
	})
	if key, _ := read(); key.DisabledAt == nil {
		t.Error("after disabling the account: DisabledAt is nil")
	}
	mustTx(t, f.s, func(tx *store.Tx) error { _, err := tx.RevokeAPIKey(ctx, f.project.ID, sa.ID, k.ID); return err })
	if key, _ := read(); key.RevokedAt == nil {
		t.Error("after revoking the key: RevokedAt is nil")
	}
}
