package server

import (
	"context"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Keys and decisions kept between requests, on SQLite, for the operations marked
// x-api-key-lookup: with-decision (POST /api/v1/authorize) called with an API key. Each such
// request reads the store's decision epoch first (store.DecisionEpoch: one single-row read);
// then
//   - authentication judges the key as read at that epoch, kept from an earlier request when
//     the epoch is the same, read and kept otherwise (keptKeyPrincipal);
//   - the handler answers a question without explain as decided at that epoch, kept from an
//     earlier request (by any key) when the epoch is the same and the earliest expiry of the
//     bindings it read is still ahead, decided and kept otherwise (keptDecision).
//
// Triggers move the epoch in the transaction of any change to what those reads read — a key
// revoked, an account disabled, a project or organization archived, a binding, role or role
// permission created, changed or deleted — by this process or any other writing the same file
// (migrations/sqlite/0036_decision_epoch.up.sql). So every such change counts on the very next
// request, and an expired binding on the first request after its expiry. The presented secret
// is compared with the kept key's hash (an HMAC, in constant time) and the key judged at the
// request's time (store.APIKeyUsable) on every request, as when it is read. The key's query and
// the decision's were about half of a SQLite decision's cost; the epoch's read is about an
// eighth (docs/benchmarks.md, "Decisions kept while nothing they read has changed").
//
// On PostgreSQL (where the key and the decision are one query, authorize_fast.go, and an epoch
// would cost the same round trip) and for every other request, nothing is kept.

// keptSize and keptTTL bound each of the two caches: at most that many keys or questions, each
// forgotten that long after it was read. The TTL bounds the memory held for keys and questions
// no longer presented, not freshness, which the epoch decides.
const (
	keptSize = 20_000
	keptTTL  = 5 * time.Minute
)

// keptKey is an API key read after the store's decision epoch was epoch.
type keptKey struct {
	key   store.APIKeyAuth
	epoch int64
}

// keptAnswer is a decision read after the store's decision epoch was epoch; until is the
// earliest expiry of the bindings it read (nil: none expires). Its Roles are shared by every
// request served it: read, never written.
type keptAnswer struct {
	decision store.Decision
	epoch    int64
	until    *time.Time
}

// keptCaches are the keys by public id and the decisions by question, or nil where the store
// keeps no decision epoch (Server.kept).
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

// keptKeyPrincipal authenticates key like apiKeyPrincipal, after reading the decision epoch: from
// the key kept at that epoch, or read now and kept when it authenticates. The principal carries
// the epoch, for keptDecision.
func (s *Server) keptKeyPrincipal(ctx context.Context, key string) (*Principal, error) {
	publicID, secret, ok := s.parseAPIKey(key)
	if !ok {
		return nil, ErrUnauthenticated
	}
	epoch, err := s.store.DecisionEpoch(ctx)
	if err != nil {
		return nil, err
	}
	k, found := s.kept.keys.Get(publicID)
	fresh := !found || k.epoch != epoch
	s.metrics.keptLookup("key", !fresh)
	if fresh {
		read, err := s.readAPIKey(ctx, publicID)
		if err != nil {
			return nil, err
		}
		k = keptKey{key: read, epoch: epoch}
	}
	p, err := s.apiKeyAuthenticated(k.key, secret, s.store.Now())
	if err != nil {
		return nil, err
	}
	if fresh {
		s.kept.keys.Add(publicID, k)
	}
	p.ServiceAccount.decisionEpoch = &epoch
	return p, nil
}

// keptDecision answers q as store.DecideUntil would at the request's time, for a request whose
// decision epoch was read as epoch: the answer kept at that epoch while the earliest expiry of
// its bindings is ahead, or decided now and kept.
func (s *Server) keptDecision(ctx context.Context, epoch int64, q authorizeQuestion) (store.Decision, error) {
	now := s.store.Now()
	a, ok := s.kept.decisions.Get(q)
	hit := ok && a.epoch == epoch && (a.until == nil || now.Before(*a.until))
	s.metrics.keptLookup("decision", hit)
	if hit {
		return a.decision, nil
	}
	d, until, err := s.store.DecideUntil(ctx, q.ProjectID, q.PrincipalType, q.PrincipalID, q.Permission, now)
	if err != nil {
		return store.Decision{}, err
	}
	s.kept.decisions.Add(q, keptAnswer{decision: d, epoch: epoch, until: until})
	return d, nil
}
