package server

import (
	"sort"
	"strings"
	"testing"
)

// noDatabaseOperations answer without reading the database (documentation, static discovery
// documents, the provider list), or render a browser page or redirect on the OAuth protocol
// surface rather than an API error: they need not document a 503.
var noDatabaseOperations = map[string]bool{
	"getProblemType": true, "getDocsOpenApiDocument": true, "getDocsApiReference": true,
	"getOpenApiDocument": true, "listSocialProviders": true, "getOpenidConfiguration": true,
	"getOauthAuthorizationServer": true, "getSignInPage": true,
	"getOauth2Authorize": true, "postOauth2Authorize": true, "getOauth2Consent": true,
	"postOauth2Consent": true, "getOauth2EndSession": true, "postOauth2EndSession": true,
	"socialCallback": true,
}

// TestDatabaseOperationsDocument503: every other operation documents the 503 it answers while
// the database is unreachable (docs/failover.md), with a Retry-After header.
func TestDatabaseOperationsDocument503(t *testing.T) {
	doc := loadTestSpec(t)
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if noDatabaseOperations[op.OperationID] {
				continue
			}
			r := op.Responses.Value("503")
			if r == nil || r.Value == nil || r.Value.Headers["Retry-After"] == nil {
				missing = append(missing, op.OperationID+" ("+method+" "+path+")")
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d operations document no 503 with Retry-After:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}
