package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Dynamic organization roles and their limit, part of runTenancy.

func testOrgRoleLimit(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)

	perm := map[string][]string{"project": {"read"}}
	var created []string
	for i := range store.MaxOrgRoles {
		r := store.OrgRole{OrganizationID: o.ID, Role: fmt.Sprintf("role-%02d", i), Permission: perm}
		mustTx(t, s, func(tx *store.Tx) error { return tx.CreateOrgRole(ctx, &r) })
		created = append(created, r.ID)
		if i == 0 {
			wantErr(t, s, store.ErrConflict, "duplicate name", func(tx *store.Tx) error {
				return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: o.ID, Role: "role-00", Permission: perm})
			})
		}
	}
	wantErr(t, s, store.ErrLimit, fmt.Sprintf("role %d", store.MaxOrgRoles+1), func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: o.ID, Role: "one-too-many", Permission: perm})
	})
	roles, err := s.ListOrgRoles(ctx, o.ID)
	if err != nil || len(roles) != store.MaxOrgRoles {
		t.Fatalf("ListOrgRoles: %d roles, %v; want %d", len(roles), err, store.MaxOrgRoles)
	}
	for i, r := range roles {
		if r.ID != created[i] {
			t.Errorf("ListOrgRoles[%d] = %s, want %s (oldest first)", i, r.ID, created[i])
		}
	}
	// The limit is per organization; deleting one makes room.
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: other.ID, Role: "one-too-many", Permission: perm})
	})
	mustTx(t, s, func(tx *store.Tx) error { return tx.DeleteOrgRole(ctx, o.ID, "role-03") })
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: o.ID, Role: "one-too-many", Permission: perm})
	})
	wantErr(t, s, store.ErrLimit, "full again", func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: o.ID, Role: "two-too-many", Permission: perm})
	})
	wantErr(t, s, store.ErrNotFound, "unknown organization", func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: "org_missing", Role: "x", Permission: perm})
	})
	wantErr(t, s, store.ErrInvalid, "empty name", func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: other.ID, Permission: perm})
	})
}

// testOrgRoleLimitRace creates more roles than the limit allows from
// concurrent transactions: exactly MaxOrgRoles of them succeed.
func testOrgRoleLimitRace(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)

	const attempts = store.MaxOrgRoles + 10
	var wg sync.WaitGroup
	results := make(chan error, attempts)
	start := make(chan struct{})
	for i := range attempts {
		wg.Go(func() {
			<-start
			results <- s.InTx(ctx, func(tx *store.Tx) error {
				return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: o.ID, Role: fmt.Sprintf("r%d", i)})
			})
		})
	}
	close(start)
	wg.Wait()
	close(results)
	var ok, limited int
	for err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrLimit):
			limited++
		default:
			t.Fatal(err)
		}
	}
	if ok != store.MaxOrgRoles || limited != attempts-store.MaxOrgRoles {
		t.Errorf("%d created, %d limited; want %d and %d", ok, limited, store.MaxOrgRoles, attempts-store.MaxOrgRoles)
	}
	if roles, err := s.ListOrgRoles(ctx, o.ID); err != nil || len(roles) != store.MaxOrgRoles {
		t.Errorf("ListOrgRoles: %d, %v", len(roles), err)
	}
}

