package server

import "github.com/gatehouse-dev/gatehouse/store"

// The control-plane permissions. Roles are fixed; which permission an operation needs is
// declared in the spec (x-permission), never here.
const (
	PermOrganizationUpdate = "organization:update"
	PermOrganizationDelete = "organization:delete"
	PermMemberManage       = "member:manage"
	PermProjectRead        = "project:read"
	PermProjectCreate      = "project:create"
	PermProjectUpdate      = "project:update"
	PermProjectDelete      = "project:delete"
	PermCredentialRead     = "credential:read"
	PermCredentialManage   = "credential:manage"
	PermConfigRead         = "config:read"
	PermConfigReveal       = "config:reveal"
	PermConfigUpdate       = "config:update"
	PermConfigDelete       = "config:delete"
	PermUsageRead          = "usage:read"
	PermUsageWrite         = "usage:write"
	PermBillingRead        = "billing:read"
	PermBillingManage      = "billing:manage"
	PermAuditRead          = "audit:read"
)

// The five fixed control-plane roles.
const (
	RoleOwner     = "owner"
	RoleAdmin     = "admin"
	RoleDeveloper = "developer"
	RoleBilling   = "billing"
	RoleViewer    = "viewer"
)

// allPermissions lists every control-plane permission.
var allPermissions = []string{
	PermOrganizationUpdate, PermOrganizationDelete, PermMemberManage,
	PermProjectRead, PermProjectCreate, PermProjectUpdate, PermProjectDelete,
	PermCredentialRead, PermCredentialManage,
	PermConfigRead, PermConfigReveal, PermConfigUpdate, PermConfigDelete,
	PermUsageRead, PermUsageWrite, PermBillingRead, PermBillingManage, PermAuditRead,
}

// readPermissions are the ":read" permissions every role holds (config:reveal is not one).
var readPermissions = []string{PermProjectRead, PermCredentialRead, PermConfigRead, PermUsageRead, PermBillingRead, PermAuditRead}

// rolePermissions is the fixed grant table of ARCHITECTURE.md.
var rolePermissions = map[string]map[string]bool{
	RoleOwner:     set(allPermissions...),
	RoleAdmin:     set(without(allPermissions, PermOrganizationDelete)...),
	RoleDeveloper: set(append(readPermissions, PermProjectCreate, PermProjectUpdate, PermProjectDelete, PermConfigUpdate, PermConfigDelete, PermUsageWrite)...),
	RoleBilling:   set(append(readPermissions, PermBillingManage)...),
	RoleViewer:    set(readPermissions...),
}

// IsFixedRole reports whether name is one of the five fixed roles.
func IsFixedRole(name string) bool { _, ok := rolePermissions[name]; return ok }

// roleGrants reports whether a member's role string (one role or several comma-joined, which
// may include dynamic roles) grants perm through its fixed roles. Dynamic roles never widen
// /api/v1 access.
func roleGrants(memberRole, perm string) bool {
	for r := range store.RoleNames(memberRole) {
		if rolePermissions[r][perm] {
			return true
		}
	}
	return false
}

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, i := range items {
		m[i] = true
	}
	return m
}

func without(items []string, drop string) []string {
	var out []string
	for _, i := range items {
		if i != drop {
			out = append(out, i)
		}
	}
	return out
}
