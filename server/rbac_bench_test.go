package server

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Benchmarks of the /authorize decision. The data set follows the RBAC issue: 100 projects,
// 10 roles each (the 2 seeded + 8 with 10 permissions), 10 principals each (1,000 in all) bound
// to 3 roles each (3,000 bindings). A principal is never bound to the seeded "*" role, so
// every deny scans the same rows as an allow.
const (
	benchProjects           = 100
	benchRolesPerProject    = 8 // plus the 2 seeded ones
	benchPermissionsPerRole = 10
	benchPrincipals         = 10 // per project
	benchRolesPerPrincipal  = 3
	benchDenyPermission     = "nothing:granted"
)

// benchBackend is a database engine to benchmark on (apptest.BenchBackend).
type benchBackend struct {
	name string
	open func(tb testing.TB) *store.Store
}

// benchBackends returns SQLite and, when GATEHOUSE_TEST_POSTGRES_URL is set, PostgreSQL, each
// opening a fresh migrated database (apptest.BenchBackends).
func benchBackends(b *testing.B) []benchBackend {
	var out []benchBackend
	for _, be := range apptest.BenchBackends(b) {
		out = append(out, benchBackend{name: be.Name, open: be.Open})
	}
	return out
}

// benchPrincipal is one bound principal and a permission one of its roles grants.
type benchPrincipal struct {
	projectID, principalID, allowed string
}

// benchTenancy is the seeded data set: an organization owned by owner, its projects and every
// bound principal.
type benchTenancy struct {
	owner      store.User
	org        store.Organization
	projects   []store.Project
	principals []benchPrincipal
}

// seedRBAC writes the benchmark data set through the store, one transaction per project.
func seedRBAC(b testing.TB, st *store.Store) benchTenancy {
	b.Helper()
	ctx := context.Background()
	var ten benchTenancy
	ten.owner = store.User{Name: "Bench owner", Email: "bench-owner@example.com"}
	ten.org = store.Organization{Name: "Bench", Slug: "bench"}
	err := st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, &ten.owner, ""); err != nil {
			return err
		}
		_, err := tx.CreateOrganization(ctx, &ten.org, ten.owner.ID)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	for p := range benchProjects {
		project := store.Project{OrganizationID: ten.org.ID, Name: "Project " + strconv.Itoa(p), Slug: "project-" + strconv.Itoa(p)}
		err := st.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.CreateProject(ctx, &project); err != nil {
				return err
			}
			roles := make([]store.ProjectRole, benchRolesPerProject)
			for r := range roles {
				perms := make([]string, benchPermissionsPerRole)
				for i := range perms {
					perms[i] = fmt.Sprintf("resource%d:action%d", r, i)
				}
				roles[r] = store.ProjectRole{ProjectID: project.ID, Name: "Role " + strconv.Itoa(r),
					Slug: "role-" + strconv.Itoa(r), Permissions: perms}
				if err := tx.CreateProjectRole(ctx, &roles[r]); err != nil {
					return err
				}
			}
			for i := range benchPrincipals {
				id := fmt.Sprintf("user-%d-%d", p, i)
				for k := range benchRolesPerPrincipal {
					rb := store.RoleBinding{ProjectID: project.ID, RoleID: roles[(i+k)%benchRolesPerProject].ID,
						PrincipalType: store.PrincipalUser, PrincipalID: id}
					if err := tx.CreateRoleBinding(ctx, &rb); err != nil {
						return err
					}
				}
				// The last permission of the principal's last role.
				last := (i + benchRolesPerPrincipal - 1) % benchRolesPerProject
				ten.principals = append(ten.principals, benchPrincipal{project.ID, id,
					fmt.Sprintf("resource%d:action%d", last, benchPermissionsPerRole-1)})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		ten.projects = append(ten.projects, project)
	}
	return ten
}

// BenchmarkDecide measures store.Decide, the one query behind POST /authorize, on each backend:
// allow and deny, sequentially and from parallel goroutines, cycling through every principal.
func BenchmarkDecide(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			ten := seedRBAC(b, st)
			ctx := context.Background()
			decide := func(i int, allow bool) error {
				p := ten.principals[i%len(ten.principals)]
				perm := benchDenyPermission
				if allow {
					perm = p.allowed
				}
				allowed, roles, err := st.Decide(ctx, p.projectID, store.PrincipalUser, p.principalID, perm, st.Now())
				if err != nil || allowed != allow || len(roles) != benchRolesPerPrincipal {
					return fmt.Errorf("Decide(%+v, %s) = %v %v %v", p, perm, allowed, roles, err)
				}
				return nil
			}
			for _, allow := range []bool{true, false} {
				name := map[bool]string{true: "allow", false: "deny"}[allow]
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						if err := decide(i, allow); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(name+"-parallel", func(b *testing.B) {
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						i := int(time.Now().UnixNano())
						for pb.Next() {
							i++
							if err := decide(i&0x7fffffff, allow); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

// BenchmarkDecideBatch measures store.DecideBatch, the one query behind POST
// /authorize/batch, on each backend: the 100 mixed checks of one project (mixedChecks: 10
// principals × 10 permissions, half granted), cycling through the projects.
func BenchmarkDecideBatch(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			ten := seedRBAC(b, st)
			ctx := context.Background()
			type batch struct {
				projectID string
				checks    []store.Check
				allowed   []bool
			}
			var batches []batch
			for _, p := range ten.projects {
				checks, allowed := mixedChecks(ten, p.ID)
				batches = append(batches, batch{p.ID, checks, allowed})
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				bt := batches[i%len(batches)]
				res, err := st.DecideBatch(ctx, bt.projectID, bt.checks, st.Now(), false)
				if err != nil || len(res) != len(bt.checks) {
					b.Fatalf("DecideBatch: %d results, %v", len(res), err)
				}
				for k, r := range res {
					if r.Allowed != bt.allowed[k] {
						b.Fatalf("check %d: allowed %v, want %v", k, r.Allowed, bt.allowed[k])
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchBenchSize)/1000, "µs/check")
		})
	}
}
