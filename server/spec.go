package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

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
// (no-cache); http.ServeContent answers If-None-Match with 304 while the ETag matches.
func (s *Server) getOpenAPIDocument(c echo.Context) error {
	h := c.Response().Header()
	h.Set("ETag", s.spec.etag)
	h.Set("Cache-Control", "public, no-cache")
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(s.spec.body))
	return nil
}
