package oauth

import (
	"encoding/json"
	"net/http"
)

// jwksCacheControl lets relying parties and proxies cache the JWKS for five minutes: a new key
// is published an hour before it signs (DefaultPublishDelay), so a cached set always holds the
// key of any token they are shown, and a refetch on an unknown kid covers the rest.
const jwksCacheControl = "public, max-age=300"

// JWKS serves GET /.well-known/jwks.json (getJwks): the published public signing keys as a
// JSON Web Key Set. A failure is returned for the mounting server's error handler, which
// answers with an RFC 6749 body (protocol surface).
func (p *Provider) JWKS(w http.ResponseWriter, r *http.Request) error {
	set, err := p.keys.JWKS(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", jwksCacheControl)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	return json.NewEncoder(w).Encode(set)
}
