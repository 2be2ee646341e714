package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runTenancy covers organizations, members, invitations, dynamic
// organization roles, projects (with environments and project roles) and
// scope resolution.
func runTenancy(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("CreateOrganization", func(t *testing.T) { testCreateOrganization(t, open) })
	t.Run("CreateOrganizationInvalid", func(t *testing.T) { testCreateOrganizationInvalid(t, open) })
	t.Run("OrganizationSlugConflict", func(t *testing.T) { testOrganizationSlugConflict(t, open) })
	t.Run("ListUserOrganizations", func(t *testing.T) { testListUserOrganizations(t, open) })
	t.Run("UpdateOrganization", func(t *testing.T) { testUpdateOrganization(t, open) })
	t.Run("ArchiveOrganization", func(t *testing.T) { testArchiveOrganization(t, open) })
	t.Run("Members", func(t *testing.T) { testMembers(t, open) })
	t.Run("ListMembers", func(t *testing.T) { testListMembers(t, open) })
	t.Run("CountOwners", func(t *testing.T) { testCountOwners(t, open) })
	t.Run("LastOwnerRace", func(t *testing.T) { testLastOwnerRace(t, open) })
	t.Run("Invitations", func(t *testing.T) { testInvitations(t, open) })
	t.Run("InvitationsInvalid", func(t *testing.T) { testInvitationsInvalid(t, open) })
	t.Run("PendingInvitationUnique", func(t *testing.T) { testPendingInvitationUnique(t, open) })
	t.Run("OrgRoleLimit", func(t *testing.T) { testOrgRoleLimit(t, open) })
	t.Run("OrgRoleLimitRace", func(t *testing.T) { testOrgRoleLimitRace(t, open) })
	t.Run("OrgRoles", func(t *testing.T) { testOrgRoles(t, open) })
	t.Run("CreateProject", func(t *testing.T) { testCreateProject(t, open) })
	t.Run("ProjectSlugs", func(t *testing.T) { testProjectSlugs(t, open) })
	t.Run("ListProjects", func(t *testing.T) { testListProjects(t, open) })
	t.Run("UpdateProject", func(t *testing.T) { testUpdateProject(t, open) })
	t.Run("ResolveScope", func(t *testing.T) { testResolveScope(t, open) })
}

// idFormat matches an ID made by store.NewID(prefix).
func idFormat(prefix string) *regexp.Regexp {
	return regexp.MustCompile(`^` + prefix + `_[0-9a-hjkmnp-tv-z]{26}$`)
}

// mustTx runs fn in a transaction and fails the test on error.
func mustTx(t *testing.T, s *store.Store, fn func(tx *store.Tx) error) {
	t.Helper()
	if err := s.InTx(testContext(t), fn); err != nil {
		t.Fatal(err)
	}
}

// wantErr runs fn in a transaction and checks that it fails with target.
func wantErr(t *testing.T, s *store.Store, target error, what string, fn func(tx *store.Tx) error) {
	t.Helper()
	if err := s.InTx(testContext(t), fn); !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}

// newUser creates a user without a password.
func newUser(t *testing.T, s *store.Store, name, email string) store.User {
	t.Helper()
	u := store.User{Name: name, Email: email}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, "") })
	return u
}

// newOrganization creates an organization owned by ownerID.
func newOrganization(t *testing.T, s *store.Store, slug, ownerID string) store.Organization {
	t.Helper()
	o := store.Organization{Name: "Org " + slug, Slug: slug}
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.CreateOrganization(testContext(t), &o, ownerID)
		return err
	})
	return o
}

func addMember(t *testing.T, s *store.Store, orgID, userID, role string) store.Member {
	t.Helper()
	var m store.Member
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		m, err = tx.AddMember(testContext(t), orgID, userID, role)
		return err
	})
	return m
}

