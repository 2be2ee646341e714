package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Organization members and owners, part of runTenancy.

func testMembers(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	dev := newUser(t, s, "Dev", "dev@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)

	before := s.Now()
	m := addMember(t, s, o.ID, dev.ID, "developer")
	after := s.Now()
	if !idFormat("mem").MatchString(m.ID) || m.OrganizationID != o.ID || m.UserID != dev.ID || m.Role != "developer" {
		t.Errorf("AddMember = %+v", m)
	}
	checkStamped(t, "CreatedAt", m.CreatedAt, before, after)

	for _, tc := range []struct {
		name      string
		org, user string
		role      string
		want      error
	}{
		{"duplicate", o.ID, dev.ID, "admin", store.ErrConflict},
		{"unknown user", o.ID, "usr_missing", "admin", store.ErrNotFound},
		{"unknown organization", "org_missing", dev.ID, "admin", store.ErrNotFound},
		{"empty role", other.ID, dev.ID, "", store.ErrInvalid},
	} {
		wantErr(t, s, tc.want, "AddMember "+tc.name, func(tx *store.Tx) error {
			_, err := tx.AddMember(ctx, tc.org, tc.user, tc.role)
			return err
		})
	}

	for name, get := range map[string]func() (store.Member, error){
		"Member":        func() (store.Member, error) { return s.Member(ctx, o.ID, dev.ID) },
		"MemberByID":    func() (store.Member, error) { return s.MemberByID(ctx, o.ID, m.ID) },
		"MemberByEmail": func() (store.Member, error) { return s.MemberByEmail(ctx, o.ID, " DEV@Example.com ") },
	} {
		if got, err := get(); err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("%s = %+v, %v; want %+v", name, got, err, m)
		}
	}
	for name, get := range map[string]func() (store.Member, error){
		"Member other organization":     func() (store.Member, error) { return s.Member(ctx, other.ID, dev.ID) },
		"MemberByID other organization": func() (store.Member, error) { return s.MemberByID(ctx, other.ID, m.ID) },
		"MemberByEmail unknown email":   func() (store.Member, error) { return s.MemberByEmail(ctx, o.ID, "nobody@example.com") },
		"MemberByEmail non-member":      func() (store.Member, error) { return s.MemberByEmail(ctx, other.ID, "dev@example.com") },
	} {
		if _, err := get(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}

	var updated store.Member
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		updated, err = tx.UpdateMemberRole(ctx, m.ID, "admin,billing")
		return err
	})
	if updated.Role != "admin,billing" || updated.ID != m.ID || !updated.CreatedAt.Equal(m.CreatedAt) || updated.UpdatedAt.Before(m.UpdatedAt) {
		t.Errorf("UpdateMemberRole = %+v", updated)
	}
	if got, _ := s.Member(ctx, o.ID, dev.ID); !reflect.DeepEqual(got, updated) {
		t.Errorf("after UpdateMemberRole: %+v, want %+v", got, updated)
	}
	wantErr(t, s, store.ErrNotFound, "UpdateMemberRole unknown", func(tx *store.Tx) error {
		_, err := tx.UpdateMemberRole(ctx, "mem_missing", "admin")
		return err
	})
	wantErr(t, s, store.ErrInvalid, "UpdateMemberRole empty role", func(tx *store.Tx) error {
		_, err := tx.UpdateMemberRole(ctx, m.ID, "")
		return err
	})

	mustTx(t, s, func(tx *store.Tx) error { return tx.RemoveMember(ctx, m.ID) })
	if _, err := s.Member(ctx, o.ID, dev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Member after RemoveMember: %v, want ErrNotFound", err)
	}
	wantErr(t, s, store.ErrNotFound, "RemoveMember again", func(tx *store.Tx) error { return tx.RemoveMember(ctx, m.ID) })

	// Deleting a user deletes its memberships.
	addMember(t, s, other.ID, dev.ID, "viewer")
	mustTx(t, s, func(tx *store.Tx) error { return tx.DeleteUser(ctx, dev.ID) })
	if _, err := s.Member(ctx, other.ID, dev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Member after DeleteUser: %v, want ErrNotFound", err)
	}
}

