package server

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Keys and decisions kept between requests, for the operations marked x-api-key-lookup:
// with-decision (POST /api/v1/authorize) called with an API key and a body that asks a question
// (peekAuthorizeBody), on both databases. A request is served as kept when
//   - the key is kept (by public id), read at epoch e, and belongs to the project asked about;
//   - the answer to the question is kept (by question, from a request with any key of that
//     project), read at the same epoch e, and the earliest expiry of the bindings it read is
//     still ahead;
//   - and the store's decision epoch of that project and organization, read now
//     (store.DecisionEpoch: one single-row read), is still e.
//
// Otherwise the key, the decision and the epoch are read together in one statement
// (store.APIKeyDecision) and kept. Triggers move the epoch in the transaction of any change to
// what that statement reads — a key revoked, an account disabled, a project or organization
// archived, a binding, role or role permission created, changed or deleted — by this process or
// any other writing the same database: on SQLite one number for the file, on PostgreSQL one per
// project and organization, read from the primary by every replica
// (migrations/sqlite/0036_decision_epoch.up.sql, migrations/postgres/0037_decision_epochs.up.sql).
// So every such change counts on the very next request on every replica, and an expired binding
// on the first request after its expiry. The presented secret is compared with the kept key's
// hash (an HMAC, in constant time) and the key judged at the request's time
// (store.APIKeyUsable) on every request, as when it is read.
//
// The key's query and the decision's were about half of a SQLite decision's cost, and their
// joins most of PostgreSQL's (docs/benchmarks.md, "Decisions kept while nothing they read has
// changed").

// keptSize and keptTTL bound each of the two caches: at most that many keys or questions, each
// forgotten that long after it was read. The TTL bounds the memory held for keys and questions
// no longer presented, not freshness, which the epoch decides.
const (
	keptSize = 20_000
	keptTTL  = 5 * time.Minute
)

// keptKey is an API key read at epoch.
type keptKey struct {
	key   store.APIKeyAuth
	epoch store.Epoch
}

// keptAnswer is a decision read at epoch; until is the earliest expiry of the bindings it read
// (nil: none expires). Its Roles are shared by every request served it: read, never written.
type keptAnswer struct {
	decision store.Decision
	epoch    store.Epoch
	until    *time.Time
}

// keptCaches are the keys by public id and the decisions by question (Server.kept).
type keptCaches struct {
	keys      *expirable.LRU[string, keptKey]
	decisions *expirable.LRU[authorizeQuestion, keptAnswer]
}

// newKeptCaches makes both caches: golang-lru's thread-safe expirable LRUs.
func newKeptCaches() *keptCaches {
	return &keptCaches{
		keys:      expirable.NewLRU[string, keptKey](keptSize, nil, keptTTL),
		decisions: expirable.NewLRU[authorizeQuestion, keptAnswer](keptSize, nil, keptTTL),
	}
}

// apiKeyDecisionPrincipal authenticates key like apiKeyPrincipal and, when q asks about the
// key's own project, gives the principal the answer to q as its prefetched decision: as kept,
// when the key and the answer were kept at the epoch the store still reports, or as read now
// with the key (store.APIKeyDecision), and then kept.
func (s *Server) apiKeyDecisionPrincipal(ctx context.Context, key string, q authorizeQuestion) (*Principal, error) {
	publicID, secret, ok := s.parseAPIKey(key)
	if !ok {
		return nil, ErrUnauthenticated
	}
	now := s.store.Now()
	if k, a, ok := s.keptPair(publicID, q, now); ok {
		epoch, err := s.store.DecisionEpoch(ctx, k.key.ProjectID, k.key.OrganizationID)
		if err != nil {
			return nil, err
		}
		if epoch == k.epoch {
			s.metrics.keptLookup(true)
			p, err := s.apiKeyAuthenticated(k.key, secret, now)
			if err != nil {
				return nil, err
			}
			p.ServiceAccount.prefetched = &prefetchedDecision{question: q, Decision: a.decision}
			return p, nil
		}
	}
	s.metrics.keptLookup(false)
	read, err := s.store.APIKeyDecision(ctx, publicID, q.ProjectID, q.PrincipalType, q.PrincipalID, q.Permission, now)
	if errors.Is(err, store.ErrNotFound) {
		s.metrics.apiKeyAuth(apiKeyUnknown)
		return nil, ErrUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	p, err := s.apiKeyAuthenticated(read.Key, secret, now)
	if err != nil {
		return nil, err
	}
	s.kept.keys.Add(publicID, keptKey{key: read.Key, epoch: read.Epoch})
	if read.Decision == nil {
		return p, nil
	}
	s.kept.decisions.Add(q, keptAnswer{decision: *read.Decision, epoch: read.Epoch, until: read.Until})
	p.ServiceAccount.prefetched = &prefetchedDecision{question: q, Decision: *read.Decision}
	return p, nil
}

// keptPair returns the kept key of publicID and the kept answer to q when both are kept, at the
// same epoch, the key belongs to q's project and the answer's bindings have not expired at now:
// what may be served once the epoch is confirmed.
func (s *Server) keptPair(publicID string, q authorizeQuestion, now time.Time) (keptKey, keptAnswer, bool) {
	k, ok := s.kept.keys.Get(publicID)
	if !ok || k.key.ProjectID != q.ProjectID {
		return keptKey{}, keptAnswer{}, false
	}
	a, ok := s.kept.decisions.Get(q)
	if !ok || a.epoch != k.epoch || (a.until != nil && !now.Before(*a.until)) {
		return keptKey{}, keptAnswer{}, false
	}
	return k, a, true
}
