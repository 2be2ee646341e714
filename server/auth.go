package server

import (
	"context"
	"crypto/hmac"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

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
	// KeyCached is set when the key was authenticated from the cache of keys read earlier
	// (apikey_cache.go) rather than read for this request: its state is confirmed by the
	// write, or read again by authentication before any other answer (nextWithCachedKey).
	KeyCached bool
	// prefetched is the decision read together with the key, when the operation allows it
	// (x-api-key-lookup: with-decision); the handler's decide uses it if it answers the
	// handler's question.
	prefetched *prefetchedDecision
	// decisionEpoch is the decision epoch of the key's project that the key was kept or read
	// at, for with-decision operations (decision_cache.go); the handler's decide then answers
	// questions about that project from decisions kept at that epoch.
	decisionEpoch *store.Epoch
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
		if m.policy.surface == surfaceProtocol {
			// Protocol routes authenticate their clients themselves (fosite), and read the
			// session through identity.Sessions where a user must be signed in.
			return next(c)
		}
		authSurface := m.policy.surface == surfaceAuthJSON
		if err := s.checkOrigin(req, authSurface); err != nil {
			return err
		}
		if authSurface {
			if err := checkFormPost(req); err != nil {
				return err
			}
		}
		if m.policy.public && !authSurface {
			return next(c)
		}
		var p *Principal
		var err error
		header, hasKey := req.Header["X-Api-Key"]
		key := strings.Join(header, "")
		if hasKey && !authSurface {
			// The key alone decides: the cookie is never read, even when the key is bad.
			if p, err = s.apiKeyPrincipalFor(req, m.policy.apiKeyLookup, key); err != nil {
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
		if p != nil && p.ServiceAccount != nil && p.ServiceAccount.KeyCached {
			return s.nextWithCachedKey(c, next, key)
		}
		return next(c)
	}
}

// apiKeyPrincipalFor authenticates key as the operation's x-api-key-lookup allows: with the
// operation's decision, read with it or kept while the decision epoch stands (when the body asks
// a question, decision_cache.go), from the cache of keys read earlier, or read for this request.
func (s *Server) apiKeyPrincipalFor(req *http.Request, lookup apiKeyLookup, key string) (*Principal, error) {
	switch lookup {
	case apiKeyWithDecision, apiKeyWithEpoch:
		return s.keptKeyPrincipal(req, lookup, key)
	case apiKeyCached:
		return s.cachedAPIKeyPrincipal(req.Context(), key)
	}
	return s.apiKeyPrincipal(req.Context(), key)
}

// apiKeyPrincipal authenticates an X-API-Key: a malformed key is refused before any database
// access; an unknown id, a wrong secret, a revoked or expired key, a disabled account and an
// archived project all give the same 401. The secret is compared as an HMAC in constant time.
func (s *Server) apiKeyPrincipal(ctx context.Context, key string) (*Principal, error) {
	publicID, secret, ok := s.parseAPIKey(key)
	if !ok {
		return nil, ErrUnauthenticated
	}
	k, err := s.readAPIKey(ctx, publicID)
	if err != nil {
		return nil, err
	}
	return s.apiKeyAuthenticated(k, secret, s.store.Now())
}

// readAPIKey reads the key with publicID; an unknown one is counted and ErrUnauthenticated.
func (s *Server) readAPIKey(ctx context.Context, publicID string) (store.APIKeyAuth, error) {
	k, err := s.store.APIKeyByPublicID(ctx, publicID)
	if errors.Is(err, store.ErrNotFound) {
		s.metrics.apiKeyAuth(apiKeyUnknown)
		return k, ErrUnauthenticated
	}
	return k, err
}

// parseAPIKey is identity.ParseAPIKey, counting a malformed key.
func (s *Server) parseAPIKey(key string) (publicID, secret string, ok bool) {
	if publicID, secret, ok = identity.ParseAPIKey(key); !ok {
		s.metrics.apiKeyAuth(apiKeyMalformed)
	}
	return publicID, secret, ok
}

// apiKeyAuthenticated judges key k, read for a request presenting secret at now (judgeAPIKey).
// It counts the outcome and returns the service account, or ErrUnauthenticated.
func (s *Server) apiKeyAuthenticated(k store.APIKeyAuth, secret string, now time.Time) (*Principal, error) {
	outcome := s.judgeAPIKey(k, secret, now)
	s.metrics.apiKeyAuth(outcome)
	if outcome != apiKeyOK {
		return nil, ErrUnauthenticated
	}
	s.touchAPIKey(k.KeyID, k.LastUsedAt, now)
	return &Principal{Kind: PrincipalServiceAccount, ServiceAccount: &ServiceAccountPrincipal{
		ID: k.AccountID, ProjectID: k.ProjectID, OrganizationID: k.OrganizationID,
		EnvironmentID: k.EnvironmentID, KeyID: k.KeyID, Scopes: k.Scopes,
	}}, nil
}

// judgeAPIKey judges key k, read for a request presenting secret at now: the secret (an HMAC
// compared in constant time), then the store's rule for a usable key (store.APIKeyUsable:
// revocation, the account's state, expiry, the project's and organization's states). It
// returns the outcome to count.
func (s *Server) judgeAPIKey(k store.APIKeyAuth, secret string, now time.Time) string {
	if !hmac.Equal(identity.HashAPIKeySecret(s.apiKeyPepper, secret), k.SecretHash) {
		return apiKeyWrongSecret
	}
	switch _, why := store.APIKeyUsable(k, now); why {
	case store.APIKeyAccepted:
		return apiKeyOK
	case store.APIKeyRevoked:
		return apiKeyRevoked
	case store.APIKeyDisabled:
		return apiKeyDisabled
	case store.APIKeyExpired:
		return apiKeyExpired
	case store.APIKeyArchived:
		return apiKeyArchived
	default:
		return string(why) // refused all the same, counted under the store's name for it
	}
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
	sess, user, token, err := s.sessions.FromRequest(req)
	if errors.Is(err, identity.ErrNoSession) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Principal{Kind: PrincipalUser, User: user, Session: sess, SessionToken: token}, nil
}

// checkOrigin refuses cross-site writes. An unsafe request that carries the session cookie (and,
// on /api/v1, no API key) must name a trusted origin in Origin, or failing that in Referer; one
// without the cookie is refused when it names an untrusted origin, which stops login CSRF from
// browsers while leaving non-browser clients (which send no Origin) alone. "Origin: null" —
// what a browser sends from a sandboxed frame, a data: URL or after a cross-site redirect — is
// untrusted like any other origin, cookie or not: it could otherwise sign a victim in.
func (s *Server) checkOrigin(req *http.Request, authSurface bool) error {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	origin := req.Header.Get(echo.HeaderOrigin)
	if origin == "null" {
		return authError(http.StatusForbidden, kindForbidden, "MISSING_OR_NULL_ORIGIN", "Missing or null Origin")
	}
	cookieAuth := (s.sessions.HasCookie(req) || s.twoFactors.HasCookie(req) || s.passkeys.HasCookie(req)) && (authSurface || req.Header.Get("X-API-Key") == "")
	if origin == "" {
		if ref := req.Header.Get("Referer"); ref != "" {
			if u, err := url.Parse(ref); err == nil && u.Scheme != "" && u.Host != "" {
				origin = u.Scheme + "://" + u.Host
			}
		}
	}
	switch {
	case origin == "":
		if cookieAuth {
			return authError(http.StatusForbidden, kindForbidden, "MISSING_OR_NULL_ORIGIN", "Missing or null Origin")
		}
		return nil
	case !s.trustedOrigin(origin):
		return s.invalidOrigin()
	}
	return nil
}

// authError is a problem that also carries better-auth's code and message.
func authError(status int, kind, code, message string) *Error {
	return &Error{Status: status, Kind: kind, Title: message, Code: code, Message: message}
}
