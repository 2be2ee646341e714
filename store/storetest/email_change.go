package storetest

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runEmailChange covers the pieces of an email change: its token and the move itself.
func runEmailChange(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Token", func(t *testing.T) { testEmailChangeToken(t, open) })
	t.Run("ChangeEmail", func(t *testing.T) { testChangeEmail(t, open) })
}

func testEmailChangeToken(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	createEmailToken(t, s, "hash-change", store.EmailToken{Purpose: store.EmailTokenChangeEmail, UserID: u.ID,
		Email: "ada@example.com", NewEmail: "Ada.King@Example.com", ExpiresAt: expires})
	got, err := s.EmailTokenByHash(ctx, store.EmailTokenChangeEmail, "hash-change")
	if err != nil || got.NewEmail != "ada.king@example.com" || got.Email != "ada@example.com" || got.UserID != u.ID {
		t.Fatalf("change token = %+v, %v", got, err)
	}
	wantErr(t, s, store.ErrInvalid, "a change token without a new address", func(tx *store.Tx) error {
		return tx.CreateEmailToken(ctx, "hash-x", &store.EmailToken{Purpose: store.EmailTokenChangeEmail, UserID: u.ID, Email: "a@b", ExpiresAt: expires})
	})
	wantErr(t, s, store.ErrInvalid, "a new address on another purpose", func(tx *store.Tx) error {
		return tx.CreateEmailToken(ctx, "hash-x", &store.EmailToken{Purpose: store.EmailTokenVerifyEmail, UserID: u.ID, Email: "a@b",
			NewEmail: "c@d", ExpiresAt: expires})
	})
	// A decoy: no user.
	createEmailToken(t, s, "hash-decoy", store.EmailToken{Purpose: store.EmailTokenChangeEmail, Email: "ada@example.com",
		NewEmail: "grace@example.com", ExpiresAt: expires})
	if got, err := s.EmailTokenByHash(ctx, store.EmailTokenChangeEmail, "hash-decoy"); err != nil || got.UserID != "" {
		t.Errorf("decoy = %+v, %v", got, err)
	}
}

func testChangeEmail(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	newUser(t, s, "Grace", "grace@example.com")
	wantErr(t, s, store.ErrConflict, "an address another user has", func(tx *store.Tx) error {
		_, err := tx.ChangeEmail(ctx, u.ID, "ada@example.com", "Grace@example.com")
		return err
	})
	wantErr(t, s, store.ErrNotFound, "a user who no longer has the old address", func(tx *store.Tx) error {
		_, err := tx.ChangeEmail(ctx, u.ID, "old@example.com", "new@example.com")
		return err
	})
	wantErr(t, s, store.ErrInvalid, "an empty address", func(tx *store.Tx) error {
		_, err := tx.ChangeEmail(ctx, u.ID, "ada@example.com", " ")
		return err
	})
	var changed store.User
	mustTx(t, s, func(tx *store.Tx) (err error) {
		changed, err = tx.ChangeEmail(ctx, u.ID, "ADA@example.com", " Ada.King@Example.com ")
		return err
	})
	if changed.ID != u.ID || changed.Email != "ada.king@example.com" || !changed.EmailVerified {
		t.Errorf("changed = %+v", changed)
	}
	if got, err := s.User(ctx, u.ID); err != nil || got.Email != "ada.king@example.com" || !got.EmailVerified {
		t.Errorf("stored = %+v, %v", got, err)
	}
}
