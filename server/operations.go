package server

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
)

// surface names how an operation's requests are read and its answers written. It is part of
// the operation's policy, read from the spec at start-up: nothing decides a request's surface
// from its URL.
type surface string

const (
	// surfaceV1 is the administrative API: 2xx bodies wrapped in data, errors as problems.
	surfaceV1 surface = "v1"
	// surfaceAuthJSON is the better-auth compatible identity API: better-auth's own body
	// shapes, errors as problems that also carry better-auth's code and message. An API key
	// never authenticates it.
	surfaceAuthJSON surface = "auth-json"
	// surfaceProtocol is an OAuth 2.1 / OpenID Connect protocol route: the spec documents it,
	// fosite reads the request and writes RFC 6749 bodies and errors. It skips spec validation,
	// and errors that reach the error handler get an RFC 6749 body, never a problem.
	surfaceProtocol surface = "protocol"
)

// operationSurface is an operation's x-surface when set; otherwise auth-json for the identity
// tags ("Auth / …") and v1 for everything else.
func operationSurface(op *openapi3.Operation) (surface, error) {
	if v, ok := op.Extensions["x-surface"]; ok {
		switch s := surface(fmt.Sprint(v)); s {
		case surfaceV1, surfaceAuthJSON, surfaceProtocol:
			return s, nil
		}
		return "", fmt.Errorf("server: %s: unknown x-surface %v", op.OperationID, v)
	}
	for _, tag := range op.Tags {
		if strings.HasPrefix(tag, "Auth / ") {
			return surfaceAuthJSON, nil
		}
	}
	return surfaceV1, nil
}

// apiKeyLookup is how authentication may read the API key of a request to an operation: the
// operation's x-api-key-lookup, read from the spec at start-up. It changes what a request
// costs, never its answer.
type apiKeyLookup string

const (
	// apiKeyRead (no x-api-key-lookup): the key is read for every request.
	apiKeyRead apiKeyLookup = ""
	// apiKeyCached: the key may be authenticated from the keys read earlier (apikey_cache.go),
	// because the operation confirms it in the transaction of its write; an error answer reads
	// the key again first.
	apiKeyCached apiKeyLookup = "cached"
	// apiKeyWithDecision: the key may be read together with the operation's decision, in one
	// query, where the store says that is cheaper (authorize_fast.go).
	apiKeyWithDecision apiKeyLookup = "with-decision"
	// apiKeyWithEpoch: the key may be kept while its project's decision epoch stands, read
	// with that epoch otherwise, for an operation that answers its own questions at the epoch
	// (the batch: decision_cache.go) or reads them afresh after it (the RBAC lookups).
	apiKeyWithEpoch apiKeyLookup = "with-epoch"
)

// operationAPIKeyLookup is an operation's x-api-key-lookup; an unknown value is an error.
func operationAPIKeyLookup(op *openapi3.Operation) (apiKeyLookup, error) {
	v, ok := op.Extensions["x-api-key-lookup"]
	if !ok {
		return apiKeyRead, nil
	}
	switch l, _ := v.(string); apiKeyLookup(l) {
	case apiKeyCached, apiKeyWithDecision, apiKeyWithEpoch:
		return apiKeyLookup(l), nil
	}
	return "", fmt.Errorf("server: %s: unknown x-api-key-lookup %v", op.OperationID, v)
}

// policy is how the pipeline treats an operation: its surface and what its x-permission,
// x-user-only, x-archived-target, x-service-account-permission, x-scope-from-body,
// x-api-key-lookup and x-read say.
type policy struct {
	surface surface
	// public: x-permission none — no credential is required.
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
	// apiKeyLookup is how authentication may read the request's API key.
	apiKeyLookup apiKeyLookup
	// readReplica: x-read: replica — the operation's stale-tolerant reads may go to a read
	// replica (readpool.go).
	readReplica bool
}

// readPolicy reads one operation's policy. An operation without a valid x-permission is an
// error: nothing is authorized by default.
func readPolicy(method, path string, op *openapi3.Operation) (policy, error) {
	var p policy
	var err error
	if p.surface, err = operationSurface(op); err != nil {
		return p, err
	}
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
				return p, fmt.Errorf("server: %s %s: x-permission list holds %T", method, path, x)
			}
			p.permissions = append(p.permissions, s)
		}
	default:
		return p, fmt.Errorf("server: %s %s (%s) has no x-permission", method, path, op.OperationID)
	}
	if len(p.permissions) == 0 && !p.public && !p.session {
		return p, fmt.Errorf("server: %s %s: empty x-permission", method, path)
	}
	p.userOnly, _ = op.Extensions["x-user-only"].(bool)
	p.archivedTarget, _ = op.Extensions["x-archived-target"].(bool)
	p.scopeFromBody, _ = op.Extensions["x-scope-from-body"].(string)
	if sa, ok := op.Extensions["x-service-account-permission"].(string); ok {
		p.saPermissions = []string{sa}
	}
	if p.apiKeyLookup, err = operationAPIKeyLookup(op); err != nil {
		return p, err
	}
	if p.apiKeyLookup != apiKeyRead && (p.public || p.surface != surfaceV1) {
		return p, fmt.Errorf("server: %s %s: x-api-key-lookup on an operation no API key authenticates", method, path)
	}
	if p.readReplica, err = operationRead(method, op); err != nil {
		return p, err
	}
	return p, nil
}

