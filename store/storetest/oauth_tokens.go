package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

func runOAuthTokens(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("RoundTrip", func(t *testing.T) { testOAuthTokenRoundTrip(t, open) })
	t.Run("Invalid", func(t *testing.T) { testOAuthTokenInvalid(t, open) })
	t.Run("Deactivate", func(t *testing.T) { testOAuthTokenDeactivate(t, open) })
	t.Run("ByRequest", func(t *testing.T) { testOAuthTokenByRequest(t, open) })
	t.Run("BeginCommitRollback", func(t *testing.T) { testOAuthTokenBegin(t, open) })
	t.Run("ConcurrentDeactivate", func(t *testing.T) { testOAuthTokenConcurrentDeactivate(t, open) })
	t.Run("DeleteExpired", func(t *testing.T) { testOAuthTokenDeleteExpired(t, open) })
	t.Run("RevokeUserGrants", func(t *testing.T) { testOAuthRevokeUserGrants(t, open) })
	t.Run("ClientVersion", func(t *testing.T) { testOAuthTokenClientVersion(t, open) })
}

func oauthToken(kind, sig, requestID string) store.OAuthToken {
	return store.OAuthToken{
		Kind: kind, Signature: sig, RequestID: requestID, ClientID: "cli_1", Subject: "usr_1", Active: true,
		Scopes: `["openid","offline_access"]`, GrantedScopes: `["openid"]`, RequestedAudience: `[]`,
		GrantedAudience: `["cli_1"]`, Form: "grant_type=authorization_code", Session: []byte(`{"a":1}`),
		RequestedAt: time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC),
		ExpiresAt:   time.Date(2030, 1, 2, 4, 4, 5, 0, time.UTC),
	}
}

func createOAuthTokens(t *testing.T, s *store.Store, tokens ...store.OAuthToken) {
	t.Helper()
	err := s.InTx(testContext(t), func(tx *store.Tx) error {
		for _, tok := range tokens {
			if err := tx.CreateOAuthToken(testContext(t), tok); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("CreateOAuthToken: %v", err)
	}
}

func testOAuthTokenRoundTrip(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	in := oauthToken(store.OAuthRefresh, "sig-r", "req-1")
	in.AccessSignature = "sig-a"
	createOAuthTokens(t, s, in)
	got, err := s.OAuthToken(ctx, store.OAuthRefresh, "sig-r")
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.RequestedAt = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	if got.Kind != "refresh" || got.Signature != "sig-r" || got.RequestID != "req-1" || got.ClientID != "cli_1" ||
		got.Subject != "usr_1" || !got.Active || got.Scopes != `["openid","offline_access"]` ||
		got.GrantedScopes != `["openid"]` || got.RequestedAudience != `[]` || got.GrantedAudience != `["cli_1"]` ||
		got.Form != "grant_type=authorization_code" || string(got.Session) != `{"a":1}` ||
		got.AccessSignature != "sig-a" || !got.RequestedAt.Equal(want.RequestedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("OAuthToken = %+v, want %+v", got, want)
	}
	// The same signature under another kind is another row (a code and its PKCE request share one).
	if _, err := s.OAuthToken(ctx, store.OAuthAccess, "sig-r"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other kind: %v, want ErrNotFound", err)
	}
	createOAuthTokens(t, s, oauthToken(store.OAuthAccess, "sig-r", "req-1"))
	err = s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOAuthToken(ctx, in) })
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate: %v, want ErrConflict", err)
	}
	// Read inside a transaction too.
	err = s.InTx(ctx, func(tx *store.Tx) error {
		got, err := tx.OAuthToken(ctx, store.OAuthAccess, "sig-r")
		if err == nil && got.Kind != store.OAuthAccess {
			t.Errorf("tx read kind %q", got.Kind)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteOAuthToken(ctx, store.OAuthRefresh, "sig-r") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OAuthToken(ctx, store.OAuthRefresh, "sig-r"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	err = s.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteOAuthToken(ctx, store.OAuthRefresh, "sig-r") })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

func testOAuthTokenInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	for name, mutate := range map[string]func(*store.OAuthToken){
		"kind":      func(o *store.OAuthToken) { o.Kind = "implicit" },
		"signature": func(o *store.OAuthToken) { o.Signature = "" },
		"request":   func(o *store.OAuthToken) { o.RequestID = "" },
		"client":    func(o *store.OAuthToken) { o.ClientID = "" },
	} {
		tok := oauthToken(store.OAuthCode, "sig", "req")
		mutate(&tok)
		err := s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOAuthToken(ctx, tok) })
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func testOAuthTokenDeactivate(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	createOAuthTokens(t, s, oauthToken(store.OAuthCode, "code-1", "req-1"))
	for i, want := range []bool{true, false} {
		var changed bool
		err := s.InTx(ctx, func(tx *store.Tx) (err error) {
			changed, err = tx.DeactivateOAuthToken(ctx, store.OAuthCode, "code-1")
			return err
		})
		if err != nil || changed != want {
			t.Errorf("deactivate #%d = %v, %v; want %v, nil", i+1, changed, err, want)
		}
	}
	got, err := s.OAuthToken(ctx, store.OAuthCode, "code-1")
	if err != nil || got.Active {
		t.Errorf("used code: active %v, %v; want kept and inactive", got.Active, err)
	}
	err = s.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.DeactivateOAuthToken(ctx, store.OAuthCode, "nope")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing: %v, want ErrNotFound", err)
	}
}

