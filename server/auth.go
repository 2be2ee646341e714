package server

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
)

// policy is what an operation's x-permission, x-user-only and x-archived-target say.
type policy struct {
	// public: x-permission none — no credential is read or required.
	public bool
	// session: x-permission session — any signed-in user, no permission.
	session bool
	// permissions are all required in the addressed organization.
	permissions []string
	// userOnly refuses service accounts whatever their scopes.
	userOnly bool
	// archivedTarget lets the operation address an archived record (restore).
	archivedTarget bool
	// saPermissions, when set, replace permissions for service accounts
	// (x-service-account-permission).
	saPermissions []string
	// scopeFromBody names the body member that holds the addressed project id.
	scopeFromBody string
}

// loadPolicies reads every operation's authorization from the document. An operation without
// a valid x-permission is an error: nothing is authorized by default.
func loadPolicies(doc *openapi3.T) (map[string]policy, error) {
	out := map[string]policy{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var p policy
			switch v := op.Extensions["x-permission"].(type) {
			case string:
				switch v {
				case "none":
					p.public = true
				case "session":
					p.session = true
				default:
					p.permissions = []string{v}
				}
			case []any:
				for _, x := range v {
					s, ok := x.(string)
					if !ok {
						return nil, fmt.Errorf("server: %s %s: x-permission list holds %T", method, path, x)
					}
					p.permissions = append(p.permissions, s)
				}
			default:
				return nil, fmt.Errorf("server: %s %s (%s) has no x-permission", method, path, op.OperationID)
			}
			if len(p.permissions) == 0 && !p.public && !p.session {
				return nil, fmt.Errorf("server: %s %s: empty x-permission", method, path)
			}
			p.userOnly, _ = op.Extensions["x-user-only"].(bool)
			p.archivedTarget, _ = op.Extensions["x-archived-target"].(bool)
			p.scopeFromBody, _ = op.Extensions["x-scope-from-body"].(string)
			if sa, ok := op.Extensions["x-service-account-permission"].(string); ok {
				p.saPermissions = []string{sa}
			}
			out[op.OperationID] = p
		}
	}
	return out, nil
}

// PrincipalKind says who is calling.
type PrincipalKind string

// Principal kinds.
const (
	PrincipalUser           PrincipalKind = "user"
	PrincipalServiceAccount PrincipalKind = "service_account"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	Kind PrincipalKind
	// User and Session are set for users signed in with the session cookie; SessionToken is the
	// cookie's raw token.
	User         store.User
	Session      store.Session
	SessionToken string
	// ServiceAccount is set for callers authenticated with an API key.
	ServiceAccount *ServiceAccountPrincipal
}

// ServiceAccountPrincipal is what authorization needs about a service account: where it
// belongs, its environment pin ("" when none) and its key scopes.
type ServiceAccountPrincipal struct {
	ID, ProjectID, OrganizationID, EnvironmentID string
	KeyID                                        string
	Scopes                                       []string
}

// ID is the user or service account id.
func (p *Principal) ID() string {
	if p.ServiceAccount != nil {
		return p.ServiceAccount.ID
	}
	return p.User.ID
}

// allows reports whether a service account's scopes grant perm; "*" grants every permission.
func (sa *ServiceAccountPrincipal) allows(perm string) bool {
	for _, s := range sa.Scopes {
		if s == "*" || s == perm {
			return true
		}
	}
	return false
}

type principalKey struct{}
type scopeKey struct{}

// PrincipalFrom returns the request's authenticated caller, or nil when there is none.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// ScopeFrom returns the organization, project and environment the request addresses, as
// resolved during authorization of an /api/v1 operation.
func ScopeFrom(ctx context.Context) store.Scope {
	s, _ := ctx.Value(scopeKey{}).(store.Scope)
	return s
}

func setContext(c echo.Context, key, value any) {
	c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), key, value)))
}

// match finds the spec operation of a routed request and keeps it for the later stages. A
// request echo routed must be a spec operation: one the spec does not describe fails closed
// with a 500 rather than running unvalidated and unauthorized. Unknown paths and methods fall
// through to echo's own 404 and 405.
func (s *Server) match(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.routed[c.Request().Method+" "+c.Path()] {
			return next(c)
		}
		route, params, err := s.validator.findRoute(c.Request())
		if err != nil {
			return fmt.Errorf("server: echo route %s %s is not in the spec: %w", c.Request().Method, c.Path(), err)
		}
		pol, ok := s.policies[route.Operation.OperationID]
		if !ok {
			return fmt.Errorf("server: no policy for %s", route.Operation.OperationID)
		}
		c.Set(routeKey, &matchedRoute{route: route, params: params, policy: pol})
		return next(c)
	}
}

const routeKey = "gatehouse.route"

type matchedRoute struct {
	route  *routers.Route
	params map[string]string
	policy policy
	// body is the validated JSON body, decoded (nil when there is none).
	body any
}

// bodyMember returns one top-level member of the validated JSON body, or nil.
func (m *matchedRoute) bodyMember(name string) any {
	members, _ := m.body.(map[string]any)
	return members[name]
}

func routeOf(c echo.Context) *matchedRoute {
	m, _ := c.Get(routeKey).(*matchedRoute)
	return m
}

