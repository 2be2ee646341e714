package storetest

import (
	"errors"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runIdentity covers users and their credential accounts (here) and sessions
// (sessions.go).
func runIdentity(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("CreateUser", func(t *testing.T) { testCreateUser(t, open) })
	t.Run("CreateUserGivenFields", func(t *testing.T) { testCreateUserGivenFields(t, open) })
	t.Run("DuplicateEmail", func(t *testing.T) { testDuplicateEmail(t, open) })
	t.Run("CreateUserInvalid", func(t *testing.T) { testCreateUserInvalid(t, open) })
	t.Run("UserNotFound", func(t *testing.T) { testUserNotFound(t, open) })
	t.Run("UpdateUser", func(t *testing.T) { testUpdateUser(t, open) })
	t.Run("Passwords", func(t *testing.T) { testPasswords(t, open) })
	t.Run("DeleteUser", func(t *testing.T) { testDeleteUser(t, open) })
	t.Run("SessionRoundTrip", func(t *testing.T) { testSessionRoundTrip(t, open) })
	t.Run("CreateSessionInvalid", func(t *testing.T) { testCreateSessionInvalid(t, open) })
	t.Run("SessionExpired", func(t *testing.T) { testSessionExpired(t, open) })
	t.Run("ListSessions", func(t *testing.T) { testListSessions(t, open) })
	t.Run("ExtendSession", func(t *testing.T) { testExtendSession(t, open) })
	t.Run("DeleteSession", func(t *testing.T) { testDeleteSession(t, open) })
	t.Run("DeleteSessionByUser", func(t *testing.T) { testDeleteSessionByUser(t, open) })
	t.Run("DeleteOtherSessions", func(t *testing.T) { testDeleteOtherSessions(t, open) })
	t.Run("ActiveOrganization", func(t *testing.T) { testActiveOrganization(t, open) })
	t.Run("ClearUserActiveOrganization", func(t *testing.T) { testClearUserActiveOrganization(t, open) })
}

// inTx runs fn in a transaction and returns its error.
func inTx(t *testing.T, s *store.Store, fn func(tx *store.Tx) error) error {
	t.Helper()
	return s.InTx(testContext(t), fn)
}

// mustCreateUser creates a user with email and passwordHash ("" for none).
func mustCreateUser(t *testing.T, s *store.Store, email, passwordHash string) store.User {
	t.Helper()
	u := store.User{Name: "User " + email, Email: email}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, passwordHash) }); err != nil {
		t.Fatalf("CreateUser(%s): %v", email, err)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

func testCreateUser(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	before := s.Now()
	u := store.User{Name: "Ada Lovelace", Email: "  Ada@Example.COM "}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, "$argon2id$hash") }); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	after := s.Now()

	if !regexp.MustCompile(`^usr_[0-9a-hjkmnp-tv-z]{26}$`).MatchString(u.ID) {
		t.Errorf("ID = %q, want usr_<26 base32>", u.ID)
	}
	if u.Email != "ada@example.com" {
		t.Errorf("Email = %q, want it normalised to ada@example.com", u.Email)
	}
	if u.CreatedAt.Before(before) || u.CreatedAt.After(after) || u.CreatedAt.Location() != time.UTC || !u.UpdatedAt.Equal(u.CreatedAt) {
		t.Errorf("CreatedAt %v, UpdatedAt %v; want equal, UTC, within [%v, %v]", u.CreatedAt, u.UpdatedAt, before, after)
	}

	got, err := s.User(testContext(t), u.ID)
	if err != nil || !reflect.DeepEqual(got, u) {
		t.Errorf("User(%s) = %#v, %v; want %#v", u.ID, got, err, u)
	}
	for _, email := range []string{"ada@example.com", "ADA@EXAMPLE.com", " ada@example.com\t"} {
		got, hash, err := s.UserByEmail(testContext(t), email)
		if err != nil || !reflect.DeepEqual(got, u) || hash != "$argon2id$hash" {
			t.Errorf("UserByEmail(%q) = %#v, %q, %v; want %#v with its hash", email, got, hash, err, u)
		}
	}
	if hash, err := s.PasswordHash(testContext(t), u.ID); err != nil || hash != "$argon2id$hash" {
		t.Errorf("PasswordHash = %q, %v", hash, err)
	}
}