func testListMembers(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	// Created (and so added) in this order; names, emails and roles sort
	// differently.
	carol := newUser(t, s, "carol", "c.carol@example.com")
	alice := newUser(t, s, "alice", "z.alice@example.org")
	erin := newUser(t, s, "erin", "a.erin@example.com")
	bob := newUser(t, s, "bob_b", "m.bob@example.org")
	dave := newUser(t, s, "dave", "b.dave@example.com")
	outsider := newUser(t, s, "zed", "zed@example.com")

	o := newOrganization(t, s, "acme", carol.ID) // carol: owner
	addMember(t, s, o.ID, alice.ID, "viewer")
	addMember(t, s, o.ID, erin.ID, "admin")
	addMember(t, s, o.ID, bob.ID, "developer")
	addMember(t, s, o.ID, dave.ID, "admin,billing")
	other := newOrganization(t, s, "other", outsider.ID)
	addMember(t, s, other.ID, alice.ID, "admin")
	if err := s.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.UpdateUser(ctx, alice.ID, nil, ptr(ptr("https://example.com/alice.png")))
		return err
	}); err != nil {
		t.Fatal(err)
	}

	names := func(members []store.MemberWithUser) []string {
		out := make([]string, len(members))
		for i, m := range members {
			out[i] = m.UserName
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		page  store.MemberPage
		want  []string
		total int
	}{
		{"default", store.MemberPage{}, []string{"carol", "alice", "erin", "bob_b", "dave"}, 5},
		{"created desc", store.MemberPage{SortBy: "createdAt", SortDesc: true}, []string{"dave", "bob_b", "erin", "alice", "carol"}, 5},
		{"page", store.MemberPage{Limit: 2, Offset: 1}, []string{"alice", "erin"}, 5},
		{"last page", store.MemberPage{Limit: 2, Offset: 4}, []string{"dave"}, 5},
		{"past the end", store.MemberPage{Limit: 2, Offset: 10}, []string{}, 5},
		{"negative offset", store.MemberPage{Limit: 1, Offset: -3}, []string{"carol"}, 5},
		{"name", store.MemberPage{SortBy: "name"}, []string{"alice", "bob_b", "carol", "dave", "erin"}, 5},
		{"name desc page", store.MemberPage{SortBy: "name", SortDesc: true, Limit: 2}, []string{"erin", "dave"}, 5},
		{"email", store.MemberPage{SortBy: "email"}, []string{"erin", "dave", "carol", "bob_b", "alice"}, 5},
		{"role", store.MemberPage{SortBy: "role"}, []string{"erin", "dave", "bob_b", "carol", "alice"}, 5},
		{"role eq", store.MemberPage{FilterField: "role", FilterValue: "admin"}, []string{"erin"}, 1},
		{"role eq explicit", store.MemberPage{FilterField: "role", FilterValue: "admin", FilterOperator: "eq"}, []string{"erin"}, 1},
		{"role ne", store.MemberPage{FilterField: "role", FilterValue: "admin", FilterOperator: "ne"}, []string{"carol", "alice", "bob_b", "dave"}, 4},
		{"role contains", store.MemberPage{FilterField: "role", FilterValue: "admin", FilterOperator: "contains"}, []string{"erin", "dave"}, 2},
		{"email contains, any case", store.MemberPage{FilterField: "email", FilterValue: "EXAMPLE.ORG", FilterOperator: "contains", SortBy: "name"}, []string{"alice", "bob_b"}, 2},
		{"contains is literal", store.MemberPage{FilterField: "name", FilterValue: "_", FilterOperator: "contains"}, []string{"bob_b"}, 1},
		{"contains percent", store.MemberPage{FilterField: "name", FilterValue: "%", FilterOperator: "contains"}, []string{}, 0},
		{"filtered page", store.MemberPage{FilterField: "email", FilterValue: "example.com", FilterOperator: "contains", SortBy: "name", Limit: 2, Offset: 1}, []string{"dave", "erin"}, 3},
		{"userId", store.MemberPage{FilterField: "userId", FilterValue: bob.ID}, []string{"bob_b"}, 1},
		{"name eq", store.MemberPage{FilterField: "name", FilterValue: "dave"}, []string{"dave"}, 1},
		{"no match", store.MemberPage{FilterField: "email", FilterValue: "zed@example.com"}, []string{}, 0},
	} {
		got, total, err := s.ListMembers(ctx, o.ID, tc.page)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got == nil {
			t.Errorf("%s: nil slice, want empty", tc.name)
		}
		if !reflect.DeepEqual(names(got), tc.want) || total != tc.total {
			t.Errorf("%s: %v (total %d), want %v (total %d)", tc.name, names(got), total, tc.want, tc.total)
		}
	}

	// The user fields come along.
	got, _, err := s.ListMembers(ctx, o.ID, store.MemberPage{FilterField: "userId", FilterValue: alice.ID})
	if err != nil || len(got) != 1 {
		t.Fatalf("alice: %+v, %v", got, err)
	}
	want, err := s.Member(ctx, o.ID, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := got[0]; !reflect.DeepEqual(a.Member, want) || a.UserEmail != "z.alice@example.org" || a.UserImage == nil || *a.UserImage != "https://example.com/alice.png" {
		t.Errorf("alice = %+v, want member %+v with email and image", a, want)
	}
	if got, _, _ := s.ListMembers(ctx, o.ID, store.MemberPage{FilterField: "userId", FilterValue: carol.ID}); len(got) != 1 || got[0].UserImage != nil {
		t.Errorf("carol = %+v, want no image", got)
	}

	for _, page := range []store.MemberPage{
		{SortBy: "password"},
		{SortBy: "created_at"},
		{FilterField: "u.name", FilterValue: "x"},
		{FilterField: "name", FilterValue: "x", FilterOperator: "like"},
	} {
		if _, _, err := s.ListMembers(ctx, o.ID, page); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", page, err)
		}
	}
	if got, total, err := s.ListMembers(ctx, "org_missing", store.MemberPage{}); err != nil || len(got) != 0 || total != 0 {
		t.Errorf("unknown organization: %v, %d, %v", got, total, err)
	}
}

