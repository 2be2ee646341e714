package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// jwksCacheControl lets relying parties and proxies cache the JWKS for five minutes: a new key
// is published an hour before it signs (oauth.DefaultPublishDelay), so a cached set always
// holds the key of any token they are shown, and a refetch on an unknown kid covers the rest.
const jwksCacheControl = "public, max-age=300"

// getJWKS serves GET /.well-known/jwks.json (getJwks): the published public signing keys as a
// JSON Web Key Set. A failure reaches the error handler, which answers with an RFC 6749 body
// (protocol surface).
func (s *Server) getJWKS(c echo.Context) error {
	set, err := s.signingKeys.JWKS(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", jwksCacheControl)
	return c.JSON(http.StatusOK, set)
}