func testCreateUserGivenFields(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CET", 3600))
	u := store.User{
		ID:            store.NewID("usr"),
		Name:          "Grace",
		Email:         "grace@example.com",
		EmailVerified: true,
		Image:         ptr("https://example.com/grace.png"),
		CreatedAt:     at,
		UpdatedAt:     at.Add(time.Hour),
	}
	want := u
	want.CreatedAt = at.UTC().Truncate(time.Microsecond)
	want.UpdatedAt = at.Add(time.Hour).UTC().Truncate(time.Microsecond)
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, "") }); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("CreateUser left %#v, want %#v", u, want)
	}
	got, err := s.User(testContext(t), u.ID)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("User = %#v, %v; want %#v", got, err, want)
	}
	// No password: no credential account.
	if _, hash, err := s.UserByEmail(testContext(t), "grace@example.com"); err != nil || hash != "" {
		t.Errorf("UserByEmail hash = %q, %v; want \"\" (no credential account)", hash, err)
	}
	if hash, err := s.PasswordHash(testContext(t), u.ID); err != nil || hash != "" {
		t.Errorf("PasswordHash = %q, %v; want \"\", nil", hash, err)
	}
}

func testDuplicateEmail(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	first := mustCreateUser(t, s, "ada@example.com", "h1")
	for _, email := range []string{"ada@example.com", "ADA@example.com", " Ada@Example.Com "} {
		dup := store.User{Name: "Impostor", Email: email}
		err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &dup, "h2") })
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("CreateUser(%q) = %v, want ErrConflict", email, err)
		}
	}
	dupID := store.User{ID: first.ID, Name: "Same ID", Email: "other@example.com"}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &dupID, "h3") }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateUser(duplicate ID) = %v, want ErrConflict", err)
	}
	got, hash, err := s.UserByEmail(testContext(t), "ada@example.com")
	if err != nil || got.ID != first.ID || got.Name != first.Name || hash != "h1" {
		t.Errorf("after conflicts: %+v, %q, %v; want the first user unchanged", got, hash, err)
	}
	if _, _, err := s.UserByEmail(testContext(t), "other@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UserByEmail(other) = %v, want ErrNotFound (nothing written)", err)
	}
}

func testCreateUserInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	for _, email := range []string{"", "   "} {
		u := store.User{Name: "Nobody", Email: email}
		if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, "h") }); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateUser(email %q) = %v, want ErrInvalid", email, err)
		}
	}
}

func testUserNotFound(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	mustCreateUser(t, s, "ada@example.com", "h")
	if _, err := s.User(testContext(t), "usr_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("User(missing) = %v, want ErrNotFound", err)
	}
	if _, _, err := s.UserByEmail(testContext(t), "grace@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UserByEmail(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.PasswordHash(testContext(t), "usr_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PasswordHash(missing) = %v, want ErrNotFound", err)
	}
}

