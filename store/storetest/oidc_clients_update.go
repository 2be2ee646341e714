package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// testUpdateOIDCClient: UpdateOIDCClient writes the editable members and keeps the secret and
// state; a change of type or method, a broken rule, or an error from change writes nothing.
func testUpdateOIDCClient(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c := webClient(f.project.ID, "web")
	createClient(t, f.s, &c)
	update := func(projectID string, change func(*store.OIDCClient) error) (store.OIDCClient, error) {
		var out store.OIDCClient
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			out, err = tx.UpdateOIDCClient(ctx, projectID, c.ID, change)
			return err
		})
		return out, err
	}
	before := getClient(t, f.s, f.project.ID, c.ID)
	got, err := update(f.project.ID, func(c *store.OIDCClient) error {
		c.Name, c.RedirectURIs, c.PostLogoutRedirectURIs = "Renamed", []string{"https://new.example.com/cb"}, nil
		c.GrantTypes, c.Scopes, c.SkipConsent, c.RequirePAR = []string{"authorization_code"}, []string{"openid"}, true, true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Renamed" || !slices.Equal(got.RedirectURIs, []string{"https://new.example.com/cb"}) ||
		got.PostLogoutRedirectURIs == nil || len(got.PostLogoutRedirectURIs) != 0 || !slices.Equal(got.GrantTypes, []string{"authorization_code"}) ||
		!slices.Equal(got.Scopes, []string{"openid"}) || !got.SkipConsent || !got.RequirePAR || got.Type != "web" ||
		!got.CreatedAt.Equal(before.CreatedAt) || got.UpdatedAt.Before(before.UpdatedAt) || got.SecretHash != nil {
		t.Fatalf("updated = %+v", got)
	}
	// The secret hash is untouched: the protocol lookup still has it.
	if auth, err := f.s.OIDCClientByID(ctx, c.ID); err != nil || len(auth.SecretHash) != store.OIDCClientSecretHashLen {
		t.Fatalf("secret hash after update: %x, %v", auth.SecretHash, err)
	}
	stored := getClient(t, f.s, f.project.ID, c.ID)
	refused := errors.New("refused by the caller")
	for name, tc := range map[string]struct {
		change func(*store.OIDCClient) error
		want   error
	}{
		"type":           {func(c *store.OIDCClient) error { c.Type = store.OIDCClientSPA; c.SkipConsent = false; return nil }, store.ErrInvalid},
		"method":         {func(c *store.OIDCClient) error { c.TokenEndpointAuthMethod = store.OIDCAuthPrivateKeyJWT; return nil }, store.ErrInvalid},
		"jwks on secret": {func(c *store.OIDCClient) error { c.JWKS = `{"keys":[]}`; return nil }, store.ErrInvalid},
		"no name":        {func(c *store.OIDCClient) error { c.Name = ""; return nil }, store.ErrInvalid},
		"no scope":       {func(c *store.OIDCClient) error { c.Scopes = nil; return nil }, store.ErrInvalid},
		"caller refuses": {func(c *store.OIDCClient) error { c.Name = "half"; return refused }, refused},
	} {
		if _, err := update(f.project.ID, tc.change); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if after := getClient(t, f.s, f.project.ID, c.ID); after.Name != stored.Name || !after.UpdatedAt.Equal(stored.UpdatedAt) || after.Type != "web" {
			t.Fatalf("%s wrote: %+v", name, after)
		}
	}
	if _, err := update(f.other.ID, func(*store.OIDCClient) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("through another project: %v, want ErrNotFound", err)
	}
}
