package server

import (
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/oauth"
)

// TestGrantTypesMatchSpec: the grants a client may be registered for (the spec's
// OidcGrantType enum) are exactly the grants the provider serves and advertises.
func TestGrantTypesMatchSpec(t *testing.T) {
	spec := []string{string(gen.OidcGrantAuthorizationCode), string(gen.OidcGrantClientCredentials), string(gen.OidcGrantRefreshToken)}
	for _, g := range spec {
		if !gen.OidcGrantType(g).Valid() {
			t.Fatalf("%s is not in the spec's enum", g)
		}
	}
	if gen.OidcGrantType("password").Valid() || gen.OidcGrantType("implicit").Valid() {
		t.Fatal("the spec's enum lists a grant the provider never serves")
	}
	got := slices.Sorted(slices.Values(oauth.Grants))
	if want := []string{"authorization_code", "client_credentials", "refresh_token"}; !slices.Equal(got, want) || !slices.Equal(slices.Sorted(slices.Values(spec)), want) {
		t.Fatalf("oauth.Grants = %v, spec enum = %v, want both %v", got, spec, want)
	}
}
