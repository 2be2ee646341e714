package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/store"
)

// The hot path of POST /api/v1/authorize called with an API key. Without it a decision costs three
// queries (the key, the project's scope, the decision); with it, one, or only the epoch's read
// while the key and the answer are kept (decision_cache.go). The spec allows it per operation
// (x-api-key-lookup: with-decision): unless the key is kept, the authentication middleware peeks at
// the body and reads the key and the decision together (apiKeyDecisionPrincipal), and gives the
// decision to the principal; the authorization middleware takes a service account's own project's
// scope from its key's row; the handler decides (decide), with that decision when it answers the
// handler's question. Everything the middleware checks is checked in the same order as on the
// general path: a body it cannot read as the four strings falls back to the plain key lookup, and
// the validator still judges the body afterwards.

// prefetchedDecision is a decision read together with the request's API key: the answer to
// question.
type prefetchedDecision struct {
	question authorizeQuestion
	store.Decision
}

// authorizeQuestion is what an authorize request asks: the part of its body the prefetch needs.
type authorizeQuestion struct {
	ProjectID     string `json:"projectId"`
	PrincipalType string `json:"principalType"`
	PrincipalID   string `json:"principalId"`
	Permission    string `json:"permission"`
}

// peekAuthorizeBody reads req's body and puts it back, unread, for the later stages. It returns
// ok false when the request has no body, when the body cannot be read or is not an object with
// the four members as non-empty text strings, and when it asks for an explanation (explain:
// true, which the handler reads with every binding of the principal instead: a decision read
// with the key would go unused); an error reading it (such as the body limit) is replayed to
// the later stages.
func peekAuthorizeBody(req *http.Request) (authorizeQuestion, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return authorizeQuestion{}, false
	}
	raw, err := readBody(req)
	if err != nil {
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), errReader{err}))
		return authorizeQuestion{}, false
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	var b struct {
		authorizeQuestion
		Explain bool `json:"explain"`
	}
	if json.Unmarshal(raw, &b) != nil || b.ProjectID == "" || b.PrincipalType == "" || b.PrincipalID == "" || b.Permission == "" || b.Explain {
		return authorizeQuestion{}, false
	}
	// The body is not validated yet: a member that is not text (validate_text.go) must reach
	// validation, not a query.
	for _, v := range []string{b.ProjectID, b.PrincipalType, b.PrincipalID, b.Permission} {
		if !store.ValidText(v) {
			return authorizeQuestion{}, false
		}
	}
	return b.authorizeQuestion, true
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// decide answers question q, whose project the authorization middleware has resolved: with the
// decision read with the request's API key when it answers exactly q; as kept at the epoch its
// key was authenticated at when q asks about the key's project (keptDecision); otherwise with
// store.Decide (one query).
func (s *Server) decide(ctx context.Context, q authorizeQuestion) (store.Decision, error) {
	if p := PrincipalFrom(ctx); p != nil && p.ServiceAccount != nil {
		if d := p.ServiceAccount.prefetched; d != nil && d.question == q {
			return d.Decision, nil
		}
		if e := p.ServiceAccount.decisionEpoch; e != nil && q.ProjectID == p.ServiceAccount.ProjectID {
			return s.keptDecision(ctx, *e, q)
		}
	}
	allowed, roles, err := s.store.Decide(ctx, q.ProjectID, q.PrincipalType, q.PrincipalID, q.Permission, s.store.Now())
	if err != nil {
		return store.Decision{}, err
	}
	return store.Decision{Allowed: allowed, Roles: roles}, nil
}
