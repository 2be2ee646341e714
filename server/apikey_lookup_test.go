package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestAPIKeyLookupPolicy: which operations may read their API key other than afresh is declared
// in the spec (x-api-key-lookup) and read at start-up: exactly these operations carry each value.
func TestAPIKeyLookupPolicy(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	want := map[string]apiKeyLookup{
		"authorize":               "with-decision",
		"authorizeBatch":          "with-epoch",
		"getPrincipalPermissions": "with-epoch",
		"listPermissionHolders":   "with-epoch",
		"ingestUsageEvent":        "cached",
		"ingestUsageEventBatch":   "cached",
	}
	got := map[string]apiKeyLookup{}
	for id, p := range app.srv.policies {
		if p.apiKeyLookup != apiKeyRead {
			got[id] = p.apiKeyLookup
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operations with x-api-key-lookup = %v, want %v", got, want)
	}
}

// TestAPIKeyLookupRefused: start-up refuses an x-api-key-lookup it does not know, one that is
// not a string, and one on an operation that no API key authenticates.
func TestAPIKeyLookupRefused(t *testing.T) {
	doc := loadTestSpec(t)
	v, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadOperations(doc, v); err != nil {
		t.Fatalf("the spec as written: %v", err)
	}
	authorize := doc.Paths.Find("/api/v1/authorize").Post
	authorize.Extensions["x-api-key-lookup"] = "sometimes"
	if _, err := loadOperations(doc, v); err == nil || !strings.Contains(err.Error(), "x-api-key-lookup") {
		t.Errorf("x-api-key-lookup: sometimes: %v, want a start-up error", err)
	}
	authorize.Extensions["x-api-key-lookup"] = "with-decision"

	for _, tc := range []struct {
		name       string
		extensions map[string]any
		tags       []string
	}{
		{"unknown value", map[string]any{"x-permission": "usage:write", "x-api-key-lookup": "always"}, nil},
		{"not a string", map[string]any{"x-permission": "usage:write", "x-api-key-lookup": true}, nil},
		{"public operation", map[string]any{"x-permission": "none", "x-api-key-lookup": "cached"}, nil},
		{"auth-json operation", map[string]any{"x-permission": "session", "x-api-key-lookup": "cached"}, []string{"Auth / Default"}},
	} {
		op := &openapi3.Operation{OperationID: "op", Tags: tc.tags, Extensions: tc.extensions}
		if _, err := readPolicy(http.MethodPost, "/api/v1/x", op); err == nil {
			t.Errorf("%s: readPolicy accepted %v", tc.name, tc.extensions)
		}
	}
	for value, want := range map[string]apiKeyLookup{"cached": apiKeyCached, "with-decision": apiKeyWithDecision} {
		op := &openapi3.Operation{OperationID: "op", Extensions: map[string]any{"x-permission": "usage:write", "x-api-key-lookup": value}}
		if p, err := readPolicy(http.MethodPost, "/api/v1/x", op); err != nil || p.apiKeyLookup != want {
			t.Errorf("x-api-key-lookup %s: %q %v, want %q", value, p.apiKeyLookup, err, want)
		}
	}
}

// TestAPIKeyWithDecision: for a with-decision operation, authentication reads the decision and
// the decision epoch with the key (later requests find them kept: TestKeptDecisionsFollowChanges)
// and gives them to the principal as data; the handler's decide uses it for exactly the question it answers and asks the store
// otherwise. An operation without the policy never gets a decision read with its key.
func TestAPIKeyWithDecision(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		dev := rbacCaller{t, app, ten.members[RoleOwner], ten.project.ID}
		dev.bind(dev.createRole(`{"name":"Editor","permissions":["document:read"]}`).ID, "user", "alice")
		q := authorizeQuestion{ProjectID: ten.project.ID, PrincipalType: store.PrincipalUser, PrincipalID: "alice", Permission: "document:read"}
		authenticate := func(lookup apiKeyLookup) *Principal {
			t.Helper()
			req := httptest.NewRequest(http.MethodPost, "/api/v1/authorize",
				strings.NewReader(authorizeBody(q.ProjectID, q.PrincipalType, q.PrincipalID, q.Permission)))
			p, err := app.srv.apiKeyPrincipalFor(req, lookup, ten.readerKey)
			if err != nil || p == nil || p.ServiceAccount == nil {
				t.Fatalf("%q: %+v %v", lookup, p, err)
			}
			return p
		}
		if p := authenticate(apiKeyRead); p.ServiceAccount.prefetched != nil {
			t.Errorf("no x-api-key-lookup: a decision was read with the key: %+v", p.ServiceAccount.prefetched)
		}
		p := authenticate(apiKeyWithDecision)
		pre := p.ServiceAccount.prefetched
		if pre == nil || p.ServiceAccount.decisionEpoch == nil {
			t.Fatalf("with-decision: decision %+v and epoch %v read with the key, want both", pre, p.ServiceAccount.decisionEpoch)
		}
		if want := (store.Decision{Allowed: true, Roles: []string{"editor"}}); pre.question != q || !reflect.DeepEqual(pre.Decision, want) {
			t.Errorf("prefetched %+v, want %+v for %+v", *pre, want, q)
		}

		// decide answers from the prefetched decision only when the question is the same. A
		// prefetched answer the store would not give shows which one was used.
		pre.Decision = store.Decision{Allowed: false, Roles: []string{"prefetched"}}
		ctx := context.WithValue(context.Background(), principalKey{}, p)
		if d, err := app.srv.decide(ctx, q); err != nil || !reflect.DeepEqual(d, pre.Decision) {
			t.Errorf("decide(same question) = %+v %v, want the prefetched %+v", d, err, pre.Decision)
		}
		other := q
		other.Permission = "document:write"
		if d, err := app.srv.decide(ctx, other); err != nil || !reflect.DeepEqual(d, store.Decision{Allowed: false, Roles: []string{"editor"}}) {
			t.Errorf("decide(another question) = %+v %v, want the store's answer", d, err)
		}
		if d, err := app.srv.decide(context.Background(), q); err != nil || !reflect.DeepEqual(d, store.Decision{Allowed: true, Roles: []string{"editor"}}) {
			t.Errorf("decide(no principal) = %+v %v, want the store's answer", d, err)
		}
	})
}