func newProject(t *testing.T, s *store.Store, orgID, slug string) store.Project {
	t.Helper()
	p := store.Project{OrganizationID: orgID, Name: "Project " + slug, Slug: slug}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateProject(testContext(t), &p) })
	return p
}

// checkStamped fails unless at lies in [before, after] and is in UTC.
func checkStamped(t *testing.T, what string, at, before, after time.Time) {
	t.Helper()
	if at.Before(before) || at.After(after) || at.Location() != time.UTC {
		t.Errorf("%s = %v, want UTC within [%v, %v]", what, at, before, after)
	}
}

func testCreateOrganization(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")

	before := s.Now()
	o := store.Organization{
		Name:     "Acme",
		Slug:     "acme",
		Logo:     ptr("https://example.com/logo.png"),
		Metadata: map[string]any{"plan": "team", "seats": 5.0, "nested": map[string]any{"ok": true}},
	}
	var member store.Member
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		member, err = tx.CreateOrganization(ctx, &o, owner.ID)
		return err
	})
	after := s.Now()

	if !idFormat("org").MatchString(o.ID) {
		t.Errorf("organization ID = %q, want org_…", o.ID)
	}
	checkStamped(t, "CreatedAt", o.CreatedAt, before, after)
	if !o.UpdatedAt.Equal(o.CreatedAt) || o.ArchivedAt != nil {
		t.Errorf("UpdatedAt %v, ArchivedAt %v; want CreatedAt and nil", o.UpdatedAt, o.ArchivedAt)
	}
	wantMember := store.Member{ID: member.ID, OrganizationID: o.ID, UserID: owner.ID, Role: store.RoleOwner,
		CreatedAt: o.CreatedAt, UpdatedAt: o.CreatedAt}
	if !idFormat("mem").MatchString(member.ID) || !reflect.DeepEqual(member, wantMember) {
		t.Errorf("owner member = %+v, want %+v", member, wantMember)
	}

	got, err := s.Organization(ctx, o.ID)
	if err != nil || !reflect.DeepEqual(got, o) {
		t.Errorf("Organization:\n got %#v, %v\nwant %#v", got, err, o)
	}
	if got, err := s.OrganizationBySlug(ctx, "acme"); err != nil || !reflect.DeepEqual(got, o) {
		t.Errorf("OrganizationBySlug = %+v, %v", got, err)
	}
	if got, err := s.Member(ctx, o.ID, owner.ID); err != nil || !reflect.DeepEqual(got, wantMember) {
		t.Errorf("Member = %+v, %v; want %+v", got, err, wantMember)
	}
	for slug, want := range map[string]bool{"acme": true, "other": false, "ACME": false} {
		if taken, err := s.SlugTaken(ctx, slug); err != nil || taken != want {
			t.Errorf("SlugTaken(%q) = %v, %v; want %v", slug, taken, err, want)
		}
	}
	if _, err := s.Organization(ctx, "org_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Organization(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.OrganizationBySlug(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OrganizationBySlug(missing) = %v, want ErrNotFound", err)
	}

	// Without logo and metadata; an empty logo is none.
	bare := store.Organization{Name: "Bare", Slug: "bare", Logo: ptr(""), Metadata: map[string]any{}}
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.CreateOrganization(ctx, &bare, owner.ID)
		return err
	})
	if bare.Logo != nil || bare.Metadata != nil {
		t.Errorf("CreateOrganization left %+v; want nil logo and metadata", bare)
	}
	if got, err := s.Organization(ctx, bare.ID); err != nil || !reflect.DeepEqual(got, bare) {
		t.Errorf("bare organization read back as %+v, %v; want %+v", got, err, bare)
	}
}

func testCreateOrganizationInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	for _, tc := range []struct {
		name  string
		org   store.Organization
		owner string
		want  error
	}{
		{"empty name", store.Organization{Slug: "a"}, owner.ID, store.ErrInvalid},
		{"empty slug", store.Organization{Name: "A"}, owner.ID, store.ErrInvalid},
		{"no owner", store.Organization{Name: "A", Slug: "a"}, "", store.ErrInvalid},
		{"bad metadata", store.Organization{Name: "A", Slug: "a", Metadata: map[string]any{"f": func() {}}}, owner.ID, store.ErrInvalid},
		{"unknown owner", store.Organization{Name: "A", Slug: "a"}, "usr_missing", store.ErrNotFound},
	} {
		wantErr(t, s, tc.want, tc.name, func(tx *store.Tx) error {
			_, err := tx.CreateOrganization(testContext(t), &tc.org, tc.owner)
			return err
		})
	}
	// The failed creations rolled back: the slug is free.
	if taken, err := s.SlugTaken(testContext(t), "a"); err != nil || taken {
		t.Errorf("SlugTaken(a) = %v, %v after failed creations", taken, err)
	}
}

func testOrganizationSlugConflict(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	first := newOrganization(t, s, "acme", owner.ID)
	wantErr(t, s, store.ErrConflict, "duplicate slug", func(tx *store.Tx) error {
		_, err := tx.CreateOrganization(testContext(t), &store.Organization{Name: "Other", Slug: "acme"}, owner.ID)
		return err
	})
	// An archived organization keeps its slug.
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetOrganizationArchived(testContext(t), first.ID, true)
		return err
	})
	wantErr(t, s, store.ErrConflict, "slug of an archived organization", func(tx *store.Tx) error {
		_, err := tx.CreateOrganization(testContext(t), &store.Organization{Name: "Other", Slug: "acme"}, owner.ID)
		return err
	})
	got, err := s.ListUserOrganizations(testContext(t), owner.ID, store.StateAll)
	if err != nil || len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("after conflicts: %+v, %v; want only %s", got, err, first.ID)
	}
}

func testListUserOrganizations(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	alice := newUser(t, s, "Alice", "alice@example.com")
	bob := newUser(t, s, "Bob", "bob@example.com")
	loner := newUser(t, s, "Loner", "loner@example.com")

	first := newOrganization(t, s, "first", alice.ID)
	second := newOrganization(t, s, "second", bob.ID)
	addMember(t, s, second.ID, alice.ID, "admin,billing")
	third := newOrganization(t, s, "third", alice.ID)
	newOrganization(t, s, "bobs", bob.ID)
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		second, err = tx.SetOrganizationArchived(ctx, second.ID, true)
		return err
	})

	list := func(userID string, state store.State) []store.OrganizationMembership {
		t.Helper()
		got, err := s.ListUserOrganizations(ctx, userID, state)
		if err != nil {
			t.Fatalf("ListUserOrganizations(%s, %q): %v", userID, state, err)
		}
		if got == nil {
			t.Errorf("ListUserOrganizations(%s, %q): nil slice, want empty", userID, state)
		}
		return got
	}
	membership := func(o store.Organization, role string) store.OrganizationMembership {
		return store.OrganizationMembership{Organization: o, Role: role}
	}
	for _, tc := range []struct {
		user  string
		state store.State
		want  []store.OrganizationMembership
	}{
		{alice.ID, store.StateActive, []store.OrganizationMembership{membership(first, "owner"), membership(third, "owner")}},
		{alice.ID, "", []store.OrganizationMembership{membership(first, "owner"), membership(third, "owner")}},
		{alice.ID, store.StateArchived, []store.OrganizationMembership{membership(second, "admin,billing")}},
		{alice.ID, store.StateAll, []store.OrganizationMembership{
			membership(first, "owner"), membership(second, "admin,billing"), membership(third, "owner")}},
		{loner.ID, store.StateAll, []store.OrganizationMembership{}},
	} {
		if got := list(tc.user, tc.state); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %q:\n got %+v\nwant %+v", tc.user, tc.state, got, tc.want)
		}
	}
	if _, err := s.ListUserOrganizations(ctx, alice.ID, "deleted"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown state: %v, want ErrInvalid", err)
	}
}

