package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestAuthOrgHasPermissionAndRoles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		admin := w.newUser(t, "Al", "al@example.com")
		dev := w.newUser(t, "Dev", "dev@example.com")
		viewer := w.newUser(t, "Vic", "vic@example.com")
		support := w.newUser(t, "Sue", "sue@example.com")
		outsider := w.newUser(t, "Eve", "eve@example.com")
		org := w.createOrg(t, ada, "acme")
		id := org.ID
		w.addMember(t, id, admin, RoleAdmin)
		w.addMember(t, id, dev, RoleDeveloper)
		w.addMember(t, id, viewer, RoleViewer)
		w.setActive(t, id, admin, dev, viewer, support)

		// Dynamic role: support may read and update tickets.
		var createdRole struct {
			Success    bool                `json:"success"`
			RoleData   baRole              `json:"roleData"`
			Statements map[string][]string `json:"statements"`
		}
		res := w.post(admin, "create-role", `{"organizationId":"`+id+`","role":"support","permission":{"ticket":["read","update"]}}`)
		res.decode(t, http.StatusOK, &createdRole)
		if !createdRole.Success || createdRole.RoleData.Role != "support" || createdRole.RoleData.OrganizationID != id ||
			strings.Join(createdRole.Statements["ticket"], ",") != "read,update" {
			t.Fatalf("create-role = %+v", createdRole)
		}
		w.wantAudit(t, res, id, "org_role.create", admin.ID)
		supportMember := w.addMember(t, id, support, "support")

		check := func(u testUser, permissions string) bool {
			t.Helper()
			var out struct {
				Error   *string `json:"error"`
				Success bool    `json:"success"`
			}
			res := w.post(u, "has-permission", `{"organizationId":"`+id+`",`+permissions+`}`)
			res.decode(t, http.StatusOK, &out)
			if out.Error != nil || !strings.Contains(res.Body.String(), `"error":null`) {
				t.Errorf("has-permission error = %v", out.Error)
			}
			return out.Success
		}
		for _, c := range []struct {
			name  string
			as    testUser
			perms string
			want  bool
		}{
			{"owner deletes the organization", ada, `"permissions":{"organization":["delete"]}`, true},
			{"admin cannot delete it", admin, `"permissions":{"organization":["delete"]}`, false},
			{"admin manages members", admin, `"permissions":{"member":["create","update","delete"],"invitation":["create","cancel"]}`, true},
			{"developer creates projects", dev, `"permissions":{"project":["create","read"]}`, true},
			{"developer cannot invite", dev, `"permissions":{"invitation":["create"]}`, false},
			{"viewer reads", viewer, `"permissions":{"project":["read"],"config":["read"]}`, true},
			{"viewer cannot reveal", viewer, `"permissions":{"config":["reveal"]}`, false},
			{"viewer, one of two denied", viewer, `"permissions":{"project":["read","create"]}`, false},
			{"dynamic role grants its statements", support, `"permissions":{"ticket":["read","update"]}`, true},
			{"dynamic role grants nothing else", support, `"permissions":{"ticket":["delete"]}`, false},
			{"dynamic role grants no control-plane permission", support, `"permissions":{"project":["read"]}`, false},
			{"deprecated permission key", support, `"permission":{"ticket":["read"]}`, true},
			{"fixed role lacks dynamic statements", ada, `"permissions":{"ticket":["read"]}`, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := check(c.as, c.perms); got != c.want {
					t.Errorf("has-permission = %v, want %v", got, c.want)
				}
			})
		}
		// Roles combine: viewer,support gets both.
		res = w.post(ada, "update-member-role", fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":["viewer","support"]}`, id, supportMember.ID))
		res.decode(t, http.StatusOK, new(baMember))
		if !check(support, `"permissions":{"ticket":["update"],"project":["read"]}`) {
			t.Error("viewer,support should grant ticket:update and project:read")
		}

		// Dynamic roles never widen /api/v1: a member holding only a dynamic role gets 403.
		res = w.post(ada, "update-member-role", fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":"support"}`, id, supportMember.ID))
		res.decode(t, http.StatusOK, new(baMember))
		w.do(support.as(request{method: http.MethodGet, path: "/api/v1/organizations/" + id})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")

		// Roles: reserved names, duplicates, permissions, lookups.
		w.run(t, []orgCase{
			{name: "reserved name", as: ada, route: "create-role", body: `{"role":"admin","permission":{}}`, status: 400, code: "ROLE_NAME_IS_ALREADY_TAKEN"},
			{name: "duplicate name", as: ada, route: "create-role", body: `{"role":"support","permission":{}}`, status: 409, code: "ROLE_NAME_IS_ALREADY_TAKEN"},
			{name: "viewer creates", as: viewer, route: "create-role", body: `{"role":"x","permission":{}}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE"},
			{name: "developer updates", as: dev, route: "update-role", body: `{"roleName":"support","data":{"permission":{}}}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_A_ROLE"},
			{name: "developer deletes", as: dev, route: "delete-role", body: `{"roleName":"support"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_DELETE_A_ROLE"},
			{name: "outsider lists", as: outsider, method: "GET", route: "list-roles", query: url.Values{"organizationId": {id}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "outsider asks", as: outsider, route: "has-permission", body: `{"organizationId":"` + id + `","permissions":{"project":["read"]}}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "nothing asked", as: ada, route: "has-permission", body: `{"permissions":{}}`, status: 400, code: "VALIDATION_ERROR"},
			{name: "unknown role", as: viewer, method: "GET", route: "get-role", query: url.Values{"roleName": {"nope"}}, status: 404, code: "ROLE_NOT_FOUND"},
			{name: "no role named", as: viewer, method: "GET", route: "get-role", status: 400, code: "VALIDATION_ERROR"},
			{name: "delete a fixed role", as: ada, route: "delete-role", body: `{"roleName":"viewer"}`, status: 400, code: "CANNOT_DELETE_A_PRE_DEFINED_ROLE"},
			{name: "rename to a fixed role", as: ada, route: "update-role", body: `{"roleName":"support","data":{"roleName":"owner"}}`, status: 400, code: "ROLE_NAME_IS_ALREADY_TAKEN"},
			{name: "delete while held", as: ada, route: "delete-role", body: `{"roleName":"support"}`, status: 400, code: "ROLE_IS_ASSIGNED_TO_MEMBERS"},
		})
		var got baRole
		w.get(viewer, "get-role", url.Values{"roleId": {createdRole.RoleData.ID}}).decode(t, http.StatusOK, &got)
		if got.Role != "support" || strings.Join(got.Permission["ticket"], ",") != "read,update" {
			t.Fatalf("get-role = %+v", got)
		}

		// Rename: the members holding the role follow, in the same transaction.
		var updated struct {
			Success  bool   `json:"success"`
			RoleData baRole `json:"roleData"`
		}
		res = w.post(admin, "update-role", `{"roleName":"support","data":{"roleName":"helpdesk","permission":{"ticket":["read"]}}}`)
		res.decode(t, http.StatusOK, &updated)
		if !updated.Success || updated.RoleData.Role != "helpdesk" || updated.RoleData.ID != createdRole.RoleData.ID {
			t.Fatalf("update-role = %+v", updated)
		}
		if e := w.wantAudit(t, res, id, "org_role.update", admin.ID); e.Metadata["renamedFrom"] != "support" {
			t.Errorf("audit metadata = %v", e.Metadata)
		}
		if m, err := w.store.Member(context.Background(), id, support.ID); err != nil || m.Role != "helpdesk" {
			t.Fatalf("member after rename = %q, %v", m.Role, err)
		}
		if !check(support, `"permissions":{"ticket":["read"]}`) || check(support, `"permissions":{"ticket":["update"]}`) {
			t.Error("renamed role should grant exactly its new statements")
		}

		// Delete once nobody holds it.
		res = w.post(ada, "update-member-role", fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":"viewer"}`, id, supportMember.ID))
		res.decode(t, http.StatusOK, new(baMember))
		res = w.post(ada, "delete-role", `{"roleName":"helpdesk"}`)
		res.decode(t, http.StatusOK, new(map[string]any))
		w.wantAudit(t, res, id, "org_role.delete", ada.ID)
		wantCode(t, w.get(viewer, "get-role", url.Values{"roleName": {"helpdesk"}}), 404, "ROLE_NOT_FOUND")
	})
}

func TestAuthOrgRoleLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		org := w.createOrg(t, ada, "acme")
		for i := range store.MaxOrgRoles {
			res := w.post(ada, "create-role", fmt.Sprintf(`{"role":"role-%02d","permission":{"ticket":["read"]}}`, i))
			if res.Code != http.StatusOK {
				t.Fatalf("role %d: %d %s", i, res.Code, res.Body)
			}
		}
		res := w.post(ada, "create-role", `{"role":"one-too-many","permission":{}}`)
		wantCode(t, res, http.StatusBadRequest, "TOO_MANY_ROLES")
		var p baProblem
		_ = json.Unmarshal(res.Body.Bytes(), &p)
		if p.Message != "An organization may define at most 25 roles" {
			t.Errorf("message = %q", p.Message)
		}
		var roles []baRole
		w.get(ada, "list-roles", nil).decode(t, http.StatusOK, &roles)
		if len(roles) != store.MaxOrgRoles || roles[0].Role != "role-00" || roles[0].OrganizationID != org.ID {
			t.Fatalf("list-roles: %d roles, first %+v", len(roles), roles[0])
		}
	})
}