// operation is one spec operation as the request pipeline sees it once echo has routed a
// request to it.
type operation struct {
	id string
	// route is the operation in kin-openapi's terms, for parameter and body validation.
	route  *routers.Route
	policy policy
}

// operations maps echo routes ("METHOD /path/:param", see routeKey) to the spec operations
// they serve. It is built once at start-up; a request finds its operation through the route
// echo matched, so echo's router is the only one.
type operations map[string]*operation

// routeKey names an echo route: its method and path template in echo's syntax.
func routeKey(method, echoPath string) string { return method + " " + echoPath }

// echoPath turns an OpenAPI path template (/a/{id}) into echo's (/a/:id).
func echoPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			parts[i] = ":" + s[1:len(s)-1]
		}
	}
	return strings.Join(parts, "/")
}

// loadOperations reads every operation of doc with its policy and its validation route.
func loadOperations(doc *openapi3.T, v *validator) (operations, error) {
	ops := operations{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			pol, err := readPolicy(method, path, op)
			if err != nil {
				return nil, err
			}
			ops[routeKey(method, echoPath(path))] = &operation{id: op.OperationID, route: v.route(path, method), policy: pol}
		}
	}
	return ops, nil
}

// policies returns each operation's policy by operation id.
func (ops operations) policies() map[string]policy {
	out := make(map[string]policy, len(ops))
	for _, op := range ops {
		out[op.id] = op.policy
	}
	return out
}

// bind checks at start-up that echo's routes and the spec agree: every registered route serves
// a spec operation or is one of the named unspecified routes (static assets), and every spec
// operation is routed. A disagreement is a programming error, reported before serving.
func (ops operations) bind(routes []*echo.Route, unspecified map[string]bool) error {
	routed := map[string]bool{}
	var problems []string
	for _, r := range routes {
		k := routeKey(r.Method, r.Path)
		routed[k] = true
		if ops[k] == nil && !unspecified[k] {
			problems = append(problems, "route "+k+" serves no spec operation")
		}
	}
	for k, op := range ops {
		if !routed[k] {
			problems = append(problems, "operation "+op.id+" ("+k+") has no route")
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("server: routes and spec disagree: %s", strings.Join(problems, "; "))
	}
	return nil
}

// matchedRoute is the operation a request was routed to, with its decoded path parameters and,
// once validated, its JSON body.
type matchedRoute struct {
	*operation
	params map[string]string
	// body is the validated JSON body, decoded, or its bytes as a streamedBody (nil when there
	// is none).
	body any
}

// bodyMember returns one top-level member of the validated JSON body, or nil.
func (m *matchedRoute) bodyMember(name string) any {
	switch b := m.body.(type) {
	case map[string]any:
		return b[name]
	case streamedBody:
		return b.member(name)
	}
	return nil
}

const (
	matchedRouteKey = "gatehouse.route"
	badPathKey      = "gatehouse.bad-path"
)

func routeOf(c echo.Context) *matchedRoute {
	m, _ := c.Get(matchedRouteKey).(*matchedRoute)
	return m
}

// surfaceOf is the surface of the request's operation; requests that reached no operation
// (unknown paths and methods, static assets) answer as the administrative API does.
func surfaceOf(c echo.Context) surface {
	if m := routeOf(c); m != nil {
		return m.policy.surface
	}
	return surfaceV1
}

// routeOnEscapedPath makes echo route every request on its escaped path. echo routes on
// URL.RawPath when net/http kept one and on the decoded URL.Path otherwise, so its path
// parameters would arrive sometimes escaped and sometimes not; the generated handlers unescape
// them once. Routing on the escaped path always gives each parameter exactly one decoding: an
// id "a%zz" sent as a%25zz is the id "a%zz", and %2F stays inside its segment.
//
// A raw path that is not a valid encoding of the path is refused with 400. net/http never
// produces one (it refuses such a request line itself, see Listener); a handler embedding
// Gatehouse behind other code might.
func routeOnEscapedPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		escaped := u.EscapedPath()
		if u.RawPath != "" && u.RawPath != escaped {
			// Refused by match, once the request has its id.
			c.Set(badPathKey, true)
		}
		u.RawPath = escaped
		return next(c)
	}
}

// match finds the spec operation of the route echo matched and keeps it, with the path
// parameters percent-decoded, for the later stages. Routes that serve no operation (static
// assets) and unrouted requests pass on to echo's handler, its 404 or its 405. A path
// parameter that is not valid percent-encoding is a 400.
func (s *Server) match(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if bad, _ := c.Get(badPathKey).(bool); bad {
			return Validation(FieldError{Path: []string{"path"}, Message: "is not valid percent-encoding"})
		}
		op := s.operations[routeKey(c.Request().Method, c.Path())]
		if op == nil {
			return next(c)
		}
		m := &matchedRoute{operation: op, params: make(map[string]string, len(c.ParamNames()))}
		c.Set(matchedRouteKey, m)
		var bad []FieldError
		for i, name := range c.ParamNames() {
			// Parameters arrive escaped (routeOnEscapedPath) and the generated handlers unescape
			// them too, so validation, authorization and the handler all see the same value.
			v, err := url.PathUnescape(c.ParamValues()[i])
			if err != nil {
				bad = append(bad, FieldError{Path: []string{"path", name}, Message: "is not valid percent-encoding"})
				continue
			}
			m.params[name] = v
		}
		if len(bad) > 0 {
			return Validation(bad...)
		}
		return next(c)
	}
}
