package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Project RBAC decisions: POST /authorize (one check, optionally explained), POST
// /authorize/batch (up to 100 checks in one query), a principal's effective permissions and who
// holds a permission. All need project:read in the project (named in the body for the two
// decisions, x-scope-from-body, else in the path), read with one query after authentication and
// authorization, write nothing and are never audited. Decisions without explain may be answered
// as kept while the decision epoch they were read at stands (decision_cache.go); everything else
// reads the bindings as they are committed.

// Authorize decides whether a principal holds a permission in the project named by the body.
// The authorization middleware has resolved that project (x-scope-from-body: unknown, archived
// or foreign ones are 404 there) and checked the caller's project:read; the decision is one
// read query, or none when it was read with the request's API key (decide, authorize_fast.go).
// With explain the decision is read with every binding of the principal (store.DecideBatch,
// one query) and the answer adds its explanation; without it the answer has exactly allowed,
// roles and decisionId. Its id goes to the access log, never to the audit log.
func (s *Server) Authorize(ctx context.Context, req gen.AuthorizeRequestObject) (gen.AuthorizeResponseObject, error) {
	body := req.Body
	projectID, err := decisionProject(ctx, body.ProjectId)
	if err != nil {
		return nil, err
	}
	var result store.CheckResult
	explain := body.Explain != nil && *body.Explain
	if explain {
		results, err := s.store.DecideBatch(ctx, projectID, []store.Check{{PrincipalType: string(body.PrincipalType),
			PrincipalID: body.PrincipalId, Permission: body.Permission}}, s.store.Now(), true)
		if err != nil {
			return nil, err
		}
		result = results[0]
	} else {
		d, err := s.decide(ctx, authorizeQuestion{ProjectID: projectID, PrincipalType: string(body.PrincipalType),
			PrincipalID: body.PrincipalId, Permission: body.Permission})
		if err != nil {
			return nil, err
		}
		result.Decision = d
	}
	id := store.NewID("dec")
	allowed := 0
	if result.Allowed {
		allowed = 1
	}
	s.metrics.decided(allowed, 1-allowed)
	requestMetaFrom(ctx).DecisionID = id
	return decisionsAnswer{single: true, explain: explain, results: []store.CheckResult{result}, ids: []string{id}}, nil
}

// AuthorizeBatch decides 1 to 100 checks in the project named by the body, by the rule of
// Authorize, and answers one result per check, in order, each with its own decision id (and its
// explanation when the body asks). Without explain, checks whose answers are kept at the
// project's decision epoch are answered as kept (keptChecks) and the others with one read query
// (store.DecideBatch), then kept; with explain, every check is read with that one query. The
// validator has refused the whole batch when any check is invalid.
func (s *Server) AuthorizeBatch(ctx context.Context, req gen.AuthorizeBatchRequestObject) (gen.AuthorizeBatchResponseObject, error) {
	body := req.Body
	projectID, err := decisionProject(ctx, body.ProjectId)
	if err != nil {
		return nil, err
	}
	checks := make([]store.Check, len(body.Checks))
	for i, c := range body.Checks {
		checks[i] = store.Check{PrincipalType: string(c.PrincipalType), PrincipalID: c.PrincipalId, Permission: c.Permission}
	}
	explain := body.Explain != nil && *body.Explain
	var results []store.CheckResult
	if explain {
		results, err = s.store.DecideBatch(ctx, projectID, checks, s.store.Now(), true)
	} else {
		results, err = s.keptChecks(ctx, projectID, checks)
	}
	if err != nil {
		return nil, err
	}
	allowed := 0
	for _, r := range results {
		if r.Allowed {
			allowed++
		}
	}
	s.metrics.decided(allowed, len(results)-allowed)
	return decisionsAnswer{explain: explain, results: results, ids: store.NewIDs("dec", len(results))}, nil
}

