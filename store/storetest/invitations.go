package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Organization invitations, part of runTenancy.

func testInvitations(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)
	week := s.Now().Add(7 * 24 * time.Hour)

	create := func(inv store.Invitation) store.Invitation {
		t.Helper()
		mustTx(t, s, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &inv) })
		return inv
	}
	before := s.Now()
	inv := create(store.Invitation{OrganizationID: o.ID, Email: " New@Example.COM", Role: "developer", InviterID: owner.ID,
		ExpiresAt: week.In(time.FixedZone("X", 3600)).Add(123 * time.Nanosecond)})
	after := s.Now()
	if !idFormat("inv").MatchString(inv.ID) || inv.Email != "new@example.com" || inv.Status != store.InvitationPending {
		t.Errorf("CreateInvitation = %+v", inv)
	}
	if !inv.ExpiresAt.Equal(week) || inv.ExpiresAt.Location() != time.UTC {
		t.Errorf("ExpiresAt = %v, want %v in UTC", inv.ExpiresAt, week)
	}
	checkStamped(t, "CreatedAt", inv.CreatedAt, before, after)
	if got, err := s.Invitation(ctx, inv.ID); err != nil || !reflect.DeepEqual(got, inv) {
		t.Errorf("Invitation = %+v, %v; want %+v", got, err, inv)
	}
	if got, err := s.PendingInvitation(ctx, o.ID, "NEW@example.com"); err != nil || !reflect.DeepEqual(got, inv) {
		t.Errorf("PendingInvitation = %+v, %v; want %+v", got, err, inv)
	}

	// An expired one, one to another organization, one to another email.
	expired := create(store.Invitation{OrganizationID: o.ID, Email: "old@example.com", Role: "viewer", InviterID: owner.ID,
		ExpiresAt: s.Now().Add(-time.Minute)})
	elsewhere := create(store.Invitation{OrganizationID: other.ID, Email: "new@example.com", Role: "admin", InviterID: owner.ID, ExpiresAt: week})
	someoneElse := create(store.Invitation{OrganizationID: o.ID, Email: "else@example.com", Role: "admin", InviterID: owner.ID, ExpiresAt: week})
	if _, err := s.PendingInvitation(ctx, o.ID, "old@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PendingInvitation(expired) = %v, want ErrNotFound", err)
	}
	if got, err := s.Invitation(ctx, expired.ID); err != nil || got.Status != store.InvitationPending {
		t.Errorf("Invitation(expired) = %+v, %v", got, err)
	}

	invitationIDs := func(list []store.Invitation, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if list == nil {
			t.Error("nil slice, want empty")
		}
		out := make([]string, len(list))
		for i, inv := range list {
			out[i] = inv.ID
		}
		return out
	}
	if got := invitationIDs(s.ListInvitations(ctx, o.ID)); !reflect.DeepEqual(got, []string{inv.ID, expired.ID, someoneElse.ID}) {
		t.Errorf("ListInvitations = %v", got)
	}
	if got := invitationIDs(s.ListUserInvitations(ctx, "NEW@example.com")); !reflect.DeepEqual(got, []string{inv.ID, elsewhere.ID}) {
		t.Errorf("ListUserInvitations = %v", got)
	}
	if got := invitationIDs(s.ListUserInvitations(ctx, "old@example.com")); len(got) != 0 {
		t.Errorf("ListUserInvitations(expired only) = %v, want none", got)
	}

	// Resend: a new expiry.
	later := s.Now().Add(14 * 24 * time.Hour)
	var refreshed store.Invitation
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		refreshed, err = tx.RefreshInvitation(ctx, inv.ID, later)
		return err
	})
	if !refreshed.ExpiresAt.Equal(later) || refreshed.Status != store.InvitationPending || refreshed.UpdatedAt.Before(inv.UpdatedAt) {
		t.Errorf("RefreshInvitation = %+v", refreshed)
	}
	// Refreshing revives an expired invitation.
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.RefreshInvitation(ctx, expired.ID, later)
		return err
	})
	if _, err := s.PendingInvitation(ctx, o.ID, "old@example.com"); err != nil {
		t.Errorf("PendingInvitation after refresh: %v", err)
	}

	// Accept; then it is no longer pending and cannot move again.
	var accepted store.Invitation
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		accepted, err = tx.SetInvitationStatus(ctx, inv.ID, store.InvitationAccepted)
		return err
	})
	if accepted.Status != store.InvitationAccepted || accepted.ID != inv.ID || !accepted.ExpiresAt.Equal(later) {
		t.Errorf("SetInvitationStatus = %+v", accepted)
	}
	if got, _ := s.Invitation(ctx, inv.ID); !reflect.DeepEqual(got, accepted) {
		t.Errorf("Invitation after accept = %+v, want %+v", got, accepted)
	}
	if _, err := s.PendingInvitation(ctx, o.ID, "new@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PendingInvitation after accept = %v, want ErrNotFound", err)
	}
	for _, status := range []string{store.InvitationRejected, store.InvitationCanceled, store.InvitationAccepted} {
		wantErr(t, s, store.ErrNotFound, "move accepted to "+status, func(tx *store.Tx) error {
			_, err := tx.SetInvitationStatus(ctx, inv.ID, status)
			return err
		})
	}
	wantErr(t, s, store.ErrNotFound, "refresh accepted", func(tx *store.Tx) error {
		_, err := tx.RefreshInvitation(ctx, inv.ID, later)
		return err
	})
	if got := invitationIDs(s.ListUserInvitations(ctx, "new@example.com")); !reflect.DeepEqual(got, []string{elsewhere.ID}) {
		t.Errorf("ListUserInvitations after accept = %v", got)
	}

	// Reject and cancel.
	for id, status := range map[string]string{elsewhere.ID: store.InvitationRejected, someoneElse.ID: store.InvitationCanceled} {
		mustTx(t, s, func(tx *store.Tx) error {
			got, err := tx.SetInvitationStatus(ctx, id, status)
			if err == nil && got.Status != status {
				err = fmt.Errorf("status %q, want %q", got.Status, status)
			}
			return err
		})
	}
	for _, status := range []string{store.InvitationPending, "expired", ""} {
		wantErr(t, s, store.ErrInvalid, "SetInvitationStatus "+status, func(tx *store.Tx) error {
			_, err := tx.SetInvitationStatus(ctx, expired.ID, status)
			return err
		})
	}
	wantErr(t, s, store.ErrNotFound, "SetInvitationStatus unknown", func(tx *store.Tx) error {
		_, err := tx.SetInvitationStatus(ctx, "inv_missing", store.InvitationCanceled)
		return err
	})
	if _, err := s.Invitation(ctx, "inv_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Invitation(missing) = %v, want ErrNotFound", err)
	}
}

func testInvitationsInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	valid := store.Invitation{OrganizationID: o.ID, Email: "x@example.com", Role: "viewer", InviterID: owner.ID, ExpiresAt: s.Now().Add(time.Hour)}
	for _, tc := range []struct {
		name   string
		modify func(*store.Invitation)
		want   error
	}{
		{"empty email", func(i *store.Invitation) { i.Email = " " }, store.ErrInvalid},
		{"empty role", func(i *store.Invitation) { i.Role = "" }, store.ErrInvalid},
		{"no inviter", func(i *store.Invitation) { i.InviterID = "" }, store.ErrInvalid},
		{"no expiry", func(i *store.Invitation) { i.ExpiresAt = time.Time{} }, store.ErrInvalid},
		{"bad status", func(i *store.Invitation) { i.Status = "sent" }, store.ErrInvalid},
		{"unknown organization", func(i *store.Invitation) { i.OrganizationID = "org_missing" }, store.ErrNotFound},
		{"unknown inviter", func(i *store.Invitation) { i.InviterID = "usr_missing" }, store.ErrNotFound},
	} {
		inv := valid
		tc.modify(&inv)
		wantErr(t, s, tc.want, tc.name, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &inv) })
	}
	wantErr(t, s, store.ErrInvalid, "refresh without expiry", func(tx *store.Tx) error {
		_, err := tx.RefreshInvitation(ctx, "inv_missing", time.Time{})
		return err
	})
	if got, err := s.ListInvitations(ctx, o.ID); err != nil || len(got) != 0 {
		t.Errorf("after invalid creations: %v, %v", got, err)
	}
}

// testPendingInvitationUnique: an organization holds at most one pending
// invitation per email (the schema enforces it, so concurrent inviters cannot
// both succeed); accepted, rejected and canceled ones do not count, and an
// expired pending one gives way to a new invitation.
func testPendingInvitationUnique(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)
	week := s.Now().Add(7 * 24 * time.Hour)
	invite := func(orgID, email string) store.Invitation {
		return store.Invitation{OrganizationID: orgID, Email: email, Role: "viewer", InviterID: owner.ID, ExpiresAt: week}
	}
	create := func(inv store.Invitation) store.Invitation {
		t.Helper()
		mustTx(t, s, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &inv) })
		return inv
	}

	first := create(invite(o.ID, "a@example.com"))
	wantErr(t, s, store.ErrConflict, "second pending invitation", func(tx *store.Tx) error {
		inv := invite(o.ID, " A@Example.com")
		return tx.CreateInvitation(ctx, &inv)
	})
	create(invite(other.ID, "a@example.com")) // another organization
	create(invite(o.ID, "b@example.com"))     // another email

	// Once the first is accepted, a new one may be pending; once that one is
	// canceled, another.
	for _, status := range []string{store.InvitationAccepted, store.InvitationCanceled, store.InvitationRejected} {
		mustTx(t, s, func(tx *store.Tx) error {
			_, err := tx.SetInvitationStatus(ctx, first.ID, status)
			return err
		})
		first = create(invite(o.ID, "a@example.com"))
	}
	// Invitations that are not pending never conflict.
	for range 2 {
		inv := invite(o.ID, "c@example.com")
		inv.Status = store.InvitationCanceled
		create(inv)
	}

	// An expired pending invitation does not block a new one: it is canceled
	// in the same transaction.
	old := invite(o.ID, "old@example.com")
	old.ExpiresAt = s.Now().Add(-time.Minute)
	old = create(old)
	renewed := create(invite(o.ID, "old@example.com"))
	if got, err := s.PendingInvitation(ctx, o.ID, "old@example.com"); err != nil || got.ID != renewed.ID {
		t.Errorf("PendingInvitation after re-invite = %+v, %v; want %s", got, err, renewed.ID)
	}
	if got, err := s.Invitation(ctx, old.ID); err != nil || got.Status != store.InvitationCanceled {
		t.Errorf("expired invitation after re-invite = %+v, %v; want status %q", got, err, store.InvitationCanceled)
	}

	pending := 0
	list, err := s.ListInvitations(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range list {
		if inv.Email == "a@example.com" && inv.Status == store.InvitationPending {
			pending++
		}
	}
	if pending != 1 {
		t.Errorf("%d pending invitations of a@example.com, want 1", pending)
	}
}
