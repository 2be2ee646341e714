package storetest

import (
	"errors"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runTenancy covers organizations (here), members (members.go), invitations
// (invitations.go), dynamic organization roles (org_roles.go), projects with
// environments and project roles, and scope resolution (projects.go).
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
