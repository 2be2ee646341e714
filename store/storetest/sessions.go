package storetest

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Sessions and their active organization, part of runIdentity.

// mustCreateSession creates a session of userID with tokenHash, expiring in
// ttl (negative: already expired), created at createdAt (zero: now).
func mustCreateSession(t *testing.T, s *store.Store, userID, tokenHash string, ttl time.Duration, createdAt time.Time) store.Session {
	t.Helper()
	ses := store.Session{
		TokenHash: tokenHash,
		UserID:    userID,
		ExpiresAt: s.Now().Add(ttl),
		CreatedAt: createdAt,
	}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateSession(testContext(t), &ses) }); err != nil {
		t.Fatalf("CreateSession(%s): %v", tokenHash, err)
	}
	return ses
}

func sessionIDs(sessions []store.Session) []string {
	out := make([]string, len(sessions))
	for i, s := range sessions {
		out[i] = s.ID
	}
	return out
}

func listSessions(t *testing.T, s *store.Store, userID string) []store.Session {
	t.Helper()
	got, err := s.ListSessions(testContext(t), userID)
	if err != nil {
		t.Fatalf("ListSessions(%s): %v", userID, err)
	}
	if got == nil {
		t.Errorf("ListSessions(%s): nil slice, want non-nil", userID)
	}
	return got
}

func checkSessionAbsent(t *testing.T, s *store.Store, tokenHash string) {
	t.Helper()
	if _, _, err := s.SessionByTokenHash(testContext(t), tokenHash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionByTokenHash(%s) = %v, want ErrNotFound", tokenHash, err)
	}
}

func testSessionRoundTrip(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	u := store.User{Name: "Ada", Email: "ada@example.com", EmailVerified: true, Image: ptr("https://example.com/a.png")}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateUser(testContext(t), &u, "h") }); err != nil {
		t.Fatal(err)
	}

	before := s.Now()
	expires := time.Date(2999, 1, 2, 3, 4, 5, 678901234, time.FixedZone("X", -5*3600))
	ses := store.Session{
		TokenHash:            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		UserID:               u.ID,
		ExpiresAt:            expires,
		RememberMe:           true,
		IPAddress:            "192.0.2.7",
		UserAgent:            "Mozilla/5.0",
		ActiveOrganizationID: ptr("org_1"),
	}
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateSession(testContext(t), &ses) }); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	after := s.Now()
	if !regexp.MustCompile(`^ses_[0-9a-hjkmnp-tv-z]{26}$`).MatchString(ses.ID) {
		t.Errorf("ID = %q, want ses_<26 base32>", ses.ID)
	}
	if !ses.ExpiresAt.Equal(expires.Truncate(time.Microsecond)) || ses.ExpiresAt.Location() != time.UTC {
		t.Errorf("ExpiresAt = %v, want %v in UTC", ses.ExpiresAt, expires)
	}
	if ses.CreatedAt.Before(before) || ses.CreatedAt.After(after) || !ses.UpdatedAt.Equal(ses.CreatedAt) {
		t.Errorf("CreatedAt %v, UpdatedAt %v; want equal, within [%v, %v]", ses.CreatedAt, ses.UpdatedAt, before, after)
	}

	gotSession, gotUser, err := s.SessionByTokenHash(testContext(t), ses.TokenHash)
	if err != nil {
		t.Fatalf("SessionByTokenHash: %v", err)
	}
	if !reflect.DeepEqual(gotSession, ses) {
		t.Errorf("session:\n got %#v\nwant %#v", gotSession, ses)
	}
	if !reflect.DeepEqual(gotUser, u) {
		t.Errorf("user:\n got %#v\nwant %#v", gotUser, u)
	}

	// Defaults: no active organization, not remembered, empty strings.
	bare := mustCreateSession(t, s, u.ID, "bare", time.Hour, time.Time{})
	got, _, err := s.SessionByTokenHash(testContext(t), "bare")
	if err != nil || !reflect.DeepEqual(got, bare) || got.ActiveOrganizationID != nil || got.RememberMe || got.IPAddress != "" {
		t.Errorf("bare session = %#v, %v; want %#v", got, err, bare)
	}
	checkSessionAbsent(t, s, "no-such-hash")
}

func testCreateSessionInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	u := mustCreateUser(t, s, "ada@example.com", "h")
	mustCreateSession(t, s, u.ID, "taken", time.Hour, time.Time{})
	expires := s.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		ses  store.Session
		want error
	}{
		{"empty token hash", store.Session{UserID: u.ID, ExpiresAt: expires}, store.ErrInvalid},
		{"empty user", store.Session{TokenHash: "x", ExpiresAt: expires}, store.ErrInvalid},
		{"zero expiry", store.Session{TokenHash: "x", UserID: u.ID}, store.ErrInvalid},
		{"unknown user", store.Session{TokenHash: "x", UserID: "usr_missing", ExpiresAt: expires}, store.ErrNotFound},
		{"duplicate token hash", store.Session{TokenHash: "taken", UserID: u.ID, ExpiresAt: expires}, store.ErrConflict},
	} {
		err := inTx(t, s, func(tx *store.Tx) error { return tx.CreateSession(testContext(t), &tc.ses) })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: CreateSession = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := listSessions(t, s, u.ID); len(got) != 1 {
		t.Errorf("%d sessions, want 1", len(got))
	}
}

func testSessionExpired(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	u := mustCreateUser(t, s, "ada@example.com", "h")
	expired := mustCreateSession(t, s, u.ID, "expired", -time.Second, time.Time{})
	live := mustCreateSession(t, s, u.ID, "live", time.Hour, time.Time{})

	checkSessionAbsent(t, s, "expired")
	if got := sessionIDs(listSessions(t, s, u.ID)); !reflect.DeepEqual(got, []string{live.ID}) {
		t.Errorf("ListSessions = %v, want only the live session %s", got, live.ID)
	}

	var n int64
	err := inTx(t, s, func(tx *store.Tx) error {
		var err error
		n, err = tx.DeleteExpiredSessions(testContext(t))
		return err
	})
	if err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v; want 1", n, err)
	}
	// Gone for good: extending it now finds nothing.
	err = inTx(t, s, func(tx *store.Tx) error { return tx.ExtendSession(testContext(t), expired.ID, s.Now().Add(time.Hour)) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ExtendSession(purged) = %v, want ErrNotFound", err)
	}
	if _, _, err := s.SessionByTokenHash(testContext(t), "live"); err != nil {
		t.Errorf("live session after purge: %v", err)
	}
}

func testListSessions(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ada := mustCreateUser(t, s, "ada@example.com", "h")
	grace := mustCreateUser(t, s, "grace@example.com", "h")
	t0 := s.Now().Add(-time.Hour)
	// Created out of order; b1 and b2 share a timestamp (ID breaks the tie).
	c := mustCreateSession(t, s, ada.ID, "c", time.Hour, t0.Add(2*time.Minute))
	a := mustCreateSession(t, s, ada.ID, "a", time.Hour, t0)
	b1 := mustCreateSession(t, s, ada.ID, "b1", time.Hour, t0.Add(time.Minute))
	b2 := mustCreateSession(t, s, ada.ID, "b2", time.Hour, t0.Add(time.Minute))
	mustCreateSession(t, s, ada.ID, "old", -time.Minute, t0.Add(3*time.Minute))
	mustCreateSession(t, s, grace.ID, "g", time.Hour, t0)

	want := []string{c.ID, b2.ID, b1.ID, a.ID}
	if got := sessionIDs(listSessions(t, s, ada.ID)); !reflect.DeepEqual(got, want) {
		t.Errorf("ListSessions = %v, want %v", got, want)
	}
	if got := listSessions(t, s, "usr_missing"); len(got) != 0 {
		t.Errorf("ListSessions(missing) = %v, want empty", sessionIDs(got))
	}
}

func testExtendSession(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	u := mustCreateUser(t, s, "ada@example.com", "h")
	past := s.Now().Add(-time.Hour)
	ses := mustCreateSession(t, s, u.ID, "tok", time.Minute, past)

	later := s.Now().Add(7 * 24 * time.Hour).Add(123456789 * time.Nanosecond)
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.ExtendSession(testContext(t), ses.ID, later) }); err != nil {
		t.Fatalf("ExtendSession: %v", err)
	}
	got, _, err := s.SessionByTokenHash(testContext(t), "tok")
	if err != nil {
		t.Fatal(err)
	}
	if !got.ExpiresAt.Equal(later.Truncate(time.Microsecond)) || !got.UpdatedAt.After(past) || !got.CreatedAt.Equal(past) {
		t.Errorf("after extend: expires %v (want %v), updated %v, created %v", got.ExpiresAt, later, got.UpdatedAt, got.CreatedAt)
	}

	// An expired session comes back when extended.
	expired := mustCreateSession(t, s, u.ID, "expired", -time.Minute, time.Time{})
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.ExtendSession(testContext(t), expired.ID, later) }); err != nil {
		t.Fatalf("ExtendSession(expired): %v", err)
	}
	if _, _, err := s.SessionByTokenHash(testContext(t), "expired"); err != nil {
		t.Errorf("extended session: %v", err)
	}

	if err := inTx(t, s, func(tx *store.Tx) error { return tx.ExtendSession(testContext(t), "ses_missing", later) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ExtendSession(missing) = %v, want ErrNotFound", err)
	}
}

