package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestAuthOrgMembers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		org := w.createOrg(t, ada, "acme")
		users := map[string]testUser{}
		members := map[string]store.Member{}
		for _, c := range []struct{ name, role string }{
			{"Bob", RoleAdmin}, {"Cy", RoleDeveloper}, {"Di", RoleViewer}, {"Ed", RoleViewer},
		} {
			u := w.newUser(t, c.name, strings.ToLower(c.name)+"@example.com")
			users[c.name] = u
			members[c.name] = w.addMember(t, org.ID, u, c.role)
		}
		outsider := w.newUser(t, "Eve", "eve@example.com")
		id := org.ID

		// Paging, sorting and filtering map onto the store; total counts all matches.
		type page struct {
			Members []baMember `json:"members"`
			Total   int        `json:"total"`
		}
		for _, c := range []struct {
			name   string
			query  url.Values
			emails []string
			total  int
		}{
			{"first page", url.Values{"limit": {"2"}}, []string{"ada@example.com", "bob@example.com"}, 5},
			{"last page", url.Values{"limit": {"2"}, "offset": {"4"}}, []string{"ed@example.com"}, 5},
			{"by email desc", url.Values{"sortBy": {"email"}, "sortDirection": {"desc"}, "limit": {"2"}}, []string{"ed@example.com", "di@example.com"}, 5},
			{"viewers", url.Values{"filterField": {"role"}, "filterValue": {"viewer"}}, []string{"di@example.com", "ed@example.com"}, 2},
			{"name contains", url.Values{"filterField": {"name"}, "filterOperator": {"contains"}, "filterValue": {"D"}}, []string{"ada@example.com", "di@example.com", "ed@example.com"}, 3},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.query.Set("organizationId", id)
				var p page
				w.get(users["Di"], "list-members", c.query).decode(t, http.StatusOK, &p)
				var got []string
				for _, m := range p.Members {
					got = append(got, m.User.Email)
				}
				if strings.Join(got, " ") != strings.Join(c.emails, " ") || p.Total != c.total {
					t.Errorf("members %v total %d, want %v total %d", got, p.Total, c.emails, c.total)
				}
			})
		}

		body := func(memberID, role string) string {
			return fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":%s}`, id, memberID, role)
		}
		adaMember, err := w.store.Member(context.Background(), id, ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		w.run(t, []orgCase{
			{name: "outsider lists", as: outsider, method: "GET", route: "list-members", query: url.Values{"organizationId": {id}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "viewer updates a role", as: users["Di"], route: "update-member-role", body: body(members["Ed"].ID, `"admin"`), status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"},
			{name: "admin grants owner", as: users["Bob"], route: "update-member-role", body: body(members["Cy"].ID, `"owner"`), status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"},
			{name: "admin demotes the owner", as: users["Bob"], route: "update-member-role", body: body(adaMember.ID, `"viewer"`), status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"},
			{name: "unknown role", as: ada, route: "update-member-role", body: body(members["Cy"].ID, `"wizard"`), status: 400, code: "ROLE_NOT_FOUND"},
			{name: "unknown member", as: ada, route: "update-member-role", body: body("mem_missing", `"viewer"`), status: 404, code: "MEMBER_NOT_FOUND"},
			{name: "last owner demoted", as: ada, route: "update-member-role", body: body(adaMember.ID, `"admin"`), status: 400, code: "YOU_CANNOT_LEAVE_THE_ORGANIZATION_WITHOUT_AN_OWNER"},
			{name: "last owner removed", as: ada, route: "remove-member", body: `{"memberIdOrEmail":"ada@example.com","organizationId":"` + id + `"}`, status: 400, code: "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER"},
			{name: "last owner leaves", as: ada, route: "leave", body: `{"organizationId":"` + id + `"}`, status: 400, code: "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER"},
			{name: "developer removes", as: users["Cy"], route: "remove-member", body: `{"memberIdOrEmail":"ed@example.com","organizationId":"` + id + `"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER"},
			{name: "admin removes the owner", as: users["Bob"], route: "remove-member", body: `{"memberIdOrEmail":"ada@example.com","organizationId":"` + id + `"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER"},
			{name: "unknown member removed", as: ada, route: "remove-member", body: `{"memberIdOrEmail":"nobody@example.com","organizationId":"` + id + `"}`, status: 404, code: "MEMBER_NOT_FOUND"},
			{name: "outsider leaves", as: outsider, route: "leave", body: `{"organizationId":"` + id + `"}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
		})

		// update-member-role: one role or several.
		var m baMember
		res := w.post(users["Bob"], "update-member-role", body(members["Cy"].ID, `["developer","billing"]`))
		res.decode(t, http.StatusOK, &m)
		if m.ID != members["Cy"].ID || m.Role != "developer,billing" {
			t.Fatalf("updated member = %+v", m)
		}
		e := w.wantAudit(t, res, id, "member.update_role", users["Bob"].ID)
		if e.TargetID != members["Cy"].ID || e.Metadata["from"] != RoleDeveloper || e.Metadata["to"] != "developer,billing" {
			t.Errorf("audit = %+v", e)
		}

		// With a second owner the first may step down, and then leave.
		res = w.post(ada, "update-member-role", body(members["Bob"].ID, `"owner"`))
		res.decode(t, http.StatusOK, &m)
		w.wantAudit(t, res, id, "member.update_role", ada.ID)
		res = w.post(ada, "update-member-role", body(adaMember.ID, `"admin"`))
		res.decode(t, http.StatusOK, &m)
		if m.Role != RoleAdmin {
			t.Fatalf("ada after stepping down = %+v", m)
		}
		wantCode(t, w.post(users["Bob"], "leave", `{"organizationId":"`+id+`"}`), 400, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER")

		if w.activeOrg(t, ada) != id {
			t.Fatal("ada's active organization should be acme before leaving")
		}
		res = w.post(ada, "leave", `{"organizationId":"`+id+`"}`)
		res.decode(t, http.StatusOK, &m)
		if m.ID != adaMember.ID || m.UserID != ada.ID {
			t.Fatalf("left = %+v", m)
		}
		w.wantAudit(t, res, id, "member.leave", ada.ID)
		if got := w.activeOrg(t, ada); got != "" {
			t.Errorf("active organization after leaving = %q, want none", got)
		}

		// remove-member by id or email.
		var removed struct {
			Member baMember `json:"member"`
		}
		res = w.post(users["Bob"], "remove-member", `{"memberIdOrEmail":"ED@example.com","organizationId":"`+id+`"}`)
		res.decode(t, http.StatusOK, &removed)
		if removed.Member.ID != members["Ed"].ID {
			t.Fatalf("removed = %+v", removed)
		}
		w.wantAudit(t, res, id, "member.remove", users["Bob"].ID)
		res = w.post(users["Bob"], "remove-member", `{"memberIdOrEmail":"`+members["Di"].ID+`","organizationId":"`+id+`"}`)
		res.decode(t, http.StatusOK, &removed)
		if removed.Member.UserID != users["Di"].ID {
			t.Fatalf("removed by id = %+v", removed)
		}
		var p page
		w.get(users["Bob"], "list-members", url.Values{"organizationId": {id}}).decode(t, http.StatusOK, &p)
		if p.Total != 2 {
			t.Errorf("members left = %d, want 2 (Bob, Cy)", p.Total)
		}
	})
}