func testCountOwners(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	first := newUser(t, s, "First", "first@example.com")
	o := newOrganization(t, s, "acme", first.ID)
	other := newOrganization(t, s, "other", first.ID)
	for i, role := range []string{"admin,owner", "owner, billing", "billing,owner,admin", "admin", "owners", "co-owner", "viewer,ownerish"} {
		u := newUser(t, s, role, fmt.Sprintf("u%d@example.com", i))
		addMember(t, s, o.ID, u.ID, role)
		addMember(t, s, other.ID, u.ID, "viewer")
	}
	count := func(orgID string) (int, error) {
		var n int
		err := s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			n, err = tx.CountOwners(ctx, orgID)
			return err
		})
		return n, err
	}
	// first (owner), "admin,owner", "owner, billing", "billing,owner,admin".
	if n, err := count(o.ID); err != nil || n != 4 {
		t.Errorf("CountOwners(acme) = %d, %v; want 4", n, err)
	}
	if n, err := count(other.ID); err != nil || n != 1 {
		t.Errorf("CountOwners(other) = %d, %v; want 1", n, err)
	}
	if _, err := count("org_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CountOwners(missing) = %v, want ErrNotFound", err)
	}
}

// testLastOwnerRace demotes both owners of an organization in concurrent
// transactions that each refuse to demote the last owner: exactly one
// succeeds.
func testLastOwnerRace(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	a := newUser(t, s, "A", "a@example.com")
	b := newUser(t, s, "B", "b@example.com")
	o := newOrganization(t, s, "acme", a.ID)
	mb := addMember(t, s, o.ID, b.ID, store.RoleOwner)
	ma, err := s.Member(ctx, o.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}

	errLastOwner := errors.New("last owner")
	const rounds = 5
	for round := range rounds {
		oneWinsOneRefused(t, s, round, "demotions", errLastOwner, func(tx *store.Tx, i int) error {
			n, err := tx.CountOwners(ctx, o.ID)
			if err != nil {
				return err
			}
			if n < 2 {
				return errLastOwner
			}
			_, err = tx.UpdateMemberRole(ctx, []store.Member{ma, mb}[i].ID, "admin")
			return err
		})
		// Make both owners again for the next round.
		mustTx(t, s, func(tx *store.Tx) error {
			for _, m := range []store.Member{ma, mb} {
				if _, err := tx.UpdateMemberRole(ctx, m.ID, store.RoleOwner); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// oneWinsOneRefused starts two transactions on s at the same moment, one per fn(tx, i) with i
// 0 and 1, and fails t unless exactly one commits and the other returns refused: the rule the
// transactions check must hold under concurrency. what names the action in the failure.
func oneWinsOneRefused(t *testing.T, s *store.Store, round int, what string, refused error, fn func(tx *store.Tx, i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	results := make(chan error, 2)
	start := make(chan struct{})
	for i := range 2 {
		wg.Go(func() {
			<-start
			results <- s.InTx(testContext(t), func(tx *store.Tx) error { return fn(tx, i) })
		})
	}
	close(start)
	wg.Wait()
	close(results)
	var ok, no int
	for err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, refused):
			no++
		default:
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if ok != 1 || no != 1 {
		t.Fatalf("round %d: %d %s succeeded, %d refused; want 1 and 1", round, ok, what, no)
	}
}