// authenticate identifies the caller of a non-public operation. On /api/v1 an X-API-Key header
// decides alone (the cookie is then never read); otherwise the session cookie does. A
// cookie-authenticated unsafe request must come from a trusted Origin (or Referer). An
// operation that needs a caller and has none gets 401 here, before validation.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := routeOf(c)
		if m == nil {
			return next(c)
		}
		req := c.Request()
		authSurface := strings.HasPrefix(req.URL.Path, "/api/auth/")
		if err := s.checkOrigin(req, authSurface); err != nil {
			return err
		}
		if m.policy.public && !authSurface {
			return next(c)
		}
		var p *Principal
		var err error
		if key, ok := req.Header["X-Api-Key"]; ok && !authSurface {
			// The key alone decides: the cookie is never read, even when the key is bad.
			if p, err = s.apiKeyPrincipal(req.Context(), strings.Join(key, "")); err != nil {
				return err
			}
		} else if p, err = s.sessionPrincipal(req); err != nil {
			return err
		}
		if p != nil {
			setContext(c, principalKey{}, p)
		}
		if p == nil && !m.policy.public {
			if authSurface {
				return authError(http.StatusUnauthorized, kindUnauthorized, "UNAUTHORIZED", "Unauthorized")
			}
			return ErrUnauthenticated
		}
		return next(c)
	}
}

// apiKeyPrincipal authenticates an X-API-Key: a malformed key is refused before any database
// access; an unknown id, a wrong secret, a revoked or expired key, a disabled account and an
// archived project all give the same 401. The secret is compared as an HMAC in constant time.
func (s *Server) apiKeyPrincipal(ctx context.Context, key string) (*Principal, error) {
	publicID, secret, ok := oauth.ParseAPIKey(key)
	if !ok {
		return nil, ErrUnauthenticated
	}
	sum := oauth.HashAPIKeySecret(s.apiKeyPepper, secret)
	k, err := s.store.APIKeyByPublicID(ctx, publicID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	now := s.store.Now()
	if !hmac.Equal(sum, k.SecretHash) || !k.Usable(now) || k.ProjectArchived || k.OrganizationArchived {
		return nil, ErrUnauthenticated
	}
	s.touchAPIKey(k.KeyID, k.LastUsedAt, now)
	return &Principal{Kind: PrincipalServiceAccount, ServiceAccount: &ServiceAccountPrincipal{
		ID: k.AccountID, ProjectID: k.ProjectID, OrganizationID: k.OrganizationID,
		EnvironmentID: k.EnvironmentID, KeyID: k.KeyID, Scopes: k.Scopes,
	}}, nil
}

// keyTouchInterval is how stale an API key's lastUsedAt may get: it is written at most this
// often per key, off the request path.
const keyTouchInterval = time.Minute

// touchAPIKey records a key's use at most once per keyTouchInterval per process, without making
// the request wait for the write.
func (s *Server) touchAPIKey(keyID string, last *time.Time, now time.Time) {
	if last != nil && now.Sub(*last) < keyTouchInterval {
		return
	}
	if prev, ok := s.keyTouches.Load(keyID); ok && now.Sub(prev.(time.Time)) < keyTouchInterval {
		return
	}
	s.keyTouches.Store(keyID, now)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.store.TouchAPIKey(ctx, keyID, now); err != nil {
			s.log.Warn("record api key use", "key_id", keyID, "err", err)
		}
	}()
}

// sessionPrincipal returns the user of a valid, unexpired session cookie, or nil.
func (s *Server) sessionPrincipal(req *http.Request) (*Principal, error) {
	sess, user, token, err := s.sessions().FromRequest(req)
	if errors.Is(err, oauth.ErrNoSession) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Principal{Kind: PrincipalUser, User: user, Session: sess, SessionToken: token}, nil
}

// checkOrigin refuses cross-site writes. An unsafe request that carries the session cookie (and,
// on /api/v1, no API key) must name a trusted origin in Origin, or failing that in Referer; one
// without the cookie is refused only when it names an untrusted origin, which stops login
// CSRF from browsers while leaving non-browser clients alone.
func (s *Server) checkOrigin(req *http.Request, authSurface bool) error {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	_, cookieErr := req.Cookie(s.sessionCookieName)
	cookieAuth := cookieErr == nil && (authSurface || req.Header.Get("X-API-Key") == "")
	origin := req.Header.Get(echo.HeaderOrigin)
	if origin == "" || origin == "null" {
		if ref := req.Header.Get("Referer"); ref != "" {
			if u, err := url.Parse(ref); err == nil && u.Scheme != "" && u.Host != "" {
				origin = u.Scheme + "://" + u.Host
			}
		}
	}
	switch {
	case origin == "" || origin == "null":
		if cookieAuth {
			return authError(http.StatusForbidden, kindForbidden, "MISSING_OR_NULL_ORIGIN", "Missing or null Origin")
		}
		return nil
	case !s.trustedOrigin(origin):
		return authError(http.StatusForbidden, kindForbidden, "INVALID_ORIGIN", "Invalid origin")
	}
	return nil
}

// authorize enforces the operation's policy on /api/v1: user-only routes, then the addressed
// organization, project or environment resolved in one query (a user who is not a member gets
// 404, archived records 404 unless the operation restores them), then — for service accounts —
// the own-project and environment-pin checks, then the permissions.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := routeOf(c)
		if m == nil || m.policy.public || !strings.HasPrefix(c.Request().URL.Path, "/api/v1/") {
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
		scope, err := s.store.ResolveScope(ctx, ref, userID)
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
	return store.ScopeRef{}, fmt.Errorf("server: %s needs a permission but addresses no organization", m.route.Operation.OperationID)
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

// authError is a problem that also carries better-auth's code and message.
func authError(status int, kind, code, message string) *Error {
	return &Error{Status: status, Kind: kind, Title: message, Code: code, Message: message}
}
