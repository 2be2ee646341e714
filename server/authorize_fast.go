package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/store"
)

// The hot path of POST /api/v1/authorize called with an API key, on PostgreSQL (see
// store.CombinesKeyDecision; on SQLite the separate queries are cheaper). Without it a decision
// costs three queries (the key, the project's scope, the decision); with it, one: the authentication
// middleware peeks at the body and reads the key and the decision together
// (store.APIKeyDecision), the authorization middleware takes a service account's own project's
// scope from its key's row (read in this request), and the handler uses the decision read with
// the key. Nothing is cached across requests: every decision reads the key, its account, project,
// organization and bindings as they are committed, so a revoked or expired key, a disabled
// account, an archived project, a deleted or expired binding change the very next request, on
// every replica. Everything the middleware checks is checked in the same order as on the
// general path: a body it cannot read as the four strings falls back to the plain key lookup,
// and the validator still judges the body afterwards.

// operationAuthorize is the operation id of POST /api/v1/authorize.
const operationAuthorize = "authorize"

// prefetchedDecision is a decision read together with the request's API key.
type prefetchedDecision struct {
	projectID, principalType, principalID, permission string
	store.Decision
}

type prefetchedDecisionKey struct{}

// authorizeQuestion is the part of the authorize request body the prefetch needs.
type authorizeQuestion struct {
	ProjectID     string `json:"projectId"`
	PrincipalType string `json:"principalType"`
	PrincipalID   string `json:"principalId"`
	Permission    string `json:"permission"`
}

// peekAuthorizeBody reads req's body and puts it back, unread, for the later stages. It returns
// ok false, without reading, when the request is not an authorize request, and when the body cannot be read or is not an object with the four members as non-empty
// strings; an error reading it (such as the body limit) is replayed to the later stages.
func peekAuthorizeBody(req *http.Request, authorize bool) (authorizeQuestion, bool) {
	if !authorize || req.Body == nil || req.Body == http.NoBody {
		return authorizeQuestion{}, false
	}
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), errReader{err}))
		return authorizeQuestion{}, false
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	var b authorizeQuestion
	if json.Unmarshal(raw, &b) != nil || b.ProjectID == "" || b.PrincipalType == "" || b.PrincipalID == "" || b.Permission == "" {
		return authorizeQuestion{}, false
	}
	return b, true
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// apiKeyDecisionPrincipal authenticates key like apiKeyPrincipal and, for an authorize request
// whose body names the key's own project, returns the decision read with it.
func (s *Server) apiKeyDecisionPrincipal(ctx context.Context, key string, body authorizeQuestion) (*Principal, *prefetchedDecision, error) {
	publicID, secret, ok := s.parseAPIKey(key)
	if !ok {
		return nil, nil, ErrUnauthenticated
	}
	now := s.store.Now()
	k, d, err := s.store.APIKeyDecision(ctx, publicID, body.ProjectID, body.PrincipalType, body.PrincipalID, body.Permission, now)
	if errors.Is(err, store.ErrNotFound) {
		s.metrics.apiKeyAuth(apiKeyUnknown)
		return nil, nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, nil, err
	}
	p, err := s.apiKeyAuthenticated(k, secret, now)
	if err != nil || d == nil {
		return p, nil, err
	}
	return p, &prefetchedDecision{projectID: body.ProjectID, principalType: body.PrincipalType,
		principalID: body.PrincipalID, permission: body.Permission, Decision: *d}, nil
}

// prefetched returns the decision read with the request's key when it answers exactly this
// question, or nil.
func prefetched(ctx context.Context, projectID, principalType, principalID, permission string) *prefetchedDecision {
	d, _ := ctx.Value(prefetchedDecisionKey{}).(*prefetchedDecision)
	if d == nil || d.projectID != projectID || d.principalType != principalType ||
		d.principalID != principalID || d.permission != permission {
		return nil
	}
	return d
}