func testUpdateOrganization(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := store.Organization{Name: "Acme", Slug: "acme", Logo: ptr("logo.png"), Metadata: map[string]any{"a": "b"}}
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.CreateOrganization(ctx, &o, owner.ID)
		return err
	})
	newOrganization(t, s, "taken", owner.ID)

	update := func(u store.OrganizationUpdate) store.Organization {
		t.Helper()
		var got store.Organization
		mustTx(t, s, func(tx *store.Tx) error {
			var err error
			got, err = tx.UpdateOrganization(ctx, o.ID, u)
			return err
		})
		if stored, err := s.Organization(ctx, o.ID); err != nil || !reflect.DeepEqual(stored, got) {
			t.Errorf("UpdateOrganization returned %+v, stored %+v, %v", got, stored, err)
		}
		if got.UpdatedAt.Before(got.CreatedAt) {
			t.Errorf("UpdatedAt %v before CreatedAt %v", got.UpdatedAt, got.CreatedAt)
		}
		return got
	}

	// Nothing set: only UpdatedAt moves.
	before := s.Now()
	got := update(store.OrganizationUpdate{})
	checkStamped(t, "UpdatedAt", got.UpdatedAt, before, s.Now())
	want := o
	want.UpdatedAt = got.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("empty update:\n got %+v\nwant %+v", got, want)
	}

	got = update(store.OrganizationUpdate{Name: ptr("Acme Inc"), Slug: ptr("acme-inc")})
	if got.Name != "Acme Inc" || got.Slug != "acme-inc" || *got.Logo != "logo.png" || got.Metadata["a"] != "b" {
		t.Errorf("name and slug update: %+v", got)
	}
	got = update(store.OrganizationUpdate{Logo: ptr("new.png"), Metadata: &map[string]any{"x": 1.0}})
	if got.Name != "Acme Inc" || *got.Logo != "new.png" || !reflect.DeepEqual(got.Metadata, map[string]any{"x": 1.0}) {
		t.Errorf("logo and metadata update: %+v", got)
	}
	got = update(store.OrganizationUpdate{Logo: ptr(""), Metadata: &map[string]any{}})
	if got.Logo != nil || got.Metadata != nil {
		t.Errorf("clearing logo and metadata: %+v", got)
	}

	for _, tc := range []struct {
		name string
		id   string
		u    store.OrganizationUpdate
		want error
	}{
		{"taken slug", o.ID, store.OrganizationUpdate{Slug: ptr("taken")}, store.ErrConflict},
		{"empty name", o.ID, store.OrganizationUpdate{Name: ptr("")}, store.ErrInvalid},
		{"empty slug", o.ID, store.OrganizationUpdate{Slug: ptr("")}, store.ErrInvalid},
		{"bad metadata", o.ID, store.OrganizationUpdate{Metadata: &map[string]any{"f": func() {}}}, store.ErrInvalid},
		{"unknown", "org_missing", store.OrganizationUpdate{Name: ptr("X")}, store.ErrNotFound},
	} {
		wantErr(t, s, tc.want, tc.name, func(tx *store.Tx) error {
			_, err := tx.UpdateOrganization(ctx, tc.id, tc.u)
			return err
		})
	}
	if got, _ := s.Organization(ctx, o.ID); got.Slug != "acme-inc" {
		t.Errorf("after failed updates slug = %q", got.Slug)
	}
}