func testOrgRoles(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)

	before := s.Now()
	auditor := store.OrgRole{OrganizationID: o.ID, Role: "auditor", Permission: map[string][]string{"project": {"read"}, "audit": {"read", "export"}, "empty": nil}}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateOrgRole(ctx, &auditor) })
	if !idFormat("orl").MatchString(auditor.ID) {
		t.Errorf("ID = %q, want orl_…", auditor.ID)
	}
	checkStamped(t, "CreatedAt", auditor.CreatedAt, before, s.Now())
	wantPerm := map[string][]string{"project": {"read"}, "audit": {"read", "export"}, "empty": {}}
	if !reflect.DeepEqual(auditor.Permission, wantPerm) {
		t.Errorf("Permission = %#v, want %#v", auditor.Permission, wantPerm)
	}
	bare := store.OrgRole{OrganizationID: o.ID, Role: "bare"}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateOrgRole(ctx, &bare) })
	// The same name in another organization is fine.
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreateOrgRole(ctx, &store.OrgRole{OrganizationID: other.ID, Role: "auditor"})
	})

	for _, key := range []string{auditor.ID, "auditor"} {
		if got, err := s.OrgRole(ctx, o.ID, key); err != nil || !reflect.DeepEqual(got, auditor) {
			t.Errorf("OrgRole(%s) = %+v, %v; want %+v", key, got, err, auditor)
		}
	}
	if got, err := s.OrgRole(ctx, o.ID, "bare"); err != nil || got.Permission == nil || len(got.Permission) != 0 {
		t.Errorf("OrgRole(bare) = %+v, %v; want an empty permission", got, err)
	}
	for _, key := range []string{"missing", auditor.ID + "x"} {
		if _, err := s.OrgRole(ctx, o.ID, key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("OrgRole(%s) = %v, want ErrNotFound", key, err)
		}
	}
	if _, err := s.OrgRole(ctx, other.ID, auditor.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OrgRole by ID in another organization = %v, want ErrNotFound", err)
	}

	update := func(key string, name *string, perm map[string][]string) store.OrgRole {
		t.Helper()
		var got store.OrgRole
		mustTx(t, s, func(tx *store.Tx) error {
			var err error
			got, err = tx.UpdateOrgRole(ctx, o.ID, key, name, perm)
			return err
		})
		if stored, err := s.OrgRole(ctx, o.ID, got.ID); err != nil || !reflect.DeepEqual(stored, got) {
			t.Errorf("UpdateOrgRole returned %+v, stored %+v, %v", got, stored, err)
		}
		return got
	}
	// Rename by ID; the permission stays.
	got := update(auditor.ID, ptr("inspector"), nil)
	if got.ID != auditor.ID || got.Role != "inspector" || !reflect.DeepEqual(got.Permission, wantPerm) || got.UpdatedAt.Before(auditor.UpdatedAt) {
		t.Errorf("rename: %+v", got)
	}
	if _, err := s.OrgRole(ctx, o.ID, "auditor"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old name after rename: %v, want ErrNotFound", err)
	}
	// New permission by name; the name stays.
	newPerm := map[string][]string{"billing": {"read"}}
	got = update("inspector", nil, newPerm)
	if got.Role != "inspector" || !reflect.DeepEqual(got.Permission, newPerm) {
		t.Errorf("permission update: %+v", got)
	}
	// Both at once, by name.
	got = update("inspector", ptr("auditor"), map[string][]string{})
	if got.Role != "auditor" || len(got.Permission) != 0 {
		t.Errorf("rename and clear: %+v", got)
	}

	for _, tc := range []struct {
		name string
		org  string
		key  string
		new  *string
		want error
	}{
		{"rename to a taken name", o.ID, "auditor", ptr("bare"), store.ErrConflict},
		{"empty name", o.ID, "auditor", ptr(""), store.ErrInvalid},
		{"unknown role", o.ID, "missing", ptr("x"), store.ErrNotFound},
		{"other organization", other.ID, bare.ID, ptr("x"), store.ErrNotFound},
	} {
		wantErr(t, s, tc.want, "UpdateOrgRole "+tc.name, func(tx *store.Tx) error {
			_, err := tx.UpdateOrgRole(ctx, tc.org, tc.key, tc.new, nil)
			return err
		})
	}

	// Delete by name and by ID.
	mustTx(t, s, func(tx *store.Tx) error { return tx.DeleteOrgRole(ctx, o.ID, "auditor") })
	wantErr(t, s, store.ErrNotFound, "DeleteOrgRole from another organization", func(tx *store.Tx) error {
		return tx.DeleteOrgRole(ctx, other.ID, bare.ID)
	})
	mustTx(t, s, func(tx *store.Tx) error { return tx.DeleteOrgRole(ctx, o.ID, bare.ID) })
	wantErr(t, s, store.ErrNotFound, "DeleteOrgRole again", func(tx *store.Tx) error {
		return tx.DeleteOrgRole(ctx, o.ID, bare.ID)
	})
	if roles, err := s.ListOrgRoles(ctx, o.ID); err != nil || roles == nil || len(roles) != 0 {
		t.Errorf("ListOrgRoles after deletes = %+v, %v; want empty", roles, err)
	}
	if roles, err := s.ListOrgRoles(ctx, other.ID); err != nil || len(roles) != 1 || roles[0].Role != "auditor" {
		t.Errorf("other organization's roles = %+v, %v", roles, err)
	}
}
