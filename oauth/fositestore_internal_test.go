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
			st, client := internalStore(t, b)
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

// internalStore opens a store with one public client.
func internalStore(t *testing.T, b storetest.Backend) (*store.Store, store.OIDCClient) {
	t.Helper()
	ctx := context.Background()
	st := b.Open(t)
	client := store.OIDCClient{Name: "RP", Type: store.OIDCClientSPA, RedirectURIs: []string{"https://rp.example.com/cb"},
		GrantTypes: []string{"authorization_code", "refresh_token"}, Scopes: []string{"openid", "offline_access"}}
	err := st.InTx(ctx, func(tx *store.Tx) error {
		u := store.User{Name: "Owner", Email: "owner@example.com"}
		org := store.Organization{Name: "Acme", Slug: "acme"}
		p := store.Project{Name: "RP", Slug: "rp"}
		if err := storetest.CreateOwnedProject(ctx, tx, &u, "", &org, &p); err != nil {
			return err
		}
		client.ProjectID = p.ID
		return tx.CreateOIDCClient(ctx, &client)
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, client
}

// TestWritesPurgeExpiredRows: storing a row removes rows that expired more than PurgeGrace ago
// and keeps younger ones.
func TestWritesPurgeExpiredRows(t *testing.T) {
	st, client := internalStore(t, storetest.Backends(t)[0])
	ctx := context.Background()
	old := func(sig string, expired time.Duration) store.OAuthToken {
		return store.OAuthToken{Kind: store.OAuthAccess, Signature: sig, RequestID: "old", ClientID: client.ID, Active: true,
			Scopes: "[]", GrantedScopes: "[]", RequestedAudience: "[]", GrantedAudience: "[]",
			RequestedAt: time.Now().Add(-expired - time.Hour), ExpiresAt: time.Now().Add(-expired)}
	}
	err := st.InTx(ctx, func(tx *store.Tx) error {
		for _, tok := range []store.OAuthToken{old("stale", PurgeGrace+time.Minute), old("recent", PurgeGrace-time.Minute)} {
			if err := tx.CreateOAuthToken(ctx, tok); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fs := NewFositeStore(st)
	c, err := fs.GetClient(ctx, client.ID)
	if err != nil {
		t.Fatal(err)
	}
	sess := NewSession("usr_1")
	sess.SetExpiresAt(fosite.AccessToken, time.Now().Add(time.Hour))
	if err := fs.CreateAccessTokenSession(ctx, "new", &fosite.Request{ID: "req", RequestedAt: time.Now(), Client: c, Session: sess}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.OAuthToken(ctx, store.OAuthAccess, "stale"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("row expired past the grace: %v, want purged", err)
	}
	for _, sig := range []string{"recent", "new"} {
		if _, err := st.OAuthToken(ctx, store.OAuthAccess, sig); err != nil {
			t.Errorf("%s: %v, want kept", sig, err)
		}
	}
}