// TestRoleLists: every reader of a comma-joined role list trims entries and skips empty ones.
func TestRoleLists(t *testing.T) {
	if got := splitRoles(" admin, ,owner,admin ,"); strings.Join(got, "|") != "admin|owner" {
		t.Errorf("splitRoles = %q, want [admin owner]", got)
	}
	if got := splitRoles(""); got != nil {
		t.Errorf("splitRoles(\"\") = %q, want none", got)
	}
	for _, c := range []struct {
		list, role string
		want       bool
	}{
		{"admin, owner", "owner", true},
		{"admin,owner2", "owner", false},
		{" owner ", "owner", true},
		{",,", "", false},
	} {
		if got := hasRole(c.list, c.role); got != c.want {
			t.Errorf("hasRole(%q, %q) = %v, want %v", c.list, c.role, got, c.want)
		}
	}
	for _, c := range []struct {
		list, perm string
		want       bool
	}{
		{"viewer, developer", "config:update", true},
		{"viewer,,", "config:update", false},
		{"auditor, viewer", "config:read", true},
		{" billing ", "billing:manage", true},
		{"owner2", "config:read", false},
	} {
		if got := roleGrants(c.list, c.perm); got != c.want {
			t.Errorf("roleGrants(%q, %q) = %v, want %v", c.list, c.perm, got, c.want)
		}
	}
}
