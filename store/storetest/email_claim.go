package storetest

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runEmailClaim(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("VerifyEmail", func(t *testing.T) { testVerifyEmail(t, open) })
	t.Run("RemoveSignInMethods", func(t *testing.T) { testRemoveSignInMethods(t, open) })
	t.Run("RevokeUserGrants", func(t *testing.T) { testRevokeUserGrants(t, open) })
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

// RevokeUserGrants deactivates the user's active refresh tokens and codes, deletes their access
// tokens and consents, and leaves other subjects' grants alone.
func testRevokeUserGrants(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	client := webClient(f.project.ID, "claims")
	createClient(t, f.s, &client)
	u, other := newUser(t, f.s, "Granting", "granting@example.com"), newUser(t, f.s, "Bystander", "bystander@example.com")
	tok := func(kind, sig, subject string, active bool) store.OAuthToken {
		o := oauthToken(kind, sig, "req-"+sig)
		o.ClientID, o.Subject, o.Active = client.ID, subject, active
		o.ExpiresAt = time.Now().Add(time.Hour)
		return o
	}
	createOAuthTokens(t, f.s,
		tok(store.OAuthRefresh, "r-live", u.ID, true), tok(store.OAuthRefresh, "r-rotated", u.ID, false),
		tok(store.OAuthCode, "c-new", u.ID, true), tok(store.OAuthCode, "c-used", u.ID, false),
		tok(store.OAuthAccess, "a-1", u.ID, true), tok(store.OAuthAccess, "a-2", u.ID, true),
		tok(store.OAuthRefresh, "r-other", other.ID, true), tok(store.OAuthAccess, "a-other", other.ID, true))
	mustTx(t, f.s, func(tx *store.Tx) error {
		for _, c := range []store.OAuthConsent{{UserID: u.ID, ClientID: client.ID, Scopes: []string{"openid"}},
			{UserID: other.ID, ClientID: client.ID, Scopes: []string{"openid"}}} {
			if err := tx.GrantOAuthConsent(ctx, &c); err != nil {
				return err
			}
		}
		return nil
	})
	var got store.RevokedGrants
	mustTx(t, f.s, func(tx *store.Tx) (err error) { got, err = tx.RevokeUserGrants(ctx, u.ID); return err })
	if want := (store.RevokedGrants{RefreshTokens: 1, Codes: 1, AccessTokens: 2, Consents: 1}); got != want {
		t.Errorf("RevokeUserGrants = %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		kind, sig string
		exists    bool
		active    bool
	}{
		{store.OAuthRefresh, "r-live", true, false}, {store.OAuthRefresh, "r-rotated", true, false},
		{store.OAuthCode, "c-new", true, false}, {store.OAuthCode, "c-used", true, false},
		{store.OAuthAccess, "a-1", false, false}, {store.OAuthAccess, "a-2", false, false},
		{store.OAuthRefresh, "r-other", true, true}, {store.OAuthAccess, "a-other", true, true},
	} {
		row, err := f.s.OAuthToken(ctx, c.kind, c.sig)
		if exists := err == nil; exists != c.exists || exists && row.Active != c.active {
			t.Errorf("%s %s after RevokeUserGrants: %+v %v; want exists %v active %v", c.kind, c.sig, row.Active, err, c.exists, c.active)
		}
	}
	if left, _ := f.s.OAuthConsents(ctx, u.ID, client.ID); len(left) != 0 {
		t.Errorf("consents left: %+v", left)
	}
	if kept, _ := f.s.OAuthConsents(ctx, other.ID, client.ID); len(kept) != 1 {
		t.Errorf("the other user's consents: %+v; want one", kept)
	}
}
