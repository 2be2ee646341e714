package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runRBACDecisions covers the reads beyond one decision: DecideBatch,
// EffectivePermissions and PermissionHolders.
func runRBACDecisions(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("DecideBatch", func(t *testing.T) { testDecideBatch(t, open) })
	t.Run("DecideBatchLimits", func(t *testing.T) { testDecideBatchLimits(t, open) })
	t.Run("EffectivePermissions", func(t *testing.T) { testEffectivePermissions(t, open) })
	t.Run("PermissionHolders", func(t *testing.T) { testPermissionHolders(t, open) })
	t.Run("PermissionHoldersPaging", func(t *testing.T) { testPermissionHoldersPaging(t, open) })
}

// decisionsAt is the time the decision fixture is read at.
var decisionsAt = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// newDecisionFixture writes, in f.project, with literal ids (every time
// relative to decisionsAt):
//
//	role_editor  "editor"   document:read, document:write
//	role_super   "super"    *, document:delete
//	role_odd     "odd"      quote:"x", back\slash
//	role_audit   "auditor"  audit:read
//	role_other   "other"    * (in f.otherProject)
//
//	rb_1  editor   user alice             never expires
//	rb_2  auditor  user alice             expires at decisionsAt (so expired)
//	rb_3  super    user root              expires a microsecond after decisionsAt
//	rb_4  odd      user o"dd              never
//	rb_5  auditor  service_account alice  expired an hour before
//	rb_6  other    user alice             (in the other project)
func newDecisionFixture(t *testing.T, open func(t *testing.T) *store.Store) rbacFixture {
	t.Helper()
	f := newRBACFixture(t, open)
	role := func(id, projectID, slug string, permissions ...string) store.ProjectRole {
		r := store.ProjectRole{ID: id, ProjectID: projectID, Name: "Role " + slug, Slug: slug, Permissions: permissions}
		mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreateProjectRole(testContext(t), &r) })
		return r
	}
	bind := func(id string, r store.ProjectRole, typ, principal string, expires *time.Time) {
		b := store.RoleBinding{ID: id, ProjectID: r.ProjectID, RoleID: r.ID, PrincipalType: typ, PrincipalID: principal, ExpiresAt: expires}
		mustTx(t, f.s, func(tx *store.Tx) error { return tx.CreateRoleBinding(testContext(t), &b) })
	}
	at := func(d time.Duration) *time.Time { v := decisionsAt.Add(d); return &v }
	editor := role("role_editor", f.project.ID, "editor", "document:read", "document:write")
	super := role("role_super", f.project.ID, "super", "*", "document:delete")
	odd := role("role_odd", f.project.ID, "odd", `quote:"x"`, `back\slash`)
	audit := role("role_audit", f.project.ID, "auditor", "audit:read")
	other := role("role_other", f.otherProject.ID, "other", "*")
	bind("rb_1", editor, store.PrincipalUser, "alice", nil)
	bind("rb_2", audit, store.PrincipalUser, "alice", at(0))
	bind("rb_3", super, store.PrincipalUser, "root", at(time.Microsecond))
	bind("rb_4", odd, store.PrincipalUser, `o"dd`, nil)
	bind("rb_5", audit, store.PrincipalServiceAccount, "alice", at(-time.Hour))
	bind("rb_6", other, store.PrincipalUser, "alice", nil)
	return f
}

