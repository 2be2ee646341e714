package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runTwoFactor covers TOTP enrolments, backup codes and second-step tokens.
func runTwoFactor(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Enrolment", func(t *testing.T) { testTwoFactorEnrolment(t, open) })
	t.Run("StepsAndCodesOnce", func(t *testing.T) { testTwoFactorOnce(t, open) })
	t.Run("Tokens", func(t *testing.T) { testTwoFactorTokens(t, open) })
}

func testTwoFactorEnrolment(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	if _, err := s.TwoFactorByUser(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before enrolment: %v, want ErrNotFound", err)
	}
	wantErr(t, s, store.ErrNotFound, "unknown user", func(tx *store.Tx) error {
		return tx.PutTwoFactor(ctx, "usr_none", "v1.sealed", nil)
	})
	wantErr(t, s, store.ErrInvalid, "empty secret", func(tx *store.Tx) error { return tx.PutTwoFactor(ctx, u.ID, "", nil) })
	mustTx(t, s, func(tx *store.Tx) error { return tx.PutTwoFactor(ctx, u.ID, "v1.first", []string{"h1", "h2"}) })
	tf, err := s.TwoFactorByUser(ctx, u.ID)
	if err != nil || tf.Secret != "v1.first" || tf.Verified || tf.LastStep != 0 || tf.ID[:4] != "tfa_" {
		t.Fatalf("enrolment = %+v, %v", tf, err)
	}
	mustTx(t, s, func(tx *store.Tx) error { return tx.VerifyTwoFactor(ctx, u.ID) })
	// A new secret keeps the factor on, and replaces the backup codes.
	mustTx(t, s, func(tx *store.Tx) error { return tx.PutTwoFactor(ctx, u.ID, "v1.second", []string{"h3"}) })
	if tf, err = s.TwoFactorByUser(ctx, u.ID); err != nil || tf.Secret != "v1.second" || !tf.Verified {
		t.Fatalf("re-enrolment = %+v, %v", tf, err)
	}
	if n, err := s.UnusedBackupCodes(ctx, u.ID); err != nil || n != 1 {
		t.Fatalf("unused backup codes = %d, %v; want 1", n, err)
	}
	var had bool
	mustTx(t, s, func(tx *store.Tx) (err error) { had, err = tx.DeleteTwoFactor(ctx, u.ID); return err })
	if !had {
		t.Fatal("DeleteTwoFactor: had = false")
	}
	if n, err := s.UnusedBackupCodes(ctx, u.ID); err != nil || n != 0 {
		t.Fatalf("backup codes after delete = %d, %v", n, err)
	}
	mustTx(t, s, func(tx *store.Tx) (err error) { had, err = tx.DeleteTwoFactor(ctx, u.ID); return err })
	if had {
		t.Fatal("second DeleteTwoFactor: had = true")
	}
}

func testTwoFactorOnce(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	mustTx(t, s, func(tx *store.Tx) error { return tx.PutTwoFactor(ctx, u.ID, "v1.secret", []string{"h1", "h2", "h3"}) })
	mustTx(t, s, func(tx *store.Tx) error { return tx.UseTOTPStep(ctx, u.ID, 100) })
	for _, step := range []int64{100, 99} {
		wantErr(t, s, store.ErrNotFound, "a step used or older", func(tx *store.Tx) error { return tx.UseTOTPStep(ctx, u.ID, step) })
	}
	for round, step := range []int64{101, 102, 103} {
		oneWinsOneRefused(t, s, round, "uses of one step", store.ErrNotFound, func(tx *store.Tx, _ int) error {
			return tx.UseTOTPStep(ctx, u.ID, step)
		})
	}
	for round, h := range []string{"h1", "h2"} {
		oneWinsOneRefused(t, s, round, "uses of one backup code", store.ErrNotFound, func(tx *store.Tx, _ int) error {
			return tx.UseBackupCode(ctx, u.ID, h)
		})
	}
	wantErr(t, s, store.ErrNotFound, "an unknown code", func(tx *store.Tx) error { return tx.UseBackupCode(ctx, u.ID, "nope") })
	if n, err := s.UnusedBackupCodes(ctx, u.ID); err != nil || n != 1 {
		t.Fatalf("unused backup codes = %d, %v; want 1", n, err)
	}
}

func testTwoFactorTokens(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	soon := s.Now().Add(10 * time.Minute)
	wantErr(t, s, store.ErrInvalid, "unknown purpose", func(tx *store.Tx) error {
		return tx.CreateTwoFactorToken(ctx, "t0", store.TwoFactorToken{Purpose: "magic", UserID: u.ID, ExpiresAt: soon})
	})
	wantErr(t, s, store.ErrNotFound, "unknown user", func(tx *store.Tx) error {
		return tx.CreateTwoFactorToken(ctx, "t0", store.TwoFactorToken{Purpose: store.TwoFactorSignIn, UserID: "usr_none", ExpiresAt: soon})
	})
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreateTwoFactorToken(ctx, "t1", store.TwoFactorToken{Purpose: store.TwoFactorSignIn, UserID: u.ID, RememberMe: false, ExpiresAt: soon})
	})
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreateTwoFactorToken(ctx, "t2", store.TwoFactorToken{Purpose: store.TwoFactorSignIn, UserID: u.ID, ExpiresAt: s.Now().Add(-time.Second)})
	})
	got, err := s.TwoFactorTokenByHash(ctx, store.TwoFactorSignIn, "t1")
	if err != nil || got.UserID != u.ID || got.RememberMe || got.Attempts != 0 {
		t.Fatalf("token = %+v, %v", got, err)
	}
	if _, err := s.TwoFactorTokenByHash(ctx, store.TwoFactorTrustDevice, "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("token under another purpose: %v", err)
	}
	if _, err := s.TwoFactorTokenByHash(ctx, store.TwoFactorSignIn, "t2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired token: %v", err)
	}
	for want := 1; want <= 2; want++ {
		var n int
		mustTx(t, s, func(tx *store.Tx) (err error) { n, err = tx.CountTwoFactorAttempt(ctx, "t1"); return err })
		if n != want {
			t.Fatalf("attempts = %d, want %d", n, want)
		}
	}
	oneWinsOneRefused(t, s, 0, "uses of one token", store.ErrNotFound, func(tx *store.Tx, _ int) error {
		return tx.DeleteTwoFactorToken(ctx, store.TwoFactorSignIn, "t1")
	})
}
