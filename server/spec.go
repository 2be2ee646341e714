package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/openapi"
)

// specDocument is the OpenAPI document as served: the hand-written document rendered to JSON
// with servers[0].url set to the base URL, and its strong ETag.
type specDocument struct {
	body []byte
	etag string
}

func newSpecDocument(baseURL string) (specDocument, error) {
	b, err := openapi.JSON(baseURL)
	if err != nil {
		return specDocument{}, err
	}
	sum := sha256.Sum256(b)
	return specDocument{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}, nil
}

// getOpenAPIDocument serves the document without credentials. Clients revalidate every use
// (no-cache) and get 304 while the ETag matches.
func (s *Server) getOpenAPIDocument(c echo.Context) error {
	h := c.Response().Header()
	h.Set("ETag", s.spec.etag)
	h.Set("Cache-Control", "public, no-cache")
	if match := c.Request().Header.Get("If-None-Match"); match != "" && etagMatches(match, s.spec.etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, s.spec.body)
}

// etagMatches implements If-None-Match's weak comparison against one strong ETag.
func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}