func testDecideBatch(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newDecisionFixture(t, open)
	expiredAt := decisionsAt
	rootExpires := decisionsAt.Add(time.Microsecond)
	saExpired := decisionsAt.Add(-time.Hour)
	editor := store.CheckedBinding{BindingID: "rb_1", RoleID: "role_editor", RoleSlug: "editor"}
	auditor := store.CheckedBinding{BindingID: "rb_2", RoleID: "role_audit", RoleSlug: "auditor", ExpiresAt: &expiredAt, Expired: true}
	super := store.CheckedBinding{BindingID: "rb_3", RoleID: "role_super", RoleSlug: "super", ExpiresAt: &rootExpires}
	odd := store.CheckedBinding{BindingID: "rb_4", RoleID: "role_odd", RoleSlug: "odd"}
	saAuditor := store.CheckedBinding{BindingID: "rb_5", RoleID: "role_audit", RoleSlug: "auditor", ExpiresAt: &saExpired, Expired: true}
	matched := func(b store.CheckedBinding, m string) store.CheckedBinding { b.Matched = m; return b }
	for _, tc := range []struct {
		name   string
		check  store.Check
		want   store.CheckResult
		reason store.DenialReason
	}{
		{"granted by one of two bindings", store.Check{PrincipalType: "user", PrincipalID: "alice", Permission: "document:read"},
			store.CheckResult{Decision: store.Decision{Allowed: true, Roles: []string{"editor"}},
				Bindings: []store.CheckedBinding{auditor, matched(editor, "document:read")}}, ""},
		{"a binding expiring exactly now no longer grants", store.Check{PrincipalType: "user", PrincipalID: "alice", Permission: "audit:read"},
			store.CheckResult{Decision: store.Decision{Allowed: false, Roles: []string{"editor"}},
				Bindings: []store.CheckedBinding{matched(auditor, "audit:read"), editor}}, store.DeniedBindingsExpired},
		{"no role grants", store.Check{PrincipalType: "user", PrincipalID: "alice", Permission: "invoice:read"},
			store.CheckResult{Decision: store.Decision{Allowed: false, Roles: []string{"editor"}},
				Bindings: []store.CheckedBinding{auditor, editor}}, store.DeniedNotGranted},
		{"* grants, a microsecond before expiry", store.Check{PrincipalType: "user", PrincipalID: "root", Permission: "anything:else"},
			store.CheckResult{Decision: store.Decision{Allowed: true, Roles: []string{"super"}},
				Bindings: []store.CheckedBinding{matched(super, "*")}, Until: &rootExpires}, ""},
		{"the exact string wins over *", store.Check{PrincipalType: "user", PrincipalID: "root", Permission: "document:delete"},
			store.CheckResult{Decision: store.Decision{Allowed: true, Roles: []string{"super"}},
				Bindings: []store.CheckedBinding{matched(super, "document:delete")}, Until: &rootExpires}, ""},
		{"* asked for literally", store.Check{PrincipalType: "user", PrincipalID: "root", Permission: "*"},
			store.CheckResult{Decision: store.Decision{Allowed: true, Roles: []string{"super"}},
				Bindings: []store.CheckedBinding{matched(super, "*")}, Until: &rootExpires}, ""},
		{"* asked for, not held", store.Check{PrincipalType: "user", PrincipalID: "alice", Permission: "*"},
			store.CheckResult{Decision: store.Decision{Allowed: false, Roles: []string{"editor"}},
				Bindings: []store.CheckedBinding{auditor, editor}}, store.DeniedNotGranted},
		{"quotes and backslashes pass intact", store.Check{PrincipalType: "user", PrincipalID: `o"dd`, Permission: `back\slash`},
			store.CheckResult{Decision: store.Decision{Allowed: true, Roles: []string{"odd"}},
				Bindings: []store.CheckedBinding{matched(odd, `back\slash`)}}, ""},
		{"the type is part of the principal", store.Check{PrincipalType: "service_account", PrincipalID: "alice", Permission: "document:read"},
			store.CheckResult{Decision: store.Decision{Allowed: false, Roles: []string{}},
				Bindings: []store.CheckedBinding{saAuditor}}, store.DeniedNotGranted},
		{"no bindings", store.Check{PrincipalType: "user", PrincipalID: "nobody", Permission: "document:read"},
			store.CheckResult{Decision: store.Decision{Allowed: false, Roles: []string{}},
				Bindings: []store.CheckedBinding{}}, store.DeniedNoBindings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, explain := range []bool{true, false} {
				// Until: the earliest expiry of the principal's unexpired bindings (root's, a
				// microsecond ahead; alice's expired auditor binding does not count).
				want := tc.want
				if !explain {
					want.Bindings = nil // the decision alone
				}
				// Alone, then in the middle of a batch of every case that asks for few permissions
				// (the store probes them), then in one that asks for many (it reads every permission
				// of the bound roles): the same answer.
				got, err := f.s.DecideBatch(testContext(t), f.project.ID, []store.Check{tc.check}, decisionsAt, explain)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, []store.CheckResult{want}) {
					t.Errorf("alone, explain %v:\n got %+v\nwant %+v", explain, got, want)
				}
				if r := got[0].DenialReason(); explain && r != tc.reason {
					t.Errorf("reason %q, want %q", r, tc.reason)
				}
				few := []store.Check{
					{PrincipalType: "user", PrincipalID: "alice", Permission: "document:write"},
					tc.check,
					{PrincipalType: "user", PrincipalID: "root", Permission: "x:y"},
					tc.check,
				}
				many := append(slices.Clone(few), store.Check{PrincipalType: "user", PrincipalID: "alice", Permission: "many:a"},
					store.Check{PrincipalType: "user", PrincipalID: "root", Permission: "many:b"},
					store.Check{PrincipalType: "user", PrincipalID: "nobody", Permission: "many:c"},
					store.Check{PrincipalType: "user", PrincipalID: `o"dd`, Permission: "many:d"})
				for name, checks := range map[string][]store.Check{"few": few, "many": many} {
					got, err = f.s.DecideBatch(testContext(t), f.project.ID, checks, decisionsAt, explain)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(checks) || !reflect.DeepEqual(got[1], want) || !reflect.DeepEqual(got[3], want) {
						t.Errorf("in a batch asking for %s permissions, explain %v:\n got %+v\nwant it at 1 and 3: %+v", name, explain, got, want)
					}
					if len(got) == len(checks) && (!got[0].Allowed || !got[2].Allowed) {
						t.Errorf("in a batch, the other checks: %+v and %+v, want both allowed", got[0], got[2])
					}
				}
			}
		})
	}
	t.Run("another project's bindings never count", func(t *testing.T) {
		got, err := f.s.DecideBatch(testContext(t), f.otherProject.ID, []store.Check{{PrincipalType: "user", PrincipalID: "alice", Permission: "document:read"}}, decisionsAt, true)
		want := []store.CheckResult{{Decision: store.Decision{Allowed: true, Roles: []string{"other"}},
			Bindings: []store.CheckedBinding{{BindingID: "rb_6", RoleID: "role_other", RoleSlug: "other", Matched: "*"}}}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("other project: %+v %v, want %+v", got, err, want)
		}
		got, err = f.s.DecideBatch(testContext(t), "prj_missing", []store.Check{{PrincipalType: "user", PrincipalID: "alice", Permission: "document:read"}}, decisionsAt, true)
		want = []store.CheckResult{{Decision: store.Decision{Allowed: false, Roles: []string{}}, Bindings: []store.CheckedBinding{}}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("unknown project: %+v %v, want %+v", got, err, want)
		}
	})
}

