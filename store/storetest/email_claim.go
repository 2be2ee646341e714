package storetest

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runEmailClaim(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("VerifyEmail", func(t *testing.T) { testVerifyEmail(t, open) })
	t.Run("RemoveSignInMethods", func(t *testing.T) { testRemoveSignInMethods(t, open) })
	t.Run("RemoveProviderLinks", func(t *testing.T) { testRemoveProviderLinks(t, open) })
}

// RemoveProviderLinks deletes one user's provider links and keeps its password.
func testRemoveProviderLinks(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u, other := newUser(t, s, "Held", "held@example.com"), newUser(t, s, "Other", "other-held@example.com")
	mustTx(t, s, func(tx *store.Tx) error {
		if err := tx.SetPassword(ctx, u.ID, "$argon2id$kept"); err != nil {
			return err
		}
		for _, link := range [][3]string{{u.ID, "github", "gh-1"}, {u.ID, "google", "g-1"}, {other.ID, "github", "gh-2"}} {
			if _, err := tx.LinkAccount(ctx, link[0], link[1], link[2], nil); err != nil {
				return err
			}
		}
		return nil
	})
	var links int64
	mustTx(t, s, func(tx *store.Tx) (err error) { links, err = tx.RemoveProviderLinks(ctx, u.ID); return err })
	if links != 2 {
		t.Errorf("RemoveProviderLinks = %d, want 2", links)
	}
	if got, _ := s.LinkedAccounts(ctx, u.ID); len(got) != 1 || got[0].ProviderID != store.CredentialProvider {
		t.Errorf("accounts left: %+v; want the credential account", got)
	}
	if hash, _ := s.PasswordHash(ctx, u.ID); hash != "$argon2id$kept" {
		t.Errorf("password hash = %q", hash)
	}
	if got, _ := s.LinkedAccounts(ctx, other.ID); len(got) != 1 {
		t.Errorf("the other user's accounts: %+v", got)
	}
}

// VerifyEmail reports a change once: a second call, and a call for an unknown user, report false.
func testVerifyEmail(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Claimed", "claimed@example.com")
	for i, want := range []bool{true, false} {
		var changed bool
		mustTx(t, s, func(tx *store.Tx) (err error) { changed, err = tx.VerifyEmail(ctx, u.ID); return err })
		if changed != want {
			t.Errorf("VerifyEmail call %d = %v, want %v", i+1, changed, want)
		}
	}
	if got, err := s.User(ctx, u.ID); err != nil || !got.EmailVerified {
		t.Errorf("user after VerifyEmail: %+v %v", got, err)
	}
	var changed bool
	mustTx(t, s, func(tx *store.Tx) (err error) { changed, err = tx.VerifyEmail(ctx, "usr_missing"); return err })
	if changed {
		t.Error("VerifyEmail of an unknown user reported a change")
	}
}

// RemoveSignInMethods deletes the password and every provider link of one user, no other's.
func testRemoveSignInMethods(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u, other := newUser(t, s, "Held", "held@example.com"), newUser(t, s, "Other", "other-held@example.com")
	mustTx(t, s, func(tx *store.Tx) error {
		for _, id := range []string{u.ID, other.ID} {
			if err := tx.SetPassword(ctx, id, "$argon2id$fake"); err != nil {
				return err
			}
		}
		for _, link := range [][3]string{{u.ID, "github", "gh-1"}, {u.ID, "google", "g-1"}, {other.ID, "github", "gh-2"}} {
			if _, err := tx.LinkAccount(ctx, link[0], link[1], link[2], nil); err != nil {
				return err
			}
		}
		return nil
	})
	var password bool
	var links int64
	mustTx(t, s, func(tx *store.Tx) (err error) { password, links, err = tx.RemoveSignInMethods(ctx, u.ID); return err })
	if !password || links != 2 {
		t.Errorf("RemoveSignInMethods = %v, %d; want true, 2", password, links)
	}
	if got, _ := s.LinkedAccounts(ctx, u.ID); len(got) != 0 {
		t.Errorf("accounts left: %+v", got)
	}
	if hash, err := s.PasswordHash(ctx, u.ID); err != nil || hash != "" {
		t.Errorf("password hash left: %q %v", hash, err)
	}
	if got, _ := s.LinkedAccounts(ctx, other.ID); len(got) != 2 {
		t.Errorf("the other user's accounts: %+v; want credential and GitHub", got)
	}
	mustTx(t, s, func(tx *store.Tx) (err error) { password, links, err = tx.RemoveSignInMethods(ctx, u.ID); return err })
	if password || links != 0 {
		t.Errorf("RemoveSignInMethods again = %v, %d; want false, 0", password, links)
	}
}