func testDeleteSession(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	u := mustCreateUser(t, s, "ada@example.com", "h")
	ses := mustCreateSession(t, s, u.ID, "tok", time.Hour, time.Time{})
	other := mustCreateSession(t, s, u.ID, "other", time.Hour, time.Time{})
	deleteSession := func(id string) error {
		return inTx(t, s, func(tx *store.Tx) error { return tx.DeleteSession(testContext(t), id) })
	}
	if err := deleteSession(ses.ID); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	checkSessionAbsent(t, s, "tok")
	if got := sessionIDs(listSessions(t, s, u.ID)); !reflect.DeepEqual(got, []string{other.ID}) {
		t.Errorf("remaining sessions = %v, want [%s]", got, other.ID)
	}
	if err := deleteSession(ses.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSession(again) = %v, want ErrNotFound", err)
	}
}

func testDeleteSessionByUser(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ada := mustCreateUser(t, s, "ada@example.com", "h")
	mallory := mustCreateUser(t, s, "mallory@example.com", "h")
	ses := mustCreateSession(t, s, ada.ID, "ada", time.Hour, time.Time{})
	deleteByUser := func(userID, sessionID string) error {
		return inTx(t, s, func(tx *store.Tx) error { return tx.DeleteSessionByUser(testContext(t), userID, sessionID) })
	}

	if err := deleteByUser(mallory.ID, ses.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSessionByUser(wrong user) = %v, want ErrNotFound", err)
	}
	if _, _, err := s.SessionByTokenHash(testContext(t), "ada"); err != nil {
		t.Errorf("session after another user's delete attempt: %v; want it kept", err)
	}
	if err := deleteByUser(ada.ID, "ses_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSessionByUser(missing session) = %v, want ErrNotFound", err)
	}
	if err := deleteByUser(ada.ID, ses.ID); err != nil {
		t.Fatalf("DeleteSessionByUser(owner): %v", err)
	}
	checkSessionAbsent(t, s, "ada")
}

func testDeleteOtherSessions(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ada := mustCreateUser(t, s, "ada@example.com", "h")
	grace := mustCreateUser(t, s, "grace@example.com", "h")
	current := mustCreateSession(t, s, ada.ID, "current", time.Hour, time.Time{})
	mustCreateSession(t, s, ada.ID, "laptop", time.Hour, time.Time{})
	mustCreateSession(t, s, ada.ID, "phone", time.Hour, time.Time{})
	mustCreateSession(t, s, ada.ID, "stale", -time.Hour, time.Time{})
	graceSession := mustCreateSession(t, s, grace.ID, "grace", time.Hour, time.Time{})

	deleteOthers := func(userID, keep string) (int64, error) {
		var n int64
		err := inTx(t, s, func(tx *store.Tx) error {
			var err error
			n, err = tx.DeleteOtherSessions(testContext(t), userID, keep)
			return err
		})
		return n, err
	}
	n, err := deleteOthers(ada.ID, current.ID)
	if err != nil || n != 3 {
		t.Errorf("DeleteOtherSessions = %d, %v; want 3 (expired one included)", n, err)
	}
	if got := sessionIDs(listSessions(t, s, ada.ID)); !reflect.DeepEqual(got, []string{current.ID}) {
		t.Errorf("remaining = %v, want only the current session %s", got, current.ID)
	}
	if got := sessionIDs(listSessions(t, s, grace.ID)); !reflect.DeepEqual(got, []string{graceSession.ID}) {
		t.Errorf("other user's sessions = %v, want untouched", got)
	}
	// Again: nothing left to delete.
	if n, err := deleteOthers(ada.ID, current.ID); err != nil || n != 0 {
		t.Errorf("second DeleteOtherSessions = %d, %v; want 0", n, err)
	}
	// Keeping another user's session ID does not protect anything of theirs
	// nor delete it.
	if n, err := deleteOthers(ada.ID, graceSession.ID); err != nil || n != 1 {
		t.Errorf("DeleteOtherSessions(keep foreign) = %d, %v; want 1", n, err)
	}
	if got := sessionIDs(listSessions(t, s, grace.ID)); !reflect.DeepEqual(got, []string{graceSession.ID}) {
		t.Errorf("other user's sessions = %v, want untouched", got)
	}
}

