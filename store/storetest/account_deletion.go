package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Deleting one's own account: the organizations that stop it (SoleOwnedOrganizations).

func runAccountDeletion(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("SoleOwnedOrganizations", func(t *testing.T) { testSoleOwnedOrganizations(t, open) })
	t.Run("SoleOwnerRace", func(t *testing.T) { testSoleOwnerRace(t, open) })
}

// testSoleOwnedOrganizations: only organizations that are not archived and in which the user
// is the one owner (alone or among comma-joined roles) are listed, by name.
func testSoleOwnedOrganizations(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	ada := newUser(t, s, "Ada", "ada@example.com")
	bob := newUser(t, s, "Bob", "bob@example.com")

	zeta := newOrganization(t, s, "zeta", ada.ID)   // Ada alone
	alpha := newOrganization(t, s, "alpha", ada.ID) // Ada alone, with members who are not owners
	addMember(t, s, alpha.ID, bob.ID, "admin")
	spaced := newOrganization(t, s, "spaced", bob.ID) // Ada the one owner among several roles
	addMember(t, s, spaced.ID, ada.ID, "billing, owner")
	bobInSpaced, err := s.Member(ctx, spaced.ID, bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.UpdateMemberRole(ctx, bobInSpaced.ID, "admin")
		return err
	})
	shared := newOrganization(t, s, "shared", ada.ID) // a second owner
	addMember(t, s, shared.ID, bob.ID, "admin,owner")
	archived := newOrganization(t, s, "archived", ada.ID) // Ada alone, but archived
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetOrganizationArchived(ctx, archived.ID, true)
		return err
	})
	notOwner := newOrganization(t, s, "not-owner", bob.ID) // Ada a developer
	addMember(t, s, notOwner.ID, ada.ID, "developer")

	var got []store.Organization
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		got, err = tx.SoleOwnedOrganizations(ctx, ada.ID)
		return err
	})
	var names []string
	for _, o := range got {
		names = append(names, o.Name+" "+o.ID)
	}
	want := []string{"Org alpha " + alpha.ID, "Org spaced " + spaced.ID, "Org zeta " + zeta.ID}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("SoleOwnedOrganizations(ada) = %v, want %v", names, want)
	}
	for _, o := range got {
		if o.Slug == "" || o.CreatedAt.IsZero() || o.ArchivedAt != nil {
			t.Errorf("organization %+v is not read in full", o)
		}
	}

	// Bob owns not-owner alone; spaced, shared and alpha have another owner or none of his.
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		got, err = tx.SoleOwnedOrganizations(ctx, bob.ID)
		return err
	})
	if len(got) != 1 || got[0].ID != notOwner.ID {
		t.Errorf("SoleOwnedOrganizations(bob) = %+v, want only %s", got, notOwner.ID)
	}
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		got, err = tx.SoleOwnedOrganizations(ctx, "usr_missing")
		return err
	})
	if len(got) != 0 {
		t.Errorf("SoleOwnedOrganizations(unknown) = %+v, want none", got)
	}
}

// testSoleOwnerRace: the two owners of an organization delete their accounts in concurrent
// transactions that each refuse when SoleOwnedOrganizations lists anything: exactly one
// account goes, and the organization keeps the other owner.
func testSoleOwnerRace(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	errSoleOwner := errors.New("sole owner")
	const rounds = 5
	for round := range rounds {
		a := newUser(t, s, "A", fmt.Sprintf("a%d@example.com", round))
		b := newUser(t, s, "B", fmt.Sprintf("b%d@example.com", round))
		o := newOrganization(t, s, fmt.Sprintf("acme-%d", round), a.ID)
		addMember(t, s, o.ID, b.ID, store.RoleOwner)

		oneWinsOneRefused(t, s, round, "deletions", errSoleOwner, func(tx *store.Tx, i int) error {
			u := []store.User{a, b}[i]
			sole, err := tx.SoleOwnedOrganizations(ctx, u.ID)
			if err != nil {
				return err
			}
			if len(sole) > 0 {
				return errSoleOwner
			}
			_, err = tx.DeleteSubject(ctx, u.ID)
			return err
		})
		var owners int
		mustTx(t, s, func(tx *store.Tx) error {
			var err error
			owners, err = tx.CountOwners(ctx, o.ID)
			return err
		})
		if owners != 1 {
			t.Fatalf("round %d: %d owners left, want 1", round, owners)
		}
	}
}
