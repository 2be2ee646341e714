package server

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// API keys remembered between requests, for the operations whose writes confirm the key
// themselves, which the spec marks x-api-key-lookup: cached: usage ingest, the busiest API-key
// route (store.IngestUsage records an event only if its key can still authenticate, in the
// transaction that records it). On those operations a key read once is then authenticated
// without a query: the presented secret against the remembered hash (an HMAC, in constant time)
// and the expiry against the clock. What can change about a key after it was read — revoked,
// expired, its account disabled, its project or organization archived, any of them deleted — is
// checked by the write; an answer other than a success reads the key again first, in the
// authentication step (nextWithCachedKey), so that a key revoked a moment ago on another replica
// still gets 401 rather than the 400 or 403 its request would earn, and never a recorded event.
// The rest of a key's row (its account, project, organization, environment pin and scopes)
// never changes. Every other operation reads the key on every request.
//
// Reading the key was half of PostgreSQL's work per single-event ingest and kept 16 of its
// backends busy answering it: 2,100–2,500 events/s against 3,400 with the key remembered, all
// else equal (docs/benchmarks.md, "What the ingest figures rest on").

// apiKeyCacheSize and apiKeyCacheTTL bound the cache: at most that many keys, each forgotten
// that long after it was read (then read again on its next use).
const (
	apiKeyCacheSize = 10_000
	apiKeyCacheTTL  = 5 * time.Minute
)

// newAPIKeyCache makes the cache of keys by public id: golang-lru's thread-safe expirable LRU.
func newAPIKeyCache() *expirable.LRU[string, store.APIKeyAuth] {
	return expirable.NewLRU[string, store.APIKeyAuth](apiKeyCacheSize, nil, apiKeyCacheTTL)
}

// cachedAPIKeyPrincipal is apiKeyPrincipal for the routes that confirm their key when they
// write: a key found in the cache is judged as read then, and its principal marked KeyCached;
// a key read from the database is remembered when it authenticates.
func (s *Server) cachedAPIKeyPrincipal(ctx context.Context, key string) (*Principal, error) {
	publicID, secret, ok := s.parseAPIKey(key)
	if !ok {
		return nil, ErrUnauthenticated
	}
	k, cached := s.apiKeys.Get(publicID)
	if !cached {
		var err error
		if k, err = s.readAPIKey(ctx, publicID); err != nil {
			return nil, err
		}
	}
	p, err := s.apiKeyAuthenticated(k, secret, s.store.Now())
	if err != nil {
		return nil, err
	}
	if cached {
		p.ServiceAccount.KeyCached = true
	} else {
		s.apiKeys.Add(publicID, k)
	}
	return p, nil
}

// nextWithCachedKey runs the rest of the pipeline for a request whose key came from the cache.
// When that fails with an answer not yet written, the key is confirmed before the failure is
// answered (confirmCachedKey): a key that can no longer authenticate gets 401 instead.
func (s *Server) nextWithCachedKey(c echo.Context, next echo.HandlerFunc, key string) error {
	err := next(c)
	if err == nil || c.Response().Committed {
		return err
	}
	return s.confirmCachedKey(c.Request().Context(), key, err)
}

// confirmCachedKey is called before err is answered to a request authenticated with a cached
// key: it reads the key again and, if it can no longer authenticate, forgets it, counts why,
// and answers 401; otherwise it leaves err as it is (and counts nothing: the request's
// authentication was counted).
func (s *Server) confirmCachedKey(ctx context.Context, key string, err error) error {
	publicID, secret, ok := identity.ParseAPIKey(key)
	if !ok {
		return ErrUnauthenticated // not reached: the key was parsed to authenticate the request
	}
	k, rerr := s.store.APIKeyByPublicID(ctx, publicID)
	outcome := apiKeyUnknown
	switch {
	case rerr == nil:
		outcome = s.judgeAPIKey(k, secret, s.store.Now())
	case !errors.Is(rerr, store.ErrNotFound):
		s.log.WarnContext(ctx, "confirm cached api key", "err", rerr)
		return err
	}
	if outcome == apiKeyOK {
		return err
	}
	s.metrics.apiKeyAuth(outcome)
	s.apiKeys.Remove(publicID)
	return ErrUnauthenticated
}