func testArchiveOrganization(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)

	setArchived := func(archived bool) store.Organization {
		t.Helper()
		var got store.Organization
		mustTx(t, s, func(tx *store.Tx) error {
			var err error
			got, err = tx.SetOrganizationArchived(ctx, o.ID, archived)
			return err
		})
		if stored, err := s.Organization(ctx, o.ID); err != nil || !reflect.DeepEqual(stored, got) {
			t.Errorf("SetOrganizationArchived returned %+v, stored %+v, %v", got, stored, err)
		}
		return got
	}

	before := s.Now()
	archived := setArchived(true)
	after := s.Now()
	if archived.ArchivedAt == nil {
		t.Fatal("archive: ArchivedAt nil")
	}
	checkStamped(t, "ArchivedAt", *archived.ArchivedAt, before, after)
	checkStamped(t, "UpdatedAt", archived.UpdatedAt, before, after)

	// Archiving again keeps the first timestamp.
	time.Sleep(2 * time.Millisecond)
	again := setArchived(true)
	if again.ArchivedAt == nil || !again.ArchivedAt.Equal(*archived.ArchivedAt) {
		t.Errorf("second archive: ArchivedAt %v, want %v", again.ArchivedAt, archived.ArchivedAt)
	}

	before = s.Now()
	restored := setArchived(false)
	if restored.ArchivedAt != nil {
		t.Errorf("restore: ArchivedAt = %v, want nil", restored.ArchivedAt)
	}
	checkStamped(t, "UpdatedAt after restore", restored.UpdatedAt, before, s.Now())
	if !restored.CreatedAt.Equal(o.CreatedAt) {
		t.Errorf("restore changed CreatedAt")
	}

	wantErr(t, s, store.ErrNotFound, "archive unknown", func(tx *store.Tx) error {
		_, err := tx.SetOrganizationArchived(ctx, "org_missing", true)
		return err
	})
}

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
		var wg sync.WaitGroup
		results := make(chan error, 2)
		start := make(chan struct{})
		for _, m := range []store.Member{ma, mb} {
			wg.Go(func() {
				<-start
				results <- s.InTx(ctx, func(tx *store.Tx) error {
					n, err := tx.CountOwners(ctx, o.ID)
					if err != nil {
						return err
					}
					if n < 2 {
						return errLastOwner
					}
					_, err = tx.UpdateMemberRole(ctx, m.ID, "admin")
					return err
				})
			})
		}
		close(start)
		wg.Wait()
		close(results)
		var ok, refused int
		for err := range results {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, errLastOwner):
				refused++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 || refused != 1 {
			t.Fatalf("round %d: %d demotions succeeded, %d refused; want 1 and 1", round, ok, refused)
		}
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