func testOAuthTokenByRequest(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	createOAuthTokens(t, s,
		oauthToken(store.OAuthRefresh, "r1", "req-1"), oauthToken(store.OAuthRefresh, "r2", "req-1"),
		oauthToken(store.OAuthAccess, "a1", "req-1"), oauthToken(store.OAuthAccess, "a2", "req-1"),
		oauthToken(store.OAuthRefresh, "r3", "req-2"), oauthToken(store.OAuthAccess, "a3", "req-2"))
	var deactivated, deleted int64
	err := s.InTx(ctx, func(tx *store.Tx) (err error) {
		if deactivated, err = tx.DeactivateOAuthTokensByRequest(ctx, store.OAuthRefresh, "req-1"); err != nil {
			return err
		}
		deleted, err = tx.DeleteOAuthTokensByRequest(ctx, store.OAuthAccess, "req-1")
		return err
	})
	if err != nil || deactivated != 2 || deleted != 2 {
		t.Fatalf("by request: %d deactivated, %d deleted, %v; want 2, 2", deactivated, deleted, err)
	}
	for sig, active := range map[string]bool{"r1": false, "r2": false, "r3": true} {
		if got, err := s.OAuthToken(ctx, store.OAuthRefresh, sig); err != nil || got.Active != active {
			t.Errorf("%s: active %v, %v; want %v", sig, got.Active, err, active)
		}
	}
	for sig, exists := range map[string]bool{"a1": false, "a2": false, "a3": true} {
		if _, err := s.OAuthToken(ctx, store.OAuthAccess, sig); (err == nil) != exists {
			t.Errorf("%s: %v; want exists %v", sig, err, exists)
		}
	}
	err = s.InTx(ctx, func(tx *store.Tx) (err error) {
		deactivated, err = tx.DeactivateOAuthTokensByRequest(ctx, store.OAuthRefresh, "none")
		return err
	})
	if err != nil || deactivated != 0 {
		t.Errorf("no match: %d, %v; want 0, nil", deactivated, err)
	}
}

func testOAuthTokenBegin(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.CreateOAuthToken(ctx, oauthToken(store.OAuthAccess, "rolled-back", "req")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Errorf("second rollback: %v, want nil", err)
	}
	if _, err := s.OAuthToken(ctx, store.OAuthAccess, "rolled-back"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("rolled back row: %v, want ErrNotFound", err)
	}
	tx, err = s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.CreateOAuthToken(ctx, oauthToken(store.OAuthAccess, "committed", "req")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OAuthToken(ctx, store.OAuthAccess, "committed"); err != nil {
		t.Errorf("committed row: %v", err)
	}
}

// testOAuthTokenConcurrentDeactivate: of 20 transactions deactivating one code at once,
// exactly one reports the change (single-use codes, one winner among concurrent redemptions).
func testOAuthTokenConcurrentDeactivate(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	createOAuthTokens(t, s, oauthToken(store.OAuthCode, "code", "req"))
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := s.Begin(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			changed, err := tx.DeactivateOAuthToken(ctx, store.OAuthCode, "code")
			if err != nil {
				_ = tx.Rollback()
				t.Error(err)
				return
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
				return
			}
			if changed {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d winners, want 1", n)
	}
}

func testOAuthTokenDeleteExpired(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	var tokens []store.OAuthToken
	for i, sig := range []string{"e1", "e2", "e3", "live"} {
		tok := oauthToken(store.OAuthAccess, sig, "req")
		tok.ExpiresAt = t0.Add(time.Duration(i) * time.Minute)
		tokens = append(tokens, tok)
	}
	createOAuthTokens(t, s, tokens...)
	purge := func(limit int) int64 {
		var n int64
		err := s.InTx(ctx, func(tx *store.Tx) (err error) {
			n, err = tx.DeleteExpiredOAuthTokens(ctx, t0.Add(3*time.Minute), limit)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := purge(2); n != 2 {
		t.Errorf("first batch deleted %d, want 2", n)
	}
	if _, err := s.OAuthToken(ctx, store.OAuthAccess, "e3"); err != nil {
		t.Errorf("the batch should take the oldest first: e3 %v", err)
	}
	if n := purge(2); n != 1 {
		t.Errorf("second batch deleted %d, want 1", n)
	}
	if _, err := s.OAuthToken(ctx, store.OAuthAccess, "live"); err != nil {
		t.Errorf("unexpired row: %v", err)
	}
	err := s.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.DeleteExpiredOAuthTokens(ctx, t0, 0)
		return err
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("limit 0: %v, want ErrInvalid", err)
	}
}
