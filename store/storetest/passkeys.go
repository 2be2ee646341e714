package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runPasskeys covers passkeys (credentials, counters, ownership) and their ceremonies.
func runPasskeys(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Credentials", func(t *testing.T) { testPasskeyCredentials(t, open) })
	t.Run("Counters", func(t *testing.T) { testPasskeyCounters(t, open) })
	t.Run("Challenges", func(t *testing.T) { testPasskeyChallenges(t, open) })
	t.Run("CountsAsSecondFactor", func(t *testing.T) { testPasskeySecondFactor(t, open) })
}

func newPasskey(t *testing.T, s *store.Store, userID, credID string) store.Passkey {
	t.Helper()
	var pk store.Passkey
	name := "Laptop"
	mustTx(t, s, func(tx *store.Tx) (err error) {
		pk, err = tx.CreatePasskey(testContext(t), store.Passkey{UserID: userID, Name: &name, CredentialID: credID,
			PublicKey: "pQECAyYgAQ==", DeviceType: "multiDevice", BackupEligible: true, BackedUp: true,
			Transports: "internal,hybrid", AAGUID: "00000000-0000-0000-0000-000000000000"})
		return err
	})
	return pk
}

func testPasskeyCredentials(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	v := newUser(t, s, "Bob", "bob@example.com")
	wantErr(t, s, store.ErrInvalid, "no credential id", func(tx *store.Tx) error {
		_, err := tx.CreatePasskey(ctx, store.Passkey{UserID: u.ID, PublicKey: "k", DeviceType: "singleDevice"})
		return err
	})
	wantErr(t, s, store.ErrInvalid, "unknown device type", func(tx *store.Tx) error {
		_, err := tx.CreatePasskey(ctx, store.Passkey{UserID: u.ID, CredentialID: "c", PublicKey: "k", DeviceType: "other"})
		return err
	})
	wantErr(t, s, store.ErrNotFound, "unknown user", func(tx *store.Tx) error {
		_, err := tx.CreatePasskey(ctx, store.Passkey{UserID: "usr_none", CredentialID: "c", PublicKey: "k", DeviceType: "singleDevice"})
		return err
	})
	pk := newPasskey(t, s, u.ID, "cred-1")
	if pk.ID[:3] != "pk_" || pk.CreatedAt.IsZero() {
		t.Fatalf("created = %+v", pk)
	}
	wantErr(t, s, store.ErrConflict, "credential registered already (to another user)", func(tx *store.Tx) error {
		_, err := tx.CreatePasskey(ctx, store.Passkey{UserID: v.ID, CredentialID: "cred-1", PublicKey: "k", DeviceType: "singleDevice"})
		return err
	})
	got, err := s.PasskeyByCredentialID(ctx, "cred-1")
	if err != nil || got.ID != pk.ID || got.UserID != u.ID || *got.Name != "Laptop" || got.PublicKey != "pQECAyYgAQ==" ||
		got.DeviceType != "multiDevice" || !got.BackupEligible || !got.BackedUp || got.Transports != "internal,hybrid" ||
		got.AAGUID != "00000000-0000-0000-0000-000000000000" || got.Counter != 0 {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if _, err := s.PasskeyByCredentialID(ctx, "cred-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown credential: %v, want ErrNotFound", err)
	}
	// Another user's passkey is not found for renaming or removal, and stays as it was.
	wantErr(t, s, store.ErrNotFound, "rename another user's passkey", func(tx *store.Tx) error {
		_, err := tx.RenamePasskey(ctx, v.ID, pk.ID, "Mine")
		return err
	})
	wantErr(t, s, store.ErrNotFound, "delete another user's passkey", func(tx *store.Tx) error {
		return tx.DeletePasskey(ctx, v.ID, pk.ID)
	})
	if list, err := s.PasskeysOf(ctx, u.ID); err != nil || len(list) != 1 || *list[0].Name != "Laptop" {
		t.Fatalf("after another user's attempts: %+v, %v", list, err)
	}
	mustTx(t, s, func(tx *store.Tx) error {
		r, err := tx.RenamePasskey(ctx, u.ID, pk.ID, "Work")
		if err == nil && (r.Name == nil || *r.Name != "Work") {
			t.Errorf("renamed = %+v", r)
		}
		return err
	})
	mustTx(t, s, func(tx *store.Tx) error { return tx.DeletePasskey(ctx, u.ID, pk.ID) })
	if list, err := s.PasskeysOf(ctx, u.ID); err != nil || len(list) != 0 {
		t.Fatalf("after delete: %+v, %v", list, err)
	}
}

