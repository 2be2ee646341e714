package server

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestPinnedAccountBodyEnvironment: a pinned service account naming another environment in
// the validated body is refused with the environment error before the permission check; its
// own environment passes on to the scope check. (No route has a body environmentId yet; the
// checkout route will.)
func TestPinnedAccountBodyEnvironment(t *testing.T) {
	s := &Server{}
	sa := &ServiceAccountPrincipal{ProjectID: "prj_1", OrganizationID: "org_1", EnvironmentID: "env_prod", Scopes: []string{"billing:read"}}
	scope := store.Scope{OrganizationID: "org_1", ProjectID: "prj_1"}
	for _, tc := range []struct {
		env  string
		want error
	}{
		{"env_dev", ErrEnvScoped},   // another environment, and no billing:manage either
		{"env_prod", ErrPermission}, // own environment: the permission decides
		{"", ErrPermission},         // no environment named
	} {
		m := &matchedRoute{operation: &operation{policy: policy{permissions: []string{PermBillingManage}}}, body: map[string]any{"environmentId": tc.env}}
		err := s.authorizeServiceAccount(httptest.NewRequest("POST", "/", nil), m, sa, scope)
		if !errors.Is(err, tc.want) {
			t.Errorf("body environment %q: %v, want %v", tc.env, err, tc.want)
		}
	}
}