// GetPrincipalPermissions answers what a principal holds in the project now: its unexpired
// bindings' roles and the union of their permissions (store.EffectivePermissions). A principal
// without bindings is an empty answer, not a 404.
func (s *Server) GetPrincipalPermissions(ctx context.Context, req gen.GetPrincipalPermissionsRequestObject) (gen.GetPrincipalPermissionsResponseObject, error) {
	p, err := s.store.EffectivePermissions(ctx, req.ProjectId, string(req.PrincipalType), req.PrincipalId, s.store.Now())
	if err != nil {
		return nil, err
	}
	roles := make([]gen.EffectiveRole, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = gen.EffectiveRole{RoleId: r.RoleID, Slug: r.Slug, BindingId: r.BindingID, ExpiresAt: nullableOf(r.ExpiresAt)}
	}
	return gen.GetPrincipalPermissions200JSONResponse{Data: gen.PrincipalPermissions{
		PrincipalType: req.PrincipalType, PrincipalId: req.PrincipalId,
		Roles: roles, Permissions: p.Permissions, Wildcard: p.Wildcard,
	}}, nil
}

// ListPermissionHolders lists one page of the principals that hold a permission in the project
// now (store.PermissionHolders), with the cursor of the next page in x-next-cursor when more
// follow. A cursor this API did not issue is a 400 on query.cursor.
func (s *Server) ListPermissionHolders(ctx context.Context, req gen.ListPermissionHoldersRequestObject) (gen.ListPermissionHoldersResponseObject, error) {
	p := req.Params
	f := store.HolderFilter{}
	if p.PrincipalType != nil {
		f.PrincipalType = string(*p.PrincipalType)
	}
	if p.Limit != nil {
		f.Limit = *p.Limit
	}
	if p.Cursor != nil {
		after, ok := decodeHolderCursor(*p.Cursor)
		if !ok {
			return nil, Validation(FieldError{Path: []string{"query", "cursor"}, Message: "is not a cursor of this list"})
		}
		f.After = &after
	}
	holders, more, err := s.store.PermissionHolders(ctx, req.ProjectId, p.Permission, f, s.store.Now())
	if err != nil {
		return nil, err
	}
	var res gen.ListPermissionHolders200JSONResponse
	res.Body.Data = make([]gen.PermissionHolder, len(holders))
	for i, h := range holders {
		res.Body.Data[i] = gen.PermissionHolder{PrincipalType: gen.PrincipalType(h.Type), PrincipalId: h.ID, Roles: h.Roles}
	}
	if more {
		next := encodeHolderCursor(holders[len(holders)-1].PrincipalRef)
		res.Headers.XNextCursor = &next
	}
	return res, nil
}

// decisionProject returns the project a decision request names in its body, once the
// authorization middleware has resolved and authorized it (x-scope-from-body).
func decisionProject(ctx context.Context, named string) (string, error) {
	projectID := ScopeFrom(ctx).ProjectID
	if projectID == "" || projectID != named {
		// Fail closed: never decide for a project the middleware did not authorize.
		return "", fmt.Errorf("server: authorize: project %q was not resolved by the authorization middleware", named)
	}
	return projectID, nil
}

// A permission-holders cursor is the last holder of the page before, opaque to callers: the
// unpadded base64url encoding of its type, a NUL byte and its id.

func encodeHolderCursor(last store.PrincipalRef) string {
	return base64.RawURLEncoding.EncodeToString([]byte(last.Type + "\x00" + last.ID))
}

// decodeHolderCursor reads a cursor made by encodeHolderCursor; ok is false for anything else.
func decodeHolderCursor(cursor string) (store.PrincipalRef, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return store.PrincipalRef{}, false
	}
	typ, id, found := strings.Cut(string(raw), "\x00")
	if !found || (typ != store.PrincipalUser && typ != store.PrincipalServiceAccount) || id == "" || len(id) > 255 {
		return store.PrincipalRef{}, false
	}
	return store.PrincipalRef{Type: typ, ID: id}, true
}