// testDecideBatchLimits: 1 to MaxChecks checks; none or more are ErrInvalid.
func testDecideBatchLimits(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newDecisionFixture(t, open)
	checks := make([]store.Check, 101)
	for i := range checks {
		checks[i] = store.Check{PrincipalType: "user", PrincipalID: fmt.Sprintf("p%d", i%7), Permission: fmt.Sprintf("r:a%d", i%13)}
	}
	checks[99] = store.Check{PrincipalType: "user", PrincipalID: "alice", Permission: "document:write"}
	got, err := f.s.DecideBatch(testContext(t), f.project.ID, checks[:100], decisionsAt, false)
	if err != nil || len(got) != 100 || !got[99].Allowed || got[98].Allowed {
		t.Errorf("100 checks: %d results, err %v", len(got), err)
	}
	for _, n := range []int{0, 101} {
		if _, err := f.s.DecideBatch(testContext(t), f.project.ID, checks[:n], decisionsAt, false); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%d checks: %v, want ErrInvalid", n, err)
		}
	}
}

func testEffectivePermissions(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newDecisionFixture(t, open)
	rootExpires := decisionsAt.Add(time.Microsecond)
	for _, tc := range []struct {
		name, project, typ, id string
		at                     time.Time
		want                   store.Permissions
	}{
		{"an expired binding beside a live one", f.project.ID, "user", "alice", decisionsAt, store.Permissions{
			Roles:       []store.EffectiveRole{{BindingID: "rb_1", RoleID: "role_editor", Slug: "editor"}},
			Permissions: []string{"document:read", "document:write"}}},
		{"a second earlier, both count", f.project.ID, "user", "alice", decisionsAt.Add(-time.Second), store.Permissions{
			Roles: []store.EffectiveRole{{BindingID: "rb_2", RoleID: "role_audit", Slug: "auditor", ExpiresAt: &decisionsAt},
				{BindingID: "rb_1", RoleID: "role_editor", Slug: "editor"}},
			Permissions: []string{"audit:read", "document:read", "document:write"}}},
		{"* is listed and flagged", f.project.ID, "user", "root", decisionsAt, store.Permissions{
			Roles:       []store.EffectiveRole{{BindingID: "rb_3", RoleID: "role_super", Slug: "super", ExpiresAt: &rootExpires}},
			Permissions: []string{"*", "document:delete"}, Wildcard: true}},
		{"sorted bytewise", f.project.ID, "user", `o"dd`, decisionsAt, store.Permissions{
			Roles:       []store.EffectiveRole{{BindingID: "rb_4", RoleID: "role_odd", Slug: "odd"}},
			Permissions: []string{`back\slash`, `quote:"x"`}}},
		{"only expired bindings", f.project.ID, "service_account", "alice", decisionsAt, store.Permissions{
			Roles: []store.EffectiveRole{}, Permissions: []string{}}},
		{"nobody", f.project.ID, "user", "nobody", decisionsAt, store.Permissions{
			Roles: []store.EffectiveRole{}, Permissions: []string{}}},
		{"the other project", f.otherProject.ID, "user", "alice", decisionsAt, store.Permissions{
			Roles:       []store.EffectiveRole{{BindingID: "rb_6", RoleID: "role_other", Slug: "other"}},
			Permissions: []string{"*"}, Wildcard: true}},
	} {
		got, err := f.s.EffectivePermissions(testContext(t), tc.project, tc.typ, tc.id, tc.at)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
}

func testPermissionHolders(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newDecisionFixture(t, open)
	holder := func(typ, id string, roles ...string) store.PermissionHolder {
		return store.PermissionHolder{PrincipalRef: store.PrincipalRef{Type: typ, ID: id}, Roles: roles}
	}
	for _, tc := range []struct {
		name, permission string
		filter           store.HolderFilter
		at               time.Time
		want             []store.PermissionHolder
	}{
		{"directly and through *", "document:read", store.HolderFilter{}, decisionsAt,
			[]store.PermissionHolder{holder("user", "alice", "editor"), holder("user", "root", "super")}},
		{"expired bindings hold nothing", "audit:read", store.HolderFilter{}, decisionsAt,
			[]store.PermissionHolder{holder("user", "root", "super")}},
		{"before they expired", "audit:read", store.HolderFilter{}, decisionsAt.Add(-2 * time.Hour),
			[]store.PermissionHolder{holder("service_account", "alice", "auditor"), holder("user", "alice", "auditor"), holder("user", "root", "super")}},
		{"one principal type", "audit:read", store.HolderFilter{PrincipalType: "service_account"}, decisionsAt.Add(-2 * time.Hour),
			[]store.PermissionHolder{holder("service_account", "alice", "auditor")}},
		{"a role holding both the string and *, once", "document:delete", store.HolderFilter{}, decisionsAt,
			[]store.PermissionHolder{holder("user", "root", "super")}},
		{"after the * binding expired", "document:delete", store.HolderFilter{}, decisionsAt.Add(time.Microsecond),
			[]store.PermissionHolder{}},
		{"an escaped permission", `quote:"x"`, store.HolderFilter{}, decisionsAt,
			[]store.PermissionHolder{holder("user", `o"dd`, "odd"), holder("user", "root", "super")}},
		{"after a principal", "document:read", store.HolderFilter{After: &store.PrincipalRef{Type: "user", ID: "alice"}}, decisionsAt,
			[]store.PermissionHolder{holder("user", "root", "super")}},
		{"after a principal that holds nothing", "document:read", store.HolderFilter{After: &store.PrincipalRef{Type: "user", ID: "b"}}, decisionsAt,
			[]store.PermissionHolder{holder("user", "root", "super")}},
	} {
		got, more, err := f.s.PermissionHolders(testContext(t), f.project.ID, tc.permission, tc.filter, tc.at)
		if err != nil || more || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v more=%v %v\nwant %+v", tc.name, got, more, err, tc.want)
		}
	}
	got, more, err := f.s.PermissionHolders(testContext(t), f.otherProject.ID, "document:read", store.HolderFilter{}, decisionsAt)
	if want := []store.PermissionHolder{holder("user", "alice", "other")}; err != nil || more || !reflect.DeepEqual(got, want) {
		t.Errorf("other project: %+v %v %v, want %+v", got, more, err, want)
	}
}