func testCreateProject(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)

	before := s.Now()
	p := store.Project{OrganizationID: o.ID, Name: "Web", Slug: "web"}
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateProject(ctx, &p) })
	after := s.Now()

	if !idFormat("prj").MatchString(p.ID) || p.ArchivedAt != nil || !p.UpdatedAt.Equal(p.CreatedAt) {
		t.Errorf("CreateProject = %+v", p)
	}
	checkStamped(t, "CreatedAt", p.CreatedAt, before, after)
	wantNames := []string{store.EnvironmentDevelopment, store.EnvironmentStaging, store.EnvironmentProduction}
	if len(p.Environments) != 3 {
		t.Fatalf("%d environments, want 3: %+v", len(p.Environments), p.Environments)
	}
	seen := map[string]bool{}
	for i, e := range p.Environments {
		if !idFormat("env").MatchString(e.ID) || e.ProjectID != p.ID || e.Name != wantNames[i] || !e.CreatedAt.Equal(p.CreatedAt) || seen[e.ID] {
			t.Errorf("environment %d = %+v", i, e)
		}
		seen[e.ID] = true
	}

	got, err := s.Project(ctx, p.ID)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Errorf("Project:\n got %+v, %v\nwant %+v", got, err, p)
	}
	if _, err := s.Project(ctx, "prj_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Project(missing) = %v, want ErrNotFound", err)
	}

	roles, err := s.ListProjectRoles(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	type seeded struct {
		Slug, Name, Description string
		Permissions             []string
	}
	var gotRoles []seeded
	for _, r := range roles {
		if !idFormat("role").MatchString(r.ID) || r.ProjectID != p.ID || !r.CreatedAt.Equal(p.CreatedAt) || !r.UpdatedAt.Equal(p.CreatedAt) {
			t.Errorf("role %+v", r)
		}
		gotRoles = append(gotRoles, seeded{r.Slug, r.Name, r.Description, r.Permissions})
	}
	wantRoles := []seeded{
		{store.ProjectAdminRole, "Project admin", "", []string{"*"}},
		{store.ProjectMemberRole, "Member", "", []string{"profile:read"}},
	}
	if !reflect.DeepEqual(gotRoles, wantRoles) {
		t.Errorf("seeded roles = %+v, want %+v", gotRoles, wantRoles)
	}
	if roles, err := s.ListProjectRoles(ctx, "prj_missing"); err != nil || roles == nil || len(roles) != 0 {
		t.Errorf("ListProjectRoles(missing) = %+v, %v; want empty", roles, err)
	}

	for _, tc := range []struct {
		name string
		p    store.Project
		want error
	}{
		{"unknown organization", store.Project{OrganizationID: "org_missing", Name: "X", Slug: "x"}, store.ErrNotFound},
		{"no organization", store.Project{Name: "X", Slug: "x"}, store.ErrInvalid},
		{"empty name", store.Project{OrganizationID: o.ID, Slug: "x"}, store.ErrInvalid},
		{"empty slug", store.Project{OrganizationID: o.ID, Name: "X"}, store.ErrInvalid},
	} {
		wantErr(t, s, tc.want, tc.name, func(tx *store.Tx) error { return tx.CreateProject(ctx, &tc.p) })
	}
}

func testProjectSlugs(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)

	first := newProject(t, s, o.ID, "web")
	wantErr(t, s, store.ErrConflict, "duplicate slug in the organization", func(tx *store.Tx) error {
		return tx.CreateProject(ctx, &store.Project{OrganizationID: o.ID, Name: "Web 2", Slug: "web"})
	})
	// The same slug in another organization is fine.
	second := newProject(t, s, other.ID, "web")
	if second.ID == first.ID {
		t.Fatal("same project ID twice")
	}
	// An archived project keeps its slug.
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, first.ID, true)
		return err
	})
	wantErr(t, s, store.ErrConflict, "slug of an archived project", func(tx *store.Tx) error {
		return tx.CreateProject(ctx, &store.Project{OrganizationID: o.ID, Name: "Web 3", Slug: "web"})
	})
	for orgID, want := range map[string]string{o.ID: first.ID, other.ID: second.ID} {
		got, err := s.ListProjects(ctx, orgID, store.StateAll)
		if err != nil || len(got) != 1 || got[0].ID != want {
			t.Errorf("ListProjects(%s) = %+v, %v; want only %s", orgID, got, err, want)
		}
	}
}

func testListProjects(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	other := newOrganization(t, s, "other", owner.ID)

	a := newProject(t, s, o.ID, "a")
	b := newProject(t, s, o.ID, "b")
	c := newProject(t, s, o.ID, "c")
	newProject(t, s, other.ID, "elsewhere")
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		b, err = tx.SetProjectArchived(ctx, b.ID, true)
		return err
	})
	withoutEnvironments := func(ps ...store.Project) []store.Project {
		out := []store.Project{}
		for _, p := range ps {
			p.Environments = nil
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		state store.State
		want  []store.Project
	}{
		{store.StateActive, withoutEnvironments(a, c)},
		{"", withoutEnvironments(a, c)},
		{store.StateArchived, withoutEnvironments(b)},
		{store.StateAll, withoutEnvironments(a, b, c)},
	} {
		got, err := s.ListProjects(ctx, o.ID, tc.state)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ListProjects(%q):\n got %+v, %v\nwant %+v", tc.state, got, err, tc.want)
		}
	}
	if got, err := s.ListProjects(ctx, "org_missing", store.StateAll); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ListProjects(missing) = %+v, %v; want empty", got, err)
	}
	if _, err := s.ListProjects(ctx, o.ID, "gone"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown state: %v, want ErrInvalid", err)
	}
}

