package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Keys and decisions kept between requests, for the operations marked x-api-key-lookup:
// with-decision (POST /api/v1/authorize) and with-epoch (POST /api/v1/authorize/batch) called
// with an API key, on both databases.
//
//   - Authentication (keptKeyPrincipal): when the key is kept (by public id), it reads the
//     store's decision epoch of the key's project (store.DecisionEpoch: one single-row read,
//     shared with the requests that queue for it meanwhile; on SQLite the file's one epoch).
//     When that is the epoch the key was read at, the key is judged as kept. Otherwise, when
//     an /authorize body asks a question (peekAuthorizeBody), the key, the answer and the
//     epoch are read in one statement (store.APIKeyDecision) and both kept; a batch's key is
//     read with its epoch alone the same way, and kept. An /authorize body that asks none, and
//     a batch where the store does not keep a batch's keys (store.KeepsBatchKeys: on SQLite),
//     fall back to the plain key lookup, and nothing is kept.
//     The principal carries the epoch.
//   - The handler's decision (keptDecision): a question about the key's own project is answered
//     as kept at that epoch (from a request with any key of the project) while the earliest
//     expiry of the bindings it read is ahead, or decided now (store.DecideUntil) and kept.
//   - A batch without explain, however authenticated (keptChecks): at the epoch its key carries
//     when the key is of the batch's project, or else at the epoch read first
//     (store.BatchDecisionEpoch), each check is answered as kept, or with the others missed in
//     one store.DecideBatch, and kept.
//
// Triggers move the epoch in the transaction of any change to what those reads read — a key
// revoked, an account disabled, a project or organization archived, a binding, role or role
// permission created, changed or deleted — by this process or any other writing the same database:
// on SQLite one number for the file, on PostgreSQL one per project (moved by its organization's
// changes too), read from the primary by every replica
// (migrations/sqlite/0036_decision_epoch.up.sql, migrations/postgres/0037_decision_epochs.up.sql).
// The epoch is read before, or in the same statement as, what is kept at it, so a change that
// commits in between moves it and the next check misses: every such change counts on the very next
// request on every replica, and an expired binding on the first request after its expiry. The
// presented secret is compared with the kept key's hash (an HMAC, in constant time) and the key
// judged at the request's time (store.APIKeyUsable) on every request, as when it is read. The hit
// path does not read the body: the question is looked up in the handler, from the validated
// request.
//
// The key's query and the decision's were about half of a SQLite decision's cost, and their
// joins most of PostgreSQL's (docs/benchmarks.md, "Decisions kept while nothing they read has
// changed").

// keptSize and keptTTL bound each of the two caches: at most that many keys, each forgotten that
// long after it was read, and at most twice that many answers (two generations of keptSize), each
// forgotten at most one and a half times that long after it was last asked (keptAnswers). The TTL
// bounds the memory held for keys and questions no longer presented, not freshness, which the
// epoch decides.
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
	decisions *keptAnswers
}

// newKeptCaches makes both caches: the keys in golang-lru's thread-safe expirable LRU (one
// lookup a request), the answers in keptAnswers (up to 100 a request).
func newKeptCaches() *keptCaches {
	return &keptCaches{
		keys:      expirable.NewLRU[string, keptKey](keptSize, nil, keptTTL),
		decisions: newKeptAnswers(keptSize, keptTTL),
	}
}

// keptKeyPrincipal authenticates key like apiKeyPrincipal for an operation whose lookup is
// with-decision or with-epoch: as kept, when the store's decision epoch of its project is still
// the one it was read at; otherwise read with its epoch. With-decision (/authorize) reads a key
// it does not keep with the answer to the body's question (apiKeyDecisionPrincipal), or alone
// when the body asks none. With-epoch (the batch) reads it with its epoch alone
// (apiKeyDecisionPrincipal asking nothing), where the store keeps a batch's keys
// (store.KeepsBatchKeys); otherwise as apiKeyPrincipal reads it. The principal carries the
// epoch whenever the key was kept or read with one, for keptDecision and keptChecks.
func (s *Server) keptKeyPrincipal(req *http.Request, lookup apiKeyLookup, key string) (*Principal, error) {
	ctx := req.Context()
	if lookup == apiKeyWithEpoch && !s.store.KeepsBatchKeys() {
		return s.apiKeyPrincipal(ctx, key)
	}
	publicID, secret, ok := s.parseAPIKey(key)
	if !ok {
		return nil, ErrUnauthenticated
	}
	if k, found := s.kept.keys.Get(publicID); found {
		epoch, err := s.store.DecisionEpoch(ctx, k.key.ProjectID)
		if err != nil {
			return nil, err
		}
		if epoch == k.epoch {
			s.metrics.keptLookups(keptAKey, 1, 0)
			p, err := s.apiKeyAuthenticated(k.key, secret, s.store.Now())
			if err != nil {
				return nil, err
			}
			p.ServiceAccount.decisionEpoch = &epoch
			return p, nil
		}
	}
	s.metrics.keptLookups(keptAKey, 0, 1)
	if lookup == apiKeyWithEpoch {
		return s.apiKeyDecisionPrincipal(ctx, publicID, secret, authorizeQuestion{})
	}
	if q, ok := peekAuthorizeBody(req); ok {
		return s.apiKeyDecisionPrincipal(ctx, publicID, secret, q)
	}
	return s.apiKeyPrincipal(ctx, key)
}

