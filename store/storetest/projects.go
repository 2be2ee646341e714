package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Projects, their environments and roles, and scope resolution, part of runTenancy.

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
