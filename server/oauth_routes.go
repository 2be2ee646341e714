package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/oauth"
)

// routeProvider registers the OAuth provider's token-side protocol routes (documented in the
// spec with x-surface: protocol, excluded from the generated interface): the handlers are
// package oauth's, over fosite, and write RFC 6749 bodies themselves.
func (s *Server) routeProvider(e *echo.Echo, p *oauth.Provider) {
	e.POST(oauth.TokenPath, echo.WrapHandler(http.HandlerFunc(p.Token)))
	e.POST(oauth.IntrospectPath, echo.WrapHandler(http.HandlerFunc(p.Introspect)))
	e.POST(oauth.RevokePath, echo.WrapHandler(http.HandlerFunc(p.Revoke)))
	e.POST(oauth.PARPath, echo.WrapHandler(http.HandlerFunc(p.PushedAuthorize)))
	e.GET("/.well-known/openid-configuration", echo.WrapHandler(http.HandlerFunc(p.Discovery)))
	e.GET("/.well-known/oauth-authorization-server", echo.WrapHandler(http.HandlerFunc(p.Discovery)))
}
