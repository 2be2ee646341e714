package storetest

import (
	"errors"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// testOAuthRevokeUserGrants: RevokeUserOAuthGrants ends one user's grants (refresh tokens kept
// inactive, access tokens deleted, unused codes used up, consents deleted unless kept) and
// nobody else's: another user's rows and a client-credentials token (whose subject is its
// client) stay as they were.
func testOAuthRevokeUserGrants(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	client := webClient(f.project.ID, "grants")
	createClient(t, f.s, &client)
	ada := newUser(t, f.s, "Ada", "ada-grants@example.com")
	bob := newUser(t, f.s, "Bob", "bob-grants@example.com")

	token := func(kind, sig, requestID, subject string, active bool) store.OAuthToken {
		tok := oauthToken(kind, sig, requestID)
		tok.ClientID, tok.Subject, tok.Active = client.ID, subject, active
		return tok
	}
	createOAuthTokens(t, f.s,
		// Ada: two grants (one rotated once), an unused code and a used one.
		token(store.OAuthRefresh, "ada-r1", "ada-req-1", ada.ID, false),
		token(store.OAuthRefresh, "ada-r2", "ada-req-1", ada.ID, true),
		token(store.OAuthAccess, "ada-a2", "ada-req-1", ada.ID, true),
		token(store.OAuthRefresh, "ada-r3", "ada-req-2", ada.ID, true),
		token(store.OAuthAccess, "ada-a3", "ada-req-2", ada.ID, true),
		token(store.OAuthCode, "ada-c1", "ada-req-3", ada.ID, true),
		token(store.OAuthCode, "ada-c0", "ada-req-1", ada.ID, false),
		// Bob's grant and a client-credentials token.
		token(store.OAuthRefresh, "bob-r1", "bob-req-1", bob.ID, true),
		token(store.OAuthAccess, "bob-a1", "bob-req-1", bob.ID, true),
		token(store.OAuthCode, "bob-c1", "bob-req-2", bob.ID, true),
		token(store.OAuthAccess, "cc-a1", "cc-req-1", client.ID, true),
	)
	for _, u := range []store.User{ada, bob} {
		for _, scopes := range [][]string{{"openid"}, {"openid", "roles"}} {
			c := store.OAuthConsent{UserID: u.ID, ClientID: client.ID, Scopes: scopes}
			mustTx(t, f.s, func(tx *store.Tx) error { return tx.GrantOAuthConsent(ctx, &c) })
		}
	}

	revoke := func(userID string, keepConsents bool) store.OAuthGrantRevocation {
		t.Helper()
		var r store.OAuthGrantRevocation
		mustTx(t, f.s, func(tx *store.Tx) (err error) {
			r, err = tx.RevokeUserOAuthGrants(ctx, userID, keepConsents)
			return err
		})
		return r
	}
	// Ada's grants end, her consents stay.
	if got, want := revoke(ada.ID, true), (store.OAuthGrantRevocation{RefreshTokens: 2, AccessTokens: 2, Codes: 1}); got != want {
		t.Errorf("RevokeUserOAuthGrants(ada, keep consents) = %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		kind, sig string
		exists    bool
		active    bool
	}{
		{store.OAuthRefresh, "ada-r1", true, false}, {store.OAuthRefresh, "ada-r2", true, false},
		{store.OAuthRefresh, "ada-r3", true, false}, {store.OAuthAccess, "ada-a2", false, false},
		{store.OAuthAccess, "ada-a3", false, false}, {store.OAuthCode, "ada-c1", true, false},
		{store.OAuthCode, "ada-c0", true, false},
		{store.OAuthRefresh, "bob-r1", true, true}, {store.OAuthAccess, "bob-a1", true, true},
		{store.OAuthCode, "bob-c1", true, true}, {store.OAuthAccess, "cc-a1", true, true},
	} {
		got, err := f.s.OAuthToken(ctx, c.kind, c.sig)
		switch {
		case !c.exists && !errors.Is(err, store.ErrNotFound):
			t.Errorf("%s %s: %v, want deleted", c.kind, c.sig, err)
		case c.exists && (err != nil || got.Active != c.active):
			t.Errorf("%s %s: active %v, %v; want kept with active %v", c.kind, c.sig, got.Active, err, c.active)
		}
	}
	if got, err := f.s.OAuthConsents(ctx, ada.ID, client.ID); err != nil || len(got) != 2 {
		t.Errorf("Ada's consents after a revocation that keeps them: %v, %v; want 2", got, err)
	}
	// Again: nothing left to change.
	if got := revoke(ada.ID, true); got != (store.OAuthGrantRevocation{}) {
		t.Errorf("second RevokeUserOAuthGrants(ada) = %+v, want zeros", got)
	}
	// Without keeping consents: Bob's go too; Ada's stay.
	if got, want := revoke(bob.ID, false), (store.OAuthGrantRevocation{RefreshTokens: 1, AccessTokens: 1, Codes: 1, Consents: 2}); got != want {
		t.Errorf("RevokeUserOAuthGrants(bob) = %+v, want %+v", got, want)
	}
	if got, err := f.s.OAuthConsents(ctx, bob.ID, client.ID); err != nil || len(got) != 0 {
		t.Errorf("Bob's consents: %v, %v; want none", got, err)
	}
	if got, err := f.s.OAuthConsents(ctx, ada.ID, client.ID); err != nil || len(got) != 2 {
		t.Errorf("Ada's consents after Bob's revocation: %v, %v; want 2", got, err)
	}
	if got, err := f.s.OAuthToken(ctx, store.OAuthAccess, "cc-a1"); err != nil || !got.Active {
		t.Errorf("client-credentials token: active %v, %v; want untouched", got.Active, err)
	}
	// An unknown user has nothing; an empty id is refused.
	if got := revoke("usr_00000000000000000000000000", false); got != (store.OAuthGrantRevocation{}) {
		t.Errorf("RevokeUserOAuthGrants(unknown) = %+v, want zeros", got)
	}
	wantErr(t, f.s, store.ErrInvalid, "RevokeUserOAuthGrants with an empty user id", func(tx *store.Tx) error {
		_, err := tx.RevokeUserOAuthGrants(ctx, "", false)
		return err
	})
}