func testUpdateUser(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	past := s.Now().Add(-time.Hour)
	u := store.User{Name: "Ada", Email: "ada@example.com", CreatedAt: past}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, "h") }); err != nil {
		t.Fatal(err)
	}
	update := func(name *string, image **string) (store.User, error) {
		var got store.User
		err := inTx(t, s, func(tx *store.Tx) error {
			var err error
			got, err = tx.UpdateUser(testContext(t), u.ID, name, image)
			return err
		})
		return got, err
	}

	// Nothing to change: returns the user as is.
	got, err := update(nil, nil)
	if err != nil || !reflect.DeepEqual(got, u) {
		t.Errorf("UpdateUser(nil, nil) = %#v, %v; want %#v", got, err, u)
	}

	got, err = update(ptr("Ada Lovelace"), nil)
	if err != nil || got.Name != "Ada Lovelace" || got.Image != nil || got.Email != u.Email || !got.CreatedAt.Equal(past) {
		t.Errorf("UpdateUser(name) = %#v, %v", got, err)
	}
	if !got.UpdatedAt.After(past) {
		t.Errorf("UpdatedAt = %v, want after %v", got.UpdatedAt, past)
	}

	img := ptr("https://example.com/ada.png")
	got, err = update(nil, &img)
	if err != nil || got.Name != "Ada Lovelace" || got.Image == nil || *got.Image != *img {
		t.Errorf("UpdateUser(image) = %#v, %v", got, err)
	}
	if stored, err := s.User(testContext(t), u.ID); err != nil || !reflect.DeepEqual(stored, got) {
		t.Errorf("User after update = %#v, %v; want %#v", stored, err, got)
	}

	var clear *string
	got, err = update(ptr("Countess"), &clear)
	if err != nil || got.Name != "Countess" || got.Image != nil {
		t.Errorf("UpdateUser(name, clear image) = %#v, %v", got, err)
	}

	err = inTx(t, s, func(tx *store.Tx) error {
		_, err := tx.UpdateUser(testContext(t), "usr_missing", ptr("x"), nil)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateUser(missing) = %v, want ErrNotFound", err)
	}
	err = inTx(t, s, func(tx *store.Tx) error {
		_, err := tx.UpdateUser(testContext(t), "usr_missing", nil, nil)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateUser(missing, no change) = %v, want ErrNotFound", err)
	}
}

func testPasswords(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	withPassword := mustCreateUser(t, s, "ada@example.com", "old")
	withoutPassword := mustCreateUser(t, s, "grace@example.com", "")
	setPassword := func(userID, hash string) error {
		return inTx(t, s, func(tx *store.Tx) error { return tx.SetPassword(testContext(t), userID, hash) })
	}

	for _, u := range []store.User{withPassword, withoutPassword} {
		if err := setPassword(u.ID, "new-"+u.ID); err != nil {
			t.Fatalf("SetPassword(%s): %v", u.Email, err)
		}
		if hash, err := s.PasswordHash(testContext(t), u.ID); err != nil || hash != "new-"+u.ID {
			t.Errorf("PasswordHash(%s) = %q, %v; want the new hash", u.Email, hash, err)
		}
		if _, hash, err := s.UserByEmail(testContext(t), u.Email); err != nil || hash != "new-"+u.ID {
			t.Errorf("UserByEmail(%s) hash = %q, %v; want the new hash", u.Email, hash, err)
		}
	}
	// Setting it again replaces it (one credential account per user).
	if err := setPassword(withoutPassword.ID, "newer"); err != nil {
		t.Fatal(err)
	}
	if hash, err := s.PasswordHash(testContext(t), withoutPassword.ID); err != nil || hash != "newer" {
		t.Errorf("PasswordHash after second set = %q, %v", hash, err)
	}

	if err := setPassword("usr_missing", "h"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetPassword(missing user) = %v, want ErrNotFound", err)
	}
	if err := setPassword(withPassword.ID, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SetPassword(empty hash) = %v, want ErrInvalid", err)
	}
}

func testDeleteUser(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ada := mustCreateUser(t, s, "ada@example.com", "h")
	grace := mustCreateUser(t, s, "grace@example.com", "h")
	mustCreateSession(t, s, ada.ID, "ada-1", time.Hour, time.Time{})
	mustCreateSession(t, s, ada.ID, "ada-2", time.Hour, time.Time{})
	mustCreateSession(t, s, grace.ID, "grace-1", time.Hour, time.Time{})

	if err := inTx(t, s, func(tx *store.Tx) error { return tx.DeleteUser(testContext(t), ada.ID) }); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if _, err := s.User(testContext(t), ada.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("User after delete = %v, want ErrNotFound", err)
	}
	if _, err := s.PasswordHash(testContext(t), ada.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PasswordHash after delete = %v, want ErrNotFound", err)
	}
	checkSessionAbsent(t, s, "ada-1")
	checkSessionAbsent(t, s, "ada-2")
	if got := listSessions(t, s, ada.ID); len(got) != 0 {
		t.Errorf("sessions of the deleted user: %v, want none (cascade)", sessionIDs(got))
	}
	// Others are untouched.
	if _, _, err := s.SessionByTokenHash(testContext(t), "grace-1"); err != nil {
		t.Errorf("other user's session: %v", err)
	}
	if _, hash, err := s.UserByEmail(testContext(t), "grace@example.com"); err != nil || hash != "h" {
		t.Errorf("other user: %q, %v", hash, err)
	}
	// The email is free again.
	again := mustCreateUser(t, s, "ada@example.com", "h2")
	if again.ID == ada.ID {
		t.Error("re-created user reuses the deleted ID")
	}

	if err := inTx(t, s, func(tx *store.Tx) error { return tx.DeleteUser(testContext(t), ada.ID) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteUser(deleted) = %v, want ErrNotFound", err)
	}
}
