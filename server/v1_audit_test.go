package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// auditFixture writes 250 entries into project prj of org, directly through the store: entry i
// (1..250) has id aud_fNNN, occurs at 2030-01-01T00:00:00Z + i/2 seconds (so pairs share a
// timestamp and the id breaks the tie), action config.update when i%5 == 0 else
// project.update, actor usr_even or usr_odd, and target tgt_ten when i%10 == 0 else tgt_other.
// Ten more entries belong to another project of the same organization (aud_x001..aud_x010, at
// 2029).
func auditFixture(t *testing.T, st *store.Store, org, prj, otherPrj string) {
	t.Helper()
	ctx := context.Background()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	err := st.InTx(ctx, func(tx *store.Tx) error {
		for i := 1; i <= 250; i++ {
			e := store.AuditEntry{ID: fmt.Sprintf("aud_f%03d", i), ActorType: store.ActorUser, ActorID: "usr_odd",
				Action: "project.update", TargetType: "project", TargetID: "tgt_other", OrganizationID: org, ProjectID: prj,
				OccurredAt: base.Add(time.Duration(i/2) * time.Second)}
			if i%2 == 0 {
				e.ActorID = "usr_even"
			}
			if i%5 == 0 {
				e.Action = "config.update"
			}
			if i%10 == 0 {
				e.TargetID = "tgt_ten"
			}
			if err := tx.AppendAudit(ctx, &e); err != nil {
				return err
			}
		}
		for i := 1; i <= 10; i++ {
			e := store.AuditEntry{ID: fmt.Sprintf("aud_x%03d", i), ActorType: store.ActorUser, ActorID: "usr_odd",
				Action: "project.update", OrganizationID: org, ProjectID: otherPrj,
				OccurredAt: base.Add(-time.Duration(i) * time.Hour)}
			if err := tx.AppendAudit(ctx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fids returns the fixture ids aud_fNNN for NNN from..to by step (descending when step < 0).
func fids(from, to, step int) []string {
	var out []string
	for i := from; (step < 0 && i >= to) || (step > 0 && i <= to); i += step {
		out = append(out, fmt.Sprintf("aud_f%03d", i))
	}
	return out
}

// auditPages follows x-next-cursor from path with query q and returns each page's ids.
func auditPages(t *testing.T, app *testApp, u testUser, path string, q url.Values) [][]string {
	t.Helper()
	var pages [][]string
	for range 10 {
		res := app.do(u.as(request{method: "GET", path: path + "?" + q.Encode()}))
		var page envelope[[]auditBody]
		res.decode(t, http.StatusOK, &page)
		ids := make([]string, len(page.Data))
		for i, e := range page.Data {
			ids[i] = e.ID
		}
		pages = append(pages, ids)
		next := res.Header().Get("x-next-cursor")
		if next == "" {
			return pages
		}
		q.Set("cursor", next)
	}
	t.Fatalf("more than 10 pages of %s", path)
	return nil
}

func wantPages(t *testing.T, name string, got [][]string, want ...[]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: pages\n%v\nwant\n%v", name, got, want)
	}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestAuditLogPagingAndFilters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		owner, org, prj := app.newBareProject(t)
		other := store.Project{Name: "Other", Slug: "other", OrganizationID: org.ID}
		if err := st.InTx(context.Background(), func(tx *store.Tx) error { return tx.CreateProject(context.Background(), &other) }); err != nil {
			t.Fatal(err)
		}
		auditFixture(t, st, org.ID, prj.ID, other.ID)
		prjPath := "/api/v1/projects/" + prj.ID + "/audit-logs"
		orgPath := "/api/v1/organizations/" + org.ID + "/audit-logs"

		wantPages(t, "project, no filter", auditPages(t, app, owner, prjPath, url.Values{}),
			fids(250, 151, -1), fids(150, 51, -1), fids(50, 1, -1))
		// Exactly two full pages: the second has no cursor.
		wantPages(t, "action=project.update",
			auditPages(t, app, owner, prjPath, url.Values{"action": {"project.update"}}),
			notMultiples(250, 126, 5), notMultiples(125, 1, 5))
		wantPages(t, "action+actorId",
			auditPages(t, app, owner, prjPath, url.Values{"action": {"config.update"}, "actorId": {"usr_even"}}),
			fids(250, 10, -10))
		wantPages(t, "targetId", auditPages(t, app, owner, prjPath, url.Values{"targetId": {"tgt_ten"}}),
			fids(250, 10, -10))
		// since is inclusive, until exclusive: seconds 100..109 are entries 200..219.
		wantPages(t, "since+until", auditPages(t, app, owner, prjPath,
			url.Values{"since": {"2030-01-01T00:01:40Z"}, "until": {"2030-01-01T00:01:50Z"}}),
			fids(219, 200, -1))
		wantPages(t, "since only", auditPages(t, app, owner, prjPath, url.Values{"since": {"2030-01-01T00:02:00Z"}}),
			fids(250, 240, -1))
		wantPages(t, "no match", auditPages(t, app, owner, prjPath, url.Values{"actorId": {"usr_nobody"}}), []string{})

		// The organization's log holds both projects: after the fixture's 250, the other
		// project's ten (older), then the entries the setup wrote, if any.
		orgPages := auditPages(t, app, owner, orgPath, url.Values{"actorId": {"usr_odd"}})
		wantPages(t, "organization, actorId=usr_odd", orgPages,
			concat(fids(249, 51, -2)),
			concat(fids(49, 1, -2), []string{"aud_x001", "aud_x002", "aud_x003", "aud_x004", "aud_x005",
				"aud_x006", "aud_x007", "aud_x008", "aud_x009", "aud_x010"}))

		// Bad values: 400 with the paths, on either listing.
		for _, path := range []string{prjPath, orgPath} {
			for _, c := range []struct{ query, path string }{
				{"action=Not%20An%20Action", "query.action"},
				{"since=yesterday", "query.since"},
				{"until=2030-13-01T00:00:00Z", "query.until"},
				{"since=2030-01-01T00:00:00Z&until=2030-01-01T00:00:00Z", "query.until"},
				{"cursor=not-a-cursor", "query.cursor"},
				{"cursor=" + url.QueryEscape("bm8tbnVsLWJ5dGU"), "query.cursor"},
				{"actorId=", "query.actorId"},
			} {
				p := app.do(owner.as(request{method: "GET", path: path + "?" + c.query})).
					wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				wantPaths(t, p.Errors, c.path)
			}
		}
	})
}

// notMultiples returns the fixture ids from..to (descending) that are not multiples of n.
func notMultiples(from, to, n int) []string {
	var out []string
	for i := from; i >= to; i-- {
		if i%n != 0 {
			out = append(out, fmt.Sprintf("aud_f%03d", i))
		}
	}
	return out
}

// newBareProject is an organization with one project and its owner, written through the store
// (no audit entries, no fixtures).
func (a *testApp) newBareProject(t *testing.T) (testUser, store.Organization, store.Project) {
	t.Helper()
	ctx := context.Background()
	owner := a.newFixtureUser(t, "Owner", "owner@example.com")
	org := store.Organization{Name: "Acme", Slug: "acme"}
	prj := store.Project{Name: "Storefront", Slug: "storefront"}
	err := a.store.InTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.CreateOrganization(ctx, &org, owner.ID); err != nil {
			return err
		}
		prj.OrganizationID = org.ID
		return tx.CreateProject(ctx, &prj)
	})
	if err != nil {
		t.Fatal(err)
	}
	return owner, org, prj
}