func testUpdateProject(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	p := newProject(t, s, o.ID, "web")
	newProject(t, s, o.ID, "taken")

	update := func(name, slug *string) store.Project {
		t.Helper()
		var got store.Project
		mustTx(t, s, func(tx *store.Tx) error {
			var err error
			got, err = tx.UpdateProject(ctx, p.ID, name, slug)
			return err
		})
		if stored, err := s.Project(ctx, p.ID); err != nil || !reflect.DeepEqual(stored, got) {
			t.Errorf("UpdateProject returned %+v, stored %+v, %v", got, stored, err)
		}
		return got
	}
	got := update(ptr("Website"), nil)
	if got.Name != "Website" || got.Slug != "web" || got.UpdatedAt.Before(p.UpdatedAt) || !reflect.DeepEqual(got.Environments, p.Environments) {
		t.Errorf("rename: %+v", got)
	}
	got = update(nil, ptr("website"))
	if got.Name != "Website" || got.Slug != "website" {
		t.Errorf("re-slug: %+v", got)
	}
	for _, tc := range []struct {
		name       string
		id         string
		pName, slg *string
		want       error
	}{
		{"taken slug", p.ID, nil, ptr("taken"), store.ErrConflict},
		{"empty name", p.ID, ptr(""), nil, store.ErrInvalid},
		{"empty slug", p.ID, nil, ptr(""), store.ErrInvalid},
		{"unknown", "prj_missing", ptr("X"), nil, store.ErrNotFound},
	} {
		wantErr(t, s, tc.want, tc.name, func(tx *store.Tx) error {
			_, err := tx.UpdateProject(ctx, tc.id, tc.pName, tc.slg)
			return err
		})
	}

	// Archive and restore.
	setArchived := func(archived bool) store.Project {
		t.Helper()
		var got store.Project
		mustTx(t, s, func(tx *store.Tx) error {
			var err error
			got, err = tx.SetProjectArchived(ctx, p.ID, archived)
			return err
		})
		if stored, err := s.Project(ctx, p.ID); err != nil || !reflect.DeepEqual(stored, got) {
			t.Errorf("SetProjectArchived returned %+v, stored %+v, %v", got, stored, err)
		}
		return got
	}
	before := s.Now()
	archived := setArchived(true)
	after := s.Now()
	if archived.ArchivedAt == nil {
		t.Fatal("archive: ArchivedAt nil")
	}
	checkStamped(t, "ArchivedAt", *archived.ArchivedAt, before, after)
	checkStamped(t, "UpdatedAt", archived.UpdatedAt, before, after)
	if len(archived.Environments) != 3 {
		t.Errorf("archived project has %d environments", len(archived.Environments))
	}
	time.Sleep(2 * time.Millisecond)
	if again := setArchived(true); again.ArchivedAt == nil || !again.ArchivedAt.Equal(*archived.ArchivedAt) {
		t.Errorf("second archive: ArchivedAt %v, want %v", again.ArchivedAt, archived.ArchivedAt)
	}
	if restored := setArchived(false); restored.ArchivedAt != nil {
		t.Errorf("restore: ArchivedAt %v, want nil", restored.ArchivedAt)
	}
	wantErr(t, s, store.ErrNotFound, "archive unknown", func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, "prj_missing", true)
		return err
	})
}

