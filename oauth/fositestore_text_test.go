package oauth

import (
	"context"
	"errors"
	"testing"

	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestGetClientNotText: a client id that is not UTF-8 text without NUL (from a form, a query,
// HTTP Basic or an assertion) names no client on any backend: fosite.ErrNotFound, which fosite
// answers as an unknown client, without a query that PostgreSQL would refuse.
func TestGetClientNotText(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			st, _ := internalStore(t, b)
			fs := NewFositeStore(st)
			for _, id := range []string{"cli_x\x00", "\xff\xfe\xfd", "\xc0\xae\xc0\xae\xc0\xaf"} {
				if _, err := fs.GetClient(context.Background(), id); !errors.Is(err, fosite.ErrNotFound) {
					t.Errorf("GetClient(%q) = %v, want fosite.ErrNotFound", id, err)
				}
			}
		})
	}
}
