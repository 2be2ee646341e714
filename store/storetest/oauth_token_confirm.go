package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// testOAuthTokenClientVersion: a token row written on condition of its client's version
// (OAuthToken.ClientVersion) is written while the client is at that version and usable, and is
// refused with ErrClientChanged, writing nothing, after any change to the client's row (each
// moves the version by one) or while the client is disabled or its project or organization
// archived; through each way a row is written: StoreOAuthToken alone, StoreOAuthToken with a
// purge (a transaction on PostgreSQL) and Tx.CreateOAuthToken.
func testOAuthTokenClientVersion(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c := webClient(f.project.ID, "machine")
	createClient(t, f.s, &c)
	change := func(fn func(tx *store.Tx) error) { t.Helper(); mustTx(t, f.s, fn) }
	version := func() int64 {
		t.Helper()
		auth, err := f.s.OIDCClientByID(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return auth.Version
	}
	n := 0
	// write writes a token row conditioned on version v, each way, and reports what each
	// returned and whether its row is there.
	write := func(step string, v int64, want error) {
		t.Helper()
		for _, how := range []string{"alone", "with a purge", "in a transaction"} {
			n++
			tok := oauthToken(store.OAuthAccess, fmt.Sprintf("sig-v%d", n), fmt.Sprintf("req-v%d", n))
			tok.ClientID, tok.ClientVersion = c.ID, v
			var err error
			switch how {
			case "alone":
				err = f.s.StoreOAuthToken(ctx, tok, store.TokenPurge{})
			case "with a purge":
				err = f.s.StoreOAuthToken(ctx, tok, store.TokenPurge{ExpiredBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Limit: 1})
			default:
				err = f.s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOAuthToken(ctx, tok) })
			}
			if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
				t.Errorf("%s, version %d, %s: %v, want %v", step, v, how, err, want)
			}
			_, rerr := f.s.OAuthToken(ctx, store.OAuthAccess, tok.Signature)
			if stored := rerr == nil; stored != (want == nil) {
				t.Errorf("%s, version %d, %s: row stored %v (%v)", step, v, how, stored, rerr)
			}
		}
	}

	if v := version(); v != 1 {
		t.Fatalf("a new client's version %d, want 1", v)
	}
	write("as created", 1, nil)
	write("as created", 2, store.ErrClientChanged)

	change(func(tx *store.Tx) error {
		_, err := tx.SetOIDCClientSecretHash(ctx, f.project.ID, c.ID, clientHash())
		return err
	})
	if v := version(); v != 2 {
		t.Fatalf("after a secret rotation: version %d, want 2", v)
	}
	write("secret rotated", 1, store.ErrClientChanged)
	write("secret rotated", 2, nil)

	change(func(tx *store.Tx) error {
		_, err := tx.SetOIDCClientDisabled(ctx, f.project.ID, c.ID, true)
		return err
	})
	if v := version(); v != 3 {
		t.Fatalf("after disabling: version %d, want 3", v)
	}
	write("disabled", 2, store.ErrClientChanged)
	write("disabled", 3, store.ErrClientChanged)

	change(func(tx *store.Tx) error {
		_, err := tx.SetOIDCClientDisabled(ctx, f.project.ID, c.ID, false)
		return err
	})
	if v := version(); v != 4 {
		t.Fatalf("after enabling: version %d, want 4", v)
	}
	write("enabled again", 3, store.ErrClientChanged)
	write("enabled again", 4, nil)

	change(func(tx *store.Tx) error {
		_, err := tx.UpdateOIDCClient(ctx, f.project.ID, c.ID, func(c *store.OIDCClient) error {
			c.Scopes = []string{"openid"}
			return nil
		})
		return err
	})
	if v := version(); v != 5 {
		t.Fatalf("after an update: version %d, want 5", v)
	}
	write("scopes changed", 4, store.ErrClientChanged)
	write("scopes changed", 5, nil)

	// Archiving is a change of the project or organization: the client's version stays.
	change(func(tx *store.Tx) error { _, err := tx.SetProjectArchived(ctx, f.project.ID, true); return err })
	write("project archived", 5, store.ErrClientChanged)
	change(func(tx *store.Tx) error { _, err := tx.SetProjectArchived(ctx, f.project.ID, false); return err })
	write("project restored", 5, nil)
	change(func(tx *store.Tx) error { _, err := tx.SetOrganizationArchived(ctx, f.org.ID, true); return err })
	write("organization archived", 5, store.ErrClientChanged)
	change(func(tx *store.Tx) error { _, err := tx.SetOrganizationArchived(ctx, f.org.ID, false); return err })
	write("organization restored", 5, nil)
	if v := version(); v != 5 {
		t.Errorf("after archiving and restoring its project and organization: version %d, want 5", v)
	}

	// A row without a version is written as before, whatever its client.
	plain := oauthToken(store.OAuthAccess, "sig-plain", "req-plain")
	if err := f.s.StoreOAuthToken(ctx, plain, store.TokenPurge{}); err != nil {
		t.Errorf("a row without a version: %v", err)
	}
}