func testActiveOrganization(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ada := mustCreateUser(t, s, "ada@example.com", "h")
	grace := mustCreateUser(t, s, "grace@example.com", "h")
	past := s.Now().Add(-time.Hour)
	a1 := mustCreateSession(t, s, ada.ID, "a1", time.Hour, past)
	a2 := mustCreateSession(t, s, ada.ID, "a2", time.Hour, past)
	g1 := mustCreateSession(t, s, grace.ID, "g1", time.Hour, past)
	setActive := func(sessionID string, orgID *string) error {
		return inTx(t, s, func(tx *store.Tx) error { return tx.SetActiveOrganization(testContext(t), sessionID, orgID) })
	}
	active := func(tokenHash string) *string {
		t.Helper()
		ses, _, err := s.SessionByTokenHash(testContext(t), tokenHash)
		if err != nil {
			t.Fatalf("SessionByTokenHash(%s): %v", tokenHash, err)
		}
		return ses.ActiveOrganizationID
	}
	deref := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}

	for _, step := range []struct {
		session string
		org     *string
	}{{a1.ID, ptr("org_1")}, {a2.ID, ptr("org_2")}, {g1.ID, ptr("org_1")}} {
		if err := setActive(step.session, step.org); err != nil {
			t.Fatalf("SetActiveOrganization(%s, %s): %v", step.session, *step.org, err)
		}
	}
	if got := active("a1"); deref(got) != "org_1" {
		t.Errorf("a1 active = %s, want org_1", deref(got))
	}
	if ses, _, _ := s.SessionByTokenHash(testContext(t), "a1"); !ses.UpdatedAt.After(past) {
		t.Errorf("UpdatedAt = %v, want bumped after %v", ses.UpdatedAt, past)
	}

	if err := inTx(t, s, func(tx *store.Tx) error { return tx.ClearActiveOrganization(testContext(t), "org_1") }); err != nil {
		t.Fatalf("ClearActiveOrganization: %v", err)
	}
	for hash, want := range map[string]string{"a1": "<nil>", "a2": "org_2", "g1": "<nil>"} {
		if got := deref(active(hash)); got != want {
			t.Errorf("after clearing org_1: %s active = %s, want %s", hash, got, want)
		}
	}
	// No session has it: not an error.
	if err := inTx(t, s, func(tx *store.Tx) error { return tx.ClearActiveOrganization(testContext(t), "org_none") }); err != nil {
		t.Errorf("ClearActiveOrganization(unused) = %v", err)
	}

	if err := setActive(a2.ID, nil); err != nil {
		t.Fatalf("SetActiveOrganization(nil): %v", err)
	}
	if got := active("a2"); got != nil {
		t.Errorf("a2 active = %s, want nil", deref(got))
	}
	if err := setActive("ses_missing", ptr("org_1")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetActiveOrganization(missing) = %v, want ErrNotFound", err)
	}
	ids := sessionIDs(listSessions(t, s, ada.ID))
	slices.Sort(ids)
	if want := []string{a1.ID, a2.ID}; !reflect.DeepEqual(ids, want) {
		t.Errorf("sessions = %v, want %v", ids, want)
	}
}

// testClearUserActiveOrganization: only the given user's sessions on that organization lose it.
func testClearUserActiveOrganization(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	ada := mustCreateUser(t, s, "ada-clear@example.com", "")
	bob := mustCreateUser(t, s, "bob-clear@example.com", "")
	orgA, orgB := "org_a", "org_b"
	a1 := mustCreateSession(t, s, ada.ID, "hash-a1", time.Hour, time.Time{})
	a2 := mustCreateSession(t, s, ada.ID, "hash-a2", time.Hour, time.Time{})
	b1 := mustCreateSession(t, s, bob.ID, "hash-b1", time.Hour, time.Time{})
	err := inTx(t, s, func(tx *store.Tx) error {
		for id, org := range map[string]*string{a1.ID: &orgA, a2.ID: &orgB, b1.ID: &orgA} {
			if err := tx.SetActiveOrganization(ctx, id, org); err != nil {
				return err
			}
		}
		return tx.ClearUserActiveOrganization(ctx, ada.ID, orgA)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{a1.ID: "", a2.ID: orgB, b1.ID: orgA}
	for _, u := range []store.User{ada, bob} {
		sessions, err := s.ListSessions(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range sessions {
			active := ""
			if got.ActiveOrganizationID != nil {
				active = *got.ActiveOrganizationID
			}
			if active != want[got.ID] {
				t.Errorf("session %s: active organization %q, want %q", got.ID, active, want[got.ID])
			}
		}
	}
}