// testPermissionHoldersPaging: 250 holders (50 service accounts, 200 users)
// in bytewise order, the same through every page size; a holder bound to
// both granting roles counts once, with both.
func testPermissionHoldersPaging(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newRBACFixture(t, open)
	reader := f.role(t, f.project.ID, "reader", "doc:read")
	writer := f.role(t, f.project.ID, "writer", "doc:read", "doc:write")
	// Principal i (0 to 249) is a service account when i%5 == 0, else a user; its id is
	// "Z-", "a-" or "é-" (by i%3) and 249-i in three digits; it is bound to reader, and to
	// writer too when i is odd. Byte order puts "Z" before "a" before "é".
	mustTx(t, f.s, func(tx *store.Tx) error {
		for i := range 250 {
			typ := store.PrincipalUser
			if i%5 == 0 {
				typ = store.PrincipalServiceAccount
			}
			id := fmt.Sprintf("%s-%03d", []string{"Z", "a", "é"}[i%3], 249-i)
			for _, r := range []store.ProjectRole{reader, writer}[:1+i%2] {
				b := store.RoleBinding{ProjectID: f.project.ID, RoleID: r.ID, PrincipalType: typ, PrincipalID: id}
				if err := tx.CreateRoleBinding(testContext(t), &b); err != nil {
					return err
				}
			}
		}
		return nil
	})
	read := func(limit int) []string {
		t.Helper()
		var out []string
		filter := store.HolderFilter{Limit: limit}
		for pages := 0; ; pages++ {
			if pages > 300 {
				t.Fatal("paging does not end")
			}
			page, more, err := f.s.PermissionHolders(testContext(t), f.project.ID, "doc:read", filter, f.s.Now())
			if err != nil {
				t.Fatal(err)
			}
			wantLen := limit
			switch {
			case limit == 0:
				wantLen = store.DefaultHolderPage
			case limit > store.MaxHolderPage:
				wantLen = store.MaxHolderPage
			}
			if (more && len(page) != wantLen) || len(page) > wantLen {
				t.Fatalf("limit %d: a page of %d (more to come: %v), want %d", limit, len(page), more, wantLen)
			}
			for _, h := range page {
				out = append(out, fmt.Sprintf("%s %s %v", h.Type, h.ID, h.Roles))
			}
			if !more {
				return out
			}
			filter.After = &page[len(page)-1].PrincipalRef
		}
	}
	all := read(1000)
	if len(all) != 250 {
		t.Fatalf("%d holders, want 250", len(all))
	}
	for i, want := range map[int]string{
		0:   "service_account Z-009 [reader]",        // i = 240
		1:   "service_account Z-024 [reader writer]", // i = 225
		2:   "service_account Z-039 [reader]",        // i = 210
		49:  "service_account é-244 [reader writer]", // i = 5
		50:  "user Z-000 [reader writer]",            // i = 249
		247: "user é-238 [reader writer]",            // i = 11
		248: "user é-241 [reader]",                   // i = 8
		249: "user é-247 [reader]",                   // i = 2
	} {
		if all[i] != want {
			t.Errorf("holder %d = %q, want %q", i, all[i], want)
		}
	}
	for _, limit := range []int{0, 7, store.MaxHolderPage} {
		if got := read(limit); !reflect.DeepEqual(got, all) {
			t.Errorf("limit %d: %d holders, differing from the single page", limit, len(got))
		}
	}
}