func testResolveScope(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "owner@example.com")
	dev := newUser(t, s, "Dev", "dev@example.com")
	stranger := newUser(t, s, "Stranger", "stranger@example.com")
	o := newOrganization(t, s, "acme", owner.ID)
	addMember(t, s, o.ID, dev.ID, "developer,billing")
	p := newProject(t, s, o.ID, "web")
	env := p.Environments[2] // production
	other := newOrganization(t, s, "other", stranger.ID)
	otherProject := newProject(t, s, other.ID, "web")

	orgScope := store.Scope{OrganizationID: o.ID}
	projectScope := store.Scope{OrganizationID: o.ID, ProjectID: p.ID}
	envScope := store.Scope{OrganizationID: o.ID, ProjectID: p.ID, EnvironmentID: env.ID}
	withRole := func(sc store.Scope, role string) store.Scope { sc.MemberRole = role; return sc }
	archivedFlags := func(sc store.Scope, org, project bool) store.Scope {
		sc.OrganizationArchived, sc.ProjectArchived = org, project
		return sc
	}

	type check struct {
		name string
		ref  store.ScopeRef
		user string
		want store.Scope
	}
	checks := func(orgArchived, projectArchived bool) []check {
		org := archivedFlags(orgScope, orgArchived, false)
		prj := archivedFlags(projectScope, orgArchived, projectArchived)
		envs := archivedFlags(envScope, orgArchived, projectArchived)
		return []check{
			{"organization, owner", store.ScopeRef{OrganizationID: o.ID}, owner.ID, withRole(org, "owner")},
			{"organization, member", store.ScopeRef{OrganizationID: o.ID}, dev.ID, withRole(org, "developer,billing")},
			{"organization, non-member", store.ScopeRef{OrganizationID: o.ID}, stranger.ID, org},
			{"organization, no user", store.ScopeRef{OrganizationID: o.ID}, "", org},
			{"project, member", store.ScopeRef{ProjectID: p.ID}, dev.ID, withRole(prj, "developer,billing")},
			{"project, non-member", store.ScopeRef{ProjectID: p.ID}, stranger.ID, prj},
			{"project, no user", store.ScopeRef{ProjectID: p.ID}, "", prj},
			{"environment, owner", store.ScopeRef{EnvironmentID: env.ID}, owner.ID, withRole(envs, "owner")},
			{"environment, non-member", store.ScopeRef{EnvironmentID: env.ID}, stranger.ID, envs},
			{"environment, unknown user", store.ScopeRef{EnvironmentID: env.ID}, "usr_missing", envs},
			{"other organization's project", store.ScopeRef{ProjectID: otherProject.ID}, stranger.ID,
				store.Scope{OrganizationID: other.ID, ProjectID: otherProject.ID, MemberRole: "owner"}},
		}
	}
	run := func(stage string, cs []check) {
		t.Helper()
		for _, c := range cs {
			got, err := s.ResolveScope(ctx, c.ref, c.user)
			if err != nil || got != c.want {
				t.Errorf("%s: %s: %+v, %v; want %+v", stage, c.name, got, err, c.want)
			}
		}
	}
	run("active", checks(false, false))

	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, p.ID, true)
		return err
	})
	run("project archived", checks(false, true))
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetOrganizationArchived(ctx, o.ID, true)
		return err
	})
	run("both archived", checks(true, true))
	mustTx(t, s, func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, p.ID, false)
		return err
	})
	run("organization archived", checks(true, false))

	for _, ref := range []store.ScopeRef{
		{OrganizationID: "org_missing"},
		{ProjectID: "prj_missing"},
		{EnvironmentID: "env_missing"},
		{ProjectID: o.ID}, // an ID of the wrong kind
		{EnvironmentID: p.ID},
	} {
		if _, err := s.ResolveScope(ctx, ref, owner.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ResolveScope(%+v) = %v, want ErrNotFound", ref, err)
		}
	}
	for _, ref := range []store.ScopeRef{
		{},
		{OrganizationID: o.ID, ProjectID: p.ID},
		{ProjectID: p.ID, EnvironmentID: env.ID},
	} {
		if _, err := s.ResolveScope(ctx, ref, owner.ID); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ResolveScope(%+v) = %v, want ErrInvalid", ref, err)
		}
	}
}
