package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runOAuthConsents(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("GrantList", func(t *testing.T) { testOAuthConsentGrantList(t, open) })
	t.Run("Invalid", func(t *testing.T) { testOAuthConsentInvalid(t, open) })
	t.Run("Cascade", func(t *testing.T) { testOAuthConsentCascade(t, open) })
}

func testOAuthConsentGrantList(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c1, c2 := webClient(f.project.ID, "one"), webClient(f.project.ID, "two")
	createClient(t, f.s, &c1)
	createClient(t, f.s, &c2)
	u := newUser(t, f.s, "Consenting", "consent@example.com")

	none, err := f.s.OAuthConsents(ctx, u.ID, c1.ID)
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("OAuthConsents before any = %v, %v; want an empty slice", none, err)
	}
	before := f.s.Now()
	c := store.OAuthConsent{UserID: u.ID, ClientID: c1.ID, Scopes: []string{"profile", "openid", "profile", "email"}}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.GrantOAuthConsent(ctx, &c) })
	if !slices.Equal(c.Scopes, []string{"email", "openid", "profile"}) {
		t.Errorf("normalized scopes %v; want [email openid profile]", c.Scopes)
	}
	checkStamped(t, "GrantedAt", c.GrantedAt, before, f.s.Now())
	// The same set in another order is the same row; another set is another row.
	again := store.OAuthConsent{UserID: u.ID, ClientID: c1.ID, Scopes: []string{"email", "profile", "openid"}}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.GrantOAuthConsent(ctx, &again) })
	other := store.OAuthConsent{UserID: u.ID, ClientID: c1.ID, Scopes: []string{"openid"}}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.GrantOAuthConsent(ctx, &other) })

	got, err := f.s.OAuthConsents(ctx, u.ID, c1.ID)
	if err != nil || len(got) != 2 {
		t.Fatalf("OAuthConsents = %v, %v; want 2 rows", got, err)
	}
	var full store.OAuthConsent
	for _, g := range got {
		if len(g.Scopes) == 3 {
			full = g
		}
	}
	if full.UserID != u.ID || full.ClientID != c1.ID || !slices.Equal(full.Scopes, []string{"email", "openid", "profile"}) {
		t.Errorf("stored consent %+v", full)
	}
	if !full.Covers([]string{"openid", "email"}) || full.Covers([]string{"openid", "roles"}) || !full.Covers(nil) {
		t.Errorf("Covers is wrong for %v", full.Scopes)
	}
	// Another client has none.
	if got, err := f.s.OAuthConsents(ctx, u.ID, c2.ID); err != nil || len(got) != 0 {
		t.Errorf("other client's consents = %v, %v; want none", got, err)
	}
	var n int
	mustTx(t, f.s, func(tx *store.Tx) error {
		var err error
		n, err = tx.RevokeOAuthConsents(ctx, u.ID, c1.ID)
		return err
	})
	if n != 2 {
		t.Errorf("RevokeOAuthConsents = %d; want 2", n)
	}
	if got, _ := f.s.OAuthConsents(ctx, u.ID, c1.ID); len(got) != 0 {
		t.Errorf("consents after revocation: %v", got)
	}
}

func testOAuthConsentInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c1 := webClient(f.project.ID, "one")
	createClient(t, f.s, &c1)
	u := newUser(t, f.s, "Consenting", "consent@example.com")
	for _, tc := range []struct {
		name string
		c    store.OAuthConsent
		want error
	}{
		{"no user", store.OAuthConsent{ClientID: c1.ID, Scopes: []string{"openid"}}, store.ErrInvalid},
		{"no client", store.OAuthConsent{UserID: u.ID, Scopes: []string{"openid"}}, store.ErrInvalid},
		{"empty scope", store.OAuthConsent{UserID: u.ID, ClientID: c1.ID, Scopes: []string{""}}, store.ErrInvalid},
		{"scope with a space", store.OAuthConsent{UserID: u.ID, ClientID: c1.ID, Scopes: []string{"openid email"}}, store.ErrInvalid},
		{"unknown user", store.OAuthConsent{UserID: "usr_00000000000000000000000000", ClientID: c1.ID, Scopes: []string{"openid"}}, store.ErrNotFound},
		{"unknown client", store.OAuthConsent{UserID: u.ID, ClientID: "cli_00000000000000000000000000", Scopes: []string{"openid"}}, store.ErrNotFound},
	} {
		err := f.s.InTx(ctx, func(tx *store.Tx) error { return tx.GrantOAuthConsent(ctx, &tc.c) })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
}

func testOAuthConsentCascade(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c1 := webClient(f.project.ID, "one")
	createClient(t, f.s, &c1)
	u := newUser(t, f.s, "Consenting", "consent@example.com")
	c := store.OAuthConsent{UserID: u.ID, ClientID: c1.ID, Scopes: []string{"openid"}}
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.GrantOAuthConsent(ctx, &c) })
	mustTx(t, f.s, func(tx *store.Tx) error { return tx.DeleteUser(ctx, u.ID) })
	if got, err := f.s.OAuthConsents(ctx, u.ID, c1.ID); err != nil || len(got) != 0 {
		t.Errorf("consents of a deleted user = %v, %v; want none", got, err)
	}
}
