package oauth

import (
	"context"
	"slices"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/oauth2"
)

// refreshScopeHandler is fosite's refresh grant with the scope parameter of RFC 6749 section 6,
// which fosite v0.49.0 ignores: its handler always grants the original scope again, whatever
// the client asks (fosite's master branch has since added the check; this goes when a release
// with it is pinned). Here:
//
//   - without scope, the new tokens carry the grant's scope, as before;
//   - a scope that holds anything the resource owner did not grant is invalid_scope (section
//     5.2), refused before anything is stored, so the refresh token stays usable;
//   - a narrower scope is what the new access token carries (its scope claim, introspection,
//     the token response's scope; an ID token only while openid is in it), while the new
//     refresh token keeps the grant's whole scope ("the refresh token scope MUST be identical
//     to that of the refresh token included by the client in the request"), so a later refresh
//     may ask for any of it again.
type refreshScopeHandler struct {
	*oauth2.RefreshTokenGrantHandler
}

// refreshTokenGrantFactory composes fosite's refresh grant handler wrapped in
// refreshScopeHandler.
func refreshTokenGrantFactory(config fosite.Configurator, storage, strategy interface{}) interface{} {
	return refreshScopeHandler{compose.OAuth2RefreshTokenGrantFactory(config, storage, strategy).(*oauth2.RefreshTokenGrantHandler)}
}

// HandleTokenEndpointRequest lets fosite check the refresh token and re-grant the original
// scope, then applies the request's scope parameter.
func (h refreshScopeHandler) HandleTokenEndpointRequest(ctx context.Context, ar fosite.AccessRequester) error {
	// fosite.NewAccessRequest parsed the scope parameter into the requested scopes; fosite's
	// handler replaces them with the original request's.
	requested := slices.Clone(ar.GetRequestedScopes())
	if err := h.RefreshTokenGrantHandler.HandleTokenEndpointRequest(ctx, ar); err != nil {
		return err
	}
	if len(requested) == 0 {
		return nil
	}
	grant := slices.Clone(ar.GetGrantedScopes())
	for _, s := range requested {
		if !grant.Has(s) {
			return fosite.ErrInvalidScope.WithHintf("The requested scope '%s' was not granted by the resource owner.", s)
		}
	}
	req, ok := ar.(*fosite.AccessRequest)
	sess, isSession := ar.GetSession().(*Session)
	if !ok || !isSession {
		return fosite.ErrServerError.WithDebug("refresh: unexpected access request or session type")
	}
	narrowed := fosite.Arguments{}
	for _, s := range grant {
		if slices.Contains(requested, s) {
			narrowed = append(narrowed, s)
		}
	}
	req.GrantedScope = narrowed
	sess.refreshGrantScopes = grant
	return nil
}
