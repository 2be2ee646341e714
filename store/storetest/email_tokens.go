package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runEmailTokens covers the single-use tokens of mailed links.
func runEmailTokens(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("CreateAndUse", func(t *testing.T) { testEmailTokenCreateAndUse(t, open) })
	t.Run("UseOnce", func(t *testing.T) { testEmailTokenUseOnce(t, open) })
	t.Run("UseUserTokens", func(t *testing.T) { testEmailTokenUseUserTokens(t, open) })
}

func createEmailToken(t *testing.T, s *store.Store, hash string, tok store.EmailToken) store.EmailToken {
	t.Helper()
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateEmailToken(testContext(t), hash, &tok) })
	return tok
}

func testEmailTokenCreateAndUse(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Microsecond)
	created := createEmailToken(t, s, "hash-1", store.EmailToken{Purpose: store.EmailTokenVerifyEmail, UserID: u.ID,
		Email: "Ada@Example.com", Credential: "cred", ExpiresAt: expires})
	if len(created.ID) != 30 || created.ID[:4] != "etk_" || created.CreatedAt.IsZero() {
		t.Errorf("created = %+v", created)
	}
	wantErr(t, s, store.ErrInvalid, "unknown purpose", func(tx *store.Tx) error {
		return tx.CreateEmailToken(ctx, "hash-x", &store.EmailToken{Purpose: "magic-link", UserID: u.ID, Email: "a@b", ExpiresAt: expires})
	})
	wantErr(t, s, store.ErrNotFound, "unknown user", func(tx *store.Tx) error {
		return tx.CreateEmailToken(ctx, "hash-x", &store.EmailToken{Purpose: store.EmailTokenResetPassword, UserID: "usr_none", Email: "a@b", ExpiresAt: expires})
	})
	wantErr(t, s, store.ErrConflict, "a second token under one hash", func(tx *store.Tx) error {
		return tx.CreateEmailToken(ctx, "hash-1", &store.EmailToken{Purpose: store.EmailTokenResetPassword, UserID: u.ID, Email: "a@b", ExpiresAt: expires})
	})

	// Read without using: by hash and purpose only.
	got, err := s.EmailTokenByHash(ctx, store.EmailTokenVerifyEmail, "hash-1")
	if err != nil || got.ID != created.ID || got.Email != "ada@example.com" || got.Credential != "cred" ||
		!got.ExpiresAt.Equal(expires) || got.UsedAt != nil || got.UserID != u.ID {
		t.Fatalf("by hash = %+v, %v", got, err)
	}
	if _, err := s.EmailTokenByHash(ctx, store.EmailTokenResetPassword, "hash-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another purpose: %v, want ErrNotFound", err)
	}
	// Use: once; the use time is returned and kept.
	now := time.Now().UTC().Truncate(time.Microsecond)
	var used store.EmailToken
	mustTx(t, s, func(tx *store.Tx) (err error) {
		used, err = tx.UseEmailToken(ctx, store.EmailTokenVerifyEmail, "hash-1", now)
		return err
	})
	if used.ID != created.ID || used.UsedAt == nil || !used.UsedAt.Equal(now) {
		t.Errorf("used = %+v", used)
	}
	wantErr(t, s, store.ErrNotFound, "second use", func(tx *store.Tx) error {
		_, err := tx.UseEmailToken(ctx, store.EmailTokenVerifyEmail, "hash-1", now)
		return err
	})
	if got, _ := s.EmailTokenByHash(ctx, store.EmailTokenVerifyEmail, "hash-1"); got.UsedAt == nil || !got.UsedAt.Equal(now) {
		t.Errorf("after use = %+v", got)
	}
	// The password hash, read in a transaction.
	mustTx(t, s, func(tx *store.Tx) error { return tx.SetPassword(ctx, u.ID, "$argon2id$h") })
	mustTx(t, s, func(tx *store.Tx) error {
		if h, err := tx.PasswordHashTx(ctx, u.ID); err != nil || h != "$argon2id$h" {
			t.Errorf("PasswordHashTx = %q, %v", h, err)
		}
		if _, err := tx.PasswordHashTx(ctx, "usr_none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("PasswordHashTx of no user: %v", err)
		}
		return nil
	})
	// A decoy belongs to nobody.
	decoy := createEmailToken(t, s, "hash-decoy", store.EmailToken{Purpose: store.EmailTokenResetPassword, Email: "nobody@example.com", ExpiresAt: expires})
	if got, err := s.EmailTokenByHash(ctx, store.EmailTokenResetPassword, "hash-decoy"); err != nil || got.ID != decoy.ID || got.UserID != "" {
		t.Errorf("decoy = %+v, %v", got, err)
	}
	// Deleting the user deletes its tokens.
	mustTx(t, s, func(tx *store.Tx) error { return tx.DeleteUser(ctx, u.ID) })
	if _, err := s.EmailTokenByHash(ctx, store.EmailTokenVerifyEmail, "hash-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("token of a deleted user: %v", err)
	}
}

// Ten concurrent uses of one token: exactly one succeeds.
func testEmailTokenUseOnce(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	createEmailToken(t, s, "hash-race", store.EmailToken{Purpose: store.EmailTokenResetPassword, UserID: u.ID,
		Email: u.Email, ExpiresAt: time.Now().Add(time.Hour)})
	n := concurrently(10, func() error {
		return s.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.UseEmailToken(ctx, store.EmailTokenResetPassword, "hash-race", time.Now())
			return err
		})
	})
	if n != 1 {
		t.Errorf("%d concurrent uses succeeded, want 1", n)
	}
}

// UseUserEmailTokens uses the unused tokens of one user and purpose, no others; creating a token
// sweeps expired ones.
func testEmailTokenUseUserTokens(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u, other := newUser(t, s, "Ada", "ada@example.com"), newUser(t, s, "Grace", "grace@example.com")
	later := time.Now().Add(time.Hour)
	for _, c := range []struct {
		hash, purpose, user string
	}{{"r1", store.EmailTokenResetPassword, u.ID}, {"r2", store.EmailTokenResetPassword, u.ID},
		{"v1", store.EmailTokenVerifyEmail, u.ID}, {"o1", store.EmailTokenResetPassword, other.ID}} {
		createEmailToken(t, s, c.hash, store.EmailToken{Purpose: c.purpose, UserID: c.user, Email: "x@example.com", ExpiresAt: later})
	}
	var n int64
	mustTx(t, s, func(tx *store.Tx) (err error) {
		n, err = tx.UseUserEmailTokens(ctx, u.ID, store.EmailTokenResetPassword, time.Now())
		return err
	})
	if n != 2 {
		t.Errorf("used %d, want 2", n)
	}
	for hash, purpose := range map[string]string{"v1": store.EmailTokenVerifyEmail, "o1": store.EmailTokenResetPassword} {
		if got, _ := s.EmailTokenByHash(ctx, purpose, hash); got.UsedAt != nil {
			t.Errorf("%s was used too", hash)
		}
	}
	// An expired token is swept by the next creation.
	createEmailToken(t, s, "old", store.EmailToken{Purpose: store.EmailTokenVerifyEmail, UserID: u.ID, Email: "x@example.com",
		ExpiresAt: time.Now().Add(-time.Minute)})
	createEmailToken(t, s, "new", store.EmailToken{Purpose: store.EmailTokenVerifyEmail, UserID: u.ID, Email: "x@example.com", ExpiresAt: later})
	if _, err := s.EmailTokenByHash(ctx, store.EmailTokenVerifyEmail, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired token not swept: %v", err)
	}
}