func testPasskeyCounters(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	pk := newPasskey(t, s, u.ID, "cred-1")
	mustTx(t, s, func(tx *store.Tx) error { return tx.RecordPasskeyUse(ctx, pk.ID, 5, false) })
	got, _ := s.PasskeyByCredentialID(ctx, "cred-1")
	if got.Counter != 5 || got.BackedUp {
		t.Fatalf("after use 5: counter %d backedUp %v", got.Counter, got.BackedUp)
	}
	for _, c := range []uint32{5, 4, 0} {
		wantErr(t, s, store.ErrConflict, "counter that does not advance", func(tx *store.Tx) error {
			return tx.RecordPasskeyUse(ctx, pk.ID, c, true)
		})
	}
	if got, _ = s.PasskeyByCredentialID(ctx, "cred-1"); got.Counter != 5 || got.BackedUp {
		t.Fatalf("after refused uses: counter %d backedUp %v", got.Counter, got.BackedUp)
	}
	mustTx(t, s, func(tx *store.Tx) error { return tx.RecordPasskeyUse(ctx, pk.ID, 1<<32-1, true) })
	if got, _ = s.PasskeyByCredentialID(ctx, "cred-1"); got.Counter != 1<<32-1 || !got.BackedUp {
		t.Fatalf("after use 2^32-1: counter %d backedUp %v", got.Counter, got.BackedUp)
	}
	// An authenticator without a counter (always 0) may be used again.
	zero := newPasskey(t, s, u.ID, "cred-0")
	mustTx(t, s, func(tx *store.Tx) error { return tx.RecordPasskeyUse(ctx, zero.ID, 0, true) })
	mustTx(t, s, func(tx *store.Tx) error { return tx.RecordPasskeyUse(ctx, zero.ID, 0, true) })
	wantErr(t, s, store.ErrNotFound, "unknown passkey", func(tx *store.Tx) error { return tx.RecordPasskeyUse(ctx, "pk_none", 9, true) })
}

func testPasskeyChallenges(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	wantErr(t, s, store.ErrInvalid, "unknown purpose", func(tx *store.Tx) error {
		return tx.CreatePasskeyChallenge(ctx, "h0", store.PasskeyChallenge{Purpose: "other", Session: "{}", ExpiresAt: s.Now().Add(time.Minute)})
	})
	wantErr(t, s, store.ErrNotFound, "unknown user", func(tx *store.Tx) error {
		return tx.CreatePasskeyChallenge(ctx, "h0", store.PasskeyChallenge{Purpose: store.PasskeyRegister, UserID: "usr_none", Session: "{}", ExpiresAt: s.Now().Add(time.Minute)})
	})
	exp := s.Now().Add(5 * time.Minute).Truncate(time.Microsecond)
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreatePasskeyChallenge(ctx, "h1", store.PasskeyChallenge{Purpose: store.PasskeyRegister, UserID: u.ID, Session: `{"challenge":"abc"}`, ExpiresAt: exp})
	})
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreatePasskeyChallenge(ctx, "h2", store.PasskeyChallenge{Purpose: store.PasskeyAuthenticate, Session: `{"challenge":"def"}`, ExpiresAt: exp})
	})
	mustTx(t, s, func(tx *store.Tx) error {
		return tx.CreatePasskeyChallenge(ctx, "h3", store.PasskeyChallenge{Purpose: store.PasskeyAuthenticate, Session: `{}`, ExpiresAt: s.Now().Add(-time.Second)})
	})
	// Wrong purpose: not found, and not taken.
	wantErr(t, s, store.ErrNotFound, "other purpose", func(tx *store.Tx) error {
		_, err := tx.TakePasskeyChallenge(ctx, store.PasskeyAuthenticate, "h1")
		return err
	})
	mustTx(t, s, func(tx *store.Tx) error {
		c, err := tx.TakePasskeyChallenge(ctx, store.PasskeyRegister, "h1")
		if err == nil && (c.UserID != u.ID || c.Session != `{"challenge":"abc"}` || !c.ExpiresAt.Equal(exp)) {
			t.Errorf("taken = %+v", c)
		}
		return err
	})
	mustTx(t, s, func(tx *store.Tx) error {
		c, err := tx.TakePasskeyChallenge(ctx, store.PasskeyAuthenticate, "h2")
		if err == nil && c.UserID != "" {
			t.Errorf("sign-in ceremony user = %q", c.UserID)
		}
		return err
	})
	for _, h := range []string{"h1", "h2"} {
		wantErr(t, s, store.ErrNotFound, "taken twice", func(tx *store.Tx) error {
			_, err := tx.TakePasskeyChallenge(ctx, map[string]string{"h1": store.PasskeyRegister, "h2": store.PasskeyAuthenticate}[h], h)
			return err
		})
	}
	wantErr(t, s, store.ErrNotFound, "expired", func(tx *store.Tx) error {
		_, err := tx.TakePasskeyChallenge(ctx, store.PasskeyAuthenticate, "h3")
		return err
	})
}

func testPasskeySecondFactor(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Ada", "ada@example.com")
	o := newOrganization(t, s, "acme", u.ID)
	scope, err := s.ResolveScope(ctx, store.ScopeRef{OrganizationID: o.ID}, u.ID)
	if err != nil || scope.MemberTwoFactor {
		t.Fatalf("without a factor: %+v, %v", scope, err)
	}
	newPasskey(t, s, u.ID, "cred-1")
	if scope, err = s.ResolveScope(ctx, store.ScopeRef{OrganizationID: o.ID}, u.ID); err != nil || !scope.MemberTwoFactor {
		t.Fatalf("with a passkey: %+v, %v", scope, err)
	}
	// Another user's passkey is not the member's factor.
	v := newUser(t, s, "Bob", "bob@example.com")
	addMember(t, s, o.ID, v.ID, "member")
	if scope, err = s.ResolveScope(ctx, store.ScopeRef{OrganizationID: o.ID}, v.ID); err != nil || scope.MemberTwoFactor {
		t.Fatalf("member without a passkey: %+v, %v", scope, err)
	}
}
