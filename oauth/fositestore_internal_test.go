package oauth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestRefreshAbsoluteLifetime: a refresh token whose grant is older than MaxRefreshGrantAge is
// refused (fosite.ErrNotFound: invalid_grant), however recently it was rotated; the grant time
// is set on the first stored token and kept by the session.
func TestRefreshAbsoluteLifetime(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			client := store.OIDCClient{Name: "RP", Type: store.OIDCClientSPA, RedirectURIs: []string{"https://rp.example.com/cb"},
				GrantTypes: []string{"authorization_code", "refresh_token"}, Scopes: []string{"openid", "offline_access"}}
			err := st.InTx(ctx, func(tx *store.Tx) error {
				u := store.User{Name: "Owner", Email: "owner@example.com"}
				if err := tx.CreateUser(ctx, &u, ""); err != nil {
					return err
				}
				org := store.Organization{Name: "Acme", Slug: "acme"}
				if _, err := tx.CreateOrganization(ctx, &org, u.ID); err != nil {
					return err
				}
				p := store.Project{OrganizationID: org.ID, Name: "RP", Slug: "rp"}
				if err := tx.CreateProject(ctx, &p); err != nil {
					return err
				}
				client.ProjectID = p.ID
				return tx.CreateOIDCClient(ctx, &client)
			})
			if err != nil {
				t.Fatal(err)
			}
			fs := NewFositeStore(st)
			c, err := fs.GetClient(ctx, client.ID)
			if err != nil {
				t.Fatal(err)
			}
			granted := time.Now().Add(-MaxRefreshGrantAge + time.Hour)
			req := &fosite.Request{ID: "req-1", RequestedAt: granted, Client: c, Session: NewSession("usr_1"),
				RequestedScope: fosite.Arguments{"offline_access"}, GrantedScope: fosite.Arguments{"offline_access"}}
			if err := fs.CreateRefreshTokenSession(ctx, "rt-1", "at-1", req); err != nil {
				t.Fatal(err)
			}
			got, err := fs.GetRefreshTokenSession(ctx, "rt-1", NewSession(""))
			if err != nil {
				t.Fatalf("within 90 days: %v", err)
			}
			if s := got.GetSession().(*Session); !s.GrantedAt.Equal(granted) || s.Subject != "usr_1" {
				t.Fatalf("stored session: granted %v (want %v), sub %q", s.GrantedAt, granted, s.Subject)
			}
			fs.clock = func() time.Time { return time.Now().Add(2 * time.Hour) }
			if _, err := fs.GetRefreshTokenSession(ctx, "rt-1", NewSession("")); !errors.Is(err, fosite.ErrNotFound) {
				t.Errorf("past 90 days: %v, want fosite.ErrNotFound", err)
			}
		})
	}
}
