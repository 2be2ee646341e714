package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runOrgExtra covers the transactional reads and role bookkeeping of
// store/org_extra.go.
func runOrgExtra(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("LockOrganization", func(t *testing.T) { testLockOrganization(t, open) })
	t.Run("TxMemberAndRole", func(t *testing.T) { testTxMemberAndRole(t, open) })
	t.Run("CountRoleHolders", func(t *testing.T) { testCountRoleHolders(t, open) })
	t.Run("RenameRoleHolders", func(t *testing.T) { testRenameRoleHolders(t, open) })
}

func testLockOrganization(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	mustTx(t, s, func(tx *store.Tx) error {
		if err := tx.LockOrganization(ctx, o.ID); err != nil {
			return err
		}
		return tx.LockOrganization(ctx, o.ID) // again in the same transaction
	})
	wantErr(t, s, store.ErrNotFound, "LockOrganization(missing)", func(tx *store.Tx) error {
		return tx.LockOrganization(ctx, "org_missing")
	})
}

func testTxMemberAndRole(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)
	u := newUser(t, s, "Dev", "dev@example.com")
	m := addMember(t, s, o.ID, u.ID, "developer")

	mustTx(t, s, func(tx *store.Tx) error {
		if _, err := tx.UpdateMemberRole(ctx, m.ID, "admin"); err != nil {
			return err
		}
		got, err := tx.MemberByID(ctx, o.ID, m.ID)
		if err != nil {
			return err
		}
		if got.Role != "admin" || got.UserID != u.ID {
			t.Errorf("MemberByID in tx = %+v, want its own write (admin)", got)
		}
		if _, err := tx.MemberByID(ctx, other.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("MemberByID(other org) = %v, want ErrNotFound", err)
		}

		r := store.OrgRole{OrganizationID: o.ID, Role: "support", Permission: map[string][]string{"ticket": {"read"}}}
		if err := tx.CreateOrgRole(ctx, &r); err != nil {
			return err
		}
		for _, key := range []string{r.ID, "support"} {
			got, err := tx.OrgRole(ctx, o.ID, key)
			if err != nil || got.ID != r.ID || got.Role != "support" {
				t.Errorf("OrgRole(%q) in tx = %+v, %v", key, got, err)
			}
		}
		if _, err := tx.OrgRole(ctx, other.ID, "support"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("OrgRole(other org) = %v, want ErrNotFound", err)
		}
		return nil
	})
}

func testCountRoleHolders(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)
	roles := []string{"support", "admin,support", "viewer, support", "supports", "sup_port", "supXport,viewer"}
	for i, role := range roles {
		u := newUser(t, s, role, "u"+string(rune('a'+i))+"@example.com")
		addMember(t, s, o.ID, u.ID, role)
		addMember(t, s, other.ID, u.ID, "support")
	}
	count := func(orgID, role string) (int, error) {
		var n int
		err := s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			n, err = tx.CountRoleHolders(ctx, orgID, role)
			return err
		})
		return n, err
	}
	for _, c := range []struct {
		orgID, role string
		want        int
	}{
		{o.ID, "support", 3},
		{o.ID, "sup_port", 1}, // "_" is literal, not a LIKE wildcard
		{o.ID, "owner", 1},
		{o.ID, "missing", 0},
		{other.ID, "support", len(roles)},
	} {
		if n, err := count(c.orgID, c.role); err != nil || n != c.want {
			t.Errorf("CountRoleHolders(%s, %q) = %d, %v; want %d", c.orgID, c.role, n, err, c.want)
		}
	}
	if _, err := count("org_missing", "support"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CountRoleHolders(missing org) = %v, want ErrNotFound", err)
	}
}

func testRenameRoleHolders(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)
	want := map[string]string{ // role before → after
		"support":          "helpdesk",
		"admin,support":    "admin,helpdesk",
		"support, viewer":  "helpdesk,viewer",
		"helpdesk,support": "helpdesk",
		"supports":         "supports",
	}
	members := map[string]store.Member{}
	i := 0
	for before := range want {
		u := newUser(t, s, before, "m"+string(rune('a'+i))+"@example.com")
		i++
		members[before] = addMember(t, s, o.ID, u.ID, before)
		addMember(t, s, other.ID, u.ID, "support")
	}
	expires := s.Now().Add(time.Hour)
	pending := store.Invitation{OrganizationID: o.ID, Email: "p@example.com", Role: "support", InviterID: owner.ID, ExpiresAt: expires}
	accepted := store.Invitation{OrganizationID: o.ID, Email: "a@example.com", Role: "support", InviterID: owner.ID, ExpiresAt: expires, Status: store.InvitationAccepted}
	mustTx(t, s, func(tx *store.Tx) error {
		if err := tx.CreateInvitation(ctx, &pending); err != nil {
			return err
		}
		return tx.CreateInvitation(ctx, &accepted)
	})

	var changed int
	mustTx(t, s, func(tx *store.Tx) error {
		if err := tx.LockOrganization(ctx, o.ID); err != nil {
			return err
		}
		var err error
		changed, err = tx.RenameRoleHolders(ctx, o.ID, "support", "helpdesk")
		return err
	})
	if changed != 4 {
		t.Errorf("RenameRoleHolders changed %d members, want 4", changed)
	}
	for before, after := range want {
		m, err := s.MemberByID(ctx, o.ID, members[before].ID)
		if err != nil || m.Role != after {
			t.Errorf("member %q after rename = %q, %v; want %q", before, m.Role, err, after)
		}
		if o2, err := s.Member(ctx, other.ID, m.UserID); err != nil || o2.Role != "support" {
			t.Errorf("other organization's member = %q, %v; want support (untouched)", o2.Role, err)
		}
	}
	if got, err := s.Invitation(ctx, pending.ID); err != nil || got.Role != "helpdesk" {
		t.Errorf("pending invitation role = %q, %v; want helpdesk", got.Role, err)
	}
	if got, err := s.Invitation(ctx, accepted.ID); err != nil || got.Role != "support" {
		t.Errorf("accepted invitation role = %q, %v; want support (history kept)", got.Role, err)
	}
	wantErr(t, s, store.ErrInvalid, "RenameRoleHolders(empty)", func(tx *store.Tx) error {
		_, err := tx.RenameRoleHolders(ctx, o.ID, "support", "")
		return err
	})
}
