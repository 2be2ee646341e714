package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/store"
)

// authorize enforces the operation's policy on /api/v1: user-only routes, then the addressed
// organization, project or environment resolved in one query (a user who is not a member gets
// 404, archived records 404 unless the operation restores them), then — for service accounts —
// the own-project and environment-pin checks, for users the organization's second-factor rule
// (403 two-factor-required), then the permissions.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := routeOf(c)
		if m == nil || m.policy.public || m.policy.surface != surfaceV1 {
			return next(c)
		}
		ctx := c.Request().Context()
		p := PrincipalFrom(ctx)
		sa := p.ServiceAccount
		if sa != nil && (m.policy.userOnly || m.policy.session) {
			return ErrUserRequired
		}
		if m.policy.session {
			return next(c)
		}
		ref, err := s.scopeRef(c, m)
		if err != nil {
			return err
		}
		userID := ""
		if sa == nil {
			userID = p.ID()
		}
		var scope store.Scope
		if sa != nil && ref.ProjectID != "" && ref.ProjectID == sa.ProjectID {
			// A service account's own project: its key's row, read in this request, has the
			// scope (an archived project or organization refuses the key itself).
			scope = store.Scope{OrganizationID: sa.OrganizationID, ProjectID: sa.ProjectID}
		} else {
			scope, err = s.store.ResolveScope(ctx, ref, userID)
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && sa == nil && scope.MemberRole == "") {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if hidden := scope.OrganizationArchived || scope.ProjectArchived; hidden {
			// A restore may address the archived record itself, never one under an archived parent.
			restoringItself := m.policy.archivedTarget &&
				(ref.ProjectID == "" || !scope.OrganizationArchived)
			if !restoringItself {
				return ErrNotFound
			}
		}
		if sa != nil {
			if err := s.authorizeServiceAccount(c.Request(), m, sa, scope); err != nil {
				return err
			}
		} else {
			if scope.TwoFactorRequired && !scope.MemberTwoFactor {
				return ErrTwoFactorRequired
			}
			for _, perm := range m.policy.permissions {
				if !roleGrants(scope.MemberRole, perm) {
					return ErrPermission
				}
			}
		}
		setContext(c, scopeKey{}, scope)
		return next(c)
	}
}

// scopeRef names what the request addresses: the most specific of the path's environment,
// project and organization, or the body member the operation names (x-scope-from-body).
func (s *Server) scopeRef(c echo.Context, m *matchedRoute) (store.ScopeRef, error) {
	switch {
	case m.params["environmentId"] != "":
		return store.ScopeRef{EnvironmentID: m.params["environmentId"]}, nil
	case m.params["projectId"] != "":
		return store.ScopeRef{ProjectID: m.params["projectId"]}, nil
	case m.params["organizationId"] != "":
		return store.ScopeRef{OrganizationID: m.params["organizationId"]}, nil
	case m.policy.scopeFromBody != "":
		id, _ := m.bodyMember(m.policy.scopeFromBody).(string)
		if id == "" {
			return store.ScopeRef{}, ErrNotFound
		}
		return store.ScopeRef{ProjectID: id}, nil
	}
	return store.ScopeRef{}, fmt.Errorf("server: %s needs a permission but addresses no organization", m.id)
}

// authorizeServiceAccount: a service account acts only on its own project (or, on
// organization-level routes, its project's organization); a pinned one only on its
// environment, whether named in the path, an environmentId query parameter or body member —
// checked before the permission; then its scopes must grant every permission.
func (s *Server) authorizeServiceAccount(req *http.Request, m *matchedRoute, sa *ServiceAccountPrincipal, scope store.Scope) error {
	switch {
	case scope.ProjectID != "" && scope.ProjectID != sa.ProjectID:
		return ErrPermission
	case scope.ProjectID == "" && scope.OrganizationID != sa.OrganizationID:
		return ErrPermission
	}
	if sa.EnvironmentID != "" {
		for _, env := range []string{scope.EnvironmentID, req.URL.Query().Get("environmentId")} {
			if env != "" && env != sa.EnvironmentID {
				return ErrEnvScoped
			}
		}
		if env, _ := m.bodyMember("environmentId").(string); env != "" && env != sa.EnvironmentID {
			return ErrEnvScoped
		}
	}
	perms := m.policy.permissions
	if m.policy.saPermissions != nil {
		perms = m.policy.saPermissions
	}
	for _, perm := range perms {
		if !sa.allows(perm) {
			return ErrPermission
		}
	}
	return nil
}