// apiKeyDecisionPrincipal reads the key of publicID with the answer to q and their epoch
// (store.APIKeyDecision), authenticates the key with secret, and keeps both. The principal
// carries the epoch and, when q asks about the key's own project, the answer as its prefetched
// decision. The zero q asks nothing: the key is read with its epoch alone.
func (s *Server) apiKeyDecisionPrincipal(ctx context.Context, publicID, secret string, q authorizeQuestion) (*Principal, error) {
	now := s.store.Now()
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
	p.ServiceAccount.decisionEpoch = &read.Epoch
	if read.Decision != nil {
		s.metrics.keptLookups(keptADecision, 0, 1)
		s.kept.decisions.put(q, keptAnswer{decision: *read.Decision, epoch: read.Epoch, until: read.Until})
		p.ServiceAccount.prefetched = &prefetchedDecision{question: q, Decision: *read.Decision}
	}
	return p, nil
}

// keptDecision answers q, a question about the project of the request's key, as
// store.DecideUntil would at the request's time, for a request whose key was authenticated at
// epoch: the answer kept at that epoch while the earliest expiry of its bindings is ahead, or
// decided now and kept.
func (s *Server) keptDecision(ctx context.Context, epoch store.Epoch, q authorizeQuestion) (store.Decision, error) {
	now := s.store.Now()
	if d, ok := s.keptAnswerFor(q, epoch, now); ok {
		s.metrics.keptLookups(keptADecision, 1, 0)
		return d, nil
	}
	s.metrics.keptLookups(keptADecision, 0, 1)
	d, until, err := s.store.DecideUntil(ctx, q.ProjectID, q.PrincipalType, q.PrincipalID, q.Permission, now)
	if err != nil {
		return store.Decision{}, err
	}
	s.kept.decisions.put(q, keptAnswer{decision: d, epoch: epoch, until: until})
	return d, nil
}

// keptChecks answers checks about project projectID as store.DecideBatch would without explain
// at the request's time: at the project's decision epoch (checksEpoch), each check whose answer
// is kept at that epoch (and before the earliest expiry of its bindings) as kept, the others
// with one DecideBatch of those alone, whose answers are then kept. The kept answers are looked
// up together, and the new ones kept together (keptAnswers.getAll, putAll). With nothing kept it
// costs the epoch's read more than DecideBatch, unless the request's key brought the epoch.
func (s *Server) keptChecks(ctx context.Context, projectID string, checks []store.Check) ([]store.CheckResult, error) {
	epoch, err := s.checksEpoch(ctx, projectID)
	if err != nil {
		return nil, err
	}
	now := s.store.Now()
	question := func(i int) authorizeQuestion {
		c := &checks[i]
		return authorizeQuestion{projectID, c.PrincipalType, c.PrincipalID, c.Permission}
	}
	results := make([]store.CheckResult, len(checks))
	answered := make([]bool, len(checks))
	hits := 0
	s.kept.decisions.getAll(len(checks), question, func(i int, a keptAnswer) {
		if a.usable(epoch, now) {
			results[i] = store.CheckResult{Decision: a.decision}
			answered[i] = true
			hits++
		}
	})
	s.metrics.keptLookups(keptADecision, hits, len(checks)-hits)
	if hits == len(checks) {
		return results, nil
	}
	missed := make([]int, 0, len(checks)-hits)
	asked := make([]store.Check, 0, len(checks)-hits)
	for i, ok := range answered {
		if !ok {
			missed = append(missed, i)
			asked = append(asked, checks[i])
		}
	}
	read, err := s.store.DecideBatch(ctx, projectID, asked, now, false)
	if err != nil {
		return nil, err
	}
	for j, i := range missed {
		results[i] = read[j]
	}
	s.kept.decisions.putAll(len(missed), func(j int) authorizeQuestion { return question(missed[j]) },
		func(j int) keptAnswer {
			return keptAnswer{decision: read[j].Decision, epoch: epoch, until: read[j].Until}
		})
	return results, nil
}

// checksEpoch is the decision epoch of projectID for a batch's checks: the one the request's key
// was authenticated at (keptKeyPrincipal, read during this request) when the key is of that
// project, else read now (store.BatchDecisionEpoch).
func (s *Server) checksEpoch(ctx context.Context, projectID string) (store.Epoch, error) {
	if p := PrincipalFrom(ctx); p != nil && p.ServiceAccount != nil && p.ServiceAccount.ProjectID == projectID {
		if e := p.ServiceAccount.decisionEpoch; e != nil {
			return *e, nil
		}
	}
	return s.store.BatchDecisionEpoch(ctx, projectID)
}

// keptAnswerFor returns the answer to q kept at epoch, when there is one and the earliest expiry
// of the bindings it read is after now. The caller counts the lookup.
func (s *Server) keptAnswerFor(q authorizeQuestion, epoch store.Epoch, now time.Time) (store.Decision, bool) {
	a, ok := s.kept.decisions.get(q)
	return a.decision, ok && a.usable(epoch, now)
}

// usable reports whether a answers a question asked at epoch at time now: it was read at that
// epoch, and now is before the earliest expiry of the bindings it read.
func (a keptAnswer) usable(epoch store.Epoch, now time.Time) bool {
	return a.epoch == epoch && (a.until == nil || now.Before(*a.until))
}
