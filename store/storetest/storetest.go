package storetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/migrations"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Run is the store conformance suite: every backend must pass it unchanged.
// open must return a fresh, isolated, migrated store on each call (see
// Backend.Open); the suite never shares a store between subtests.
func Run(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Ping", func(t *testing.T) { testPing(t, open) })
	t.Run("Migrate", func(t *testing.T) { testMigrate(t, open) })
	t.Run("InTx", func(t *testing.T) { testInTx(t, open) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testConcurrentWriters(t, open) })
	t.Run("AuditRoundTrip", func(t *testing.T) { testAuditRoundTrip(t, open) })
	t.Run("AuditDefaults", func(t *testing.T) { testAuditDefaults(t, open) })
	t.Run("AuditInvalid", func(t *testing.T) { testAuditInvalid(t, open) })
	t.Run("AuditOrder", func(t *testing.T) { testAuditOrder(t, open) })
	t.Run("AuditLimit", func(t *testing.T) { testAuditLimit(t, open) })
	t.Run("AuditFilter", func(t *testing.T) { testAuditFilter(t, open) })
	t.Run("Conflict", func(t *testing.T) { testConflict(t, open) })
	t.Run("NewID", testNewID)
	t.Run("Identity", func(t *testing.T) { runIdentity(t, open) })
	t.Run("Tenancy", func(t *testing.T) { runTenancy(t, open) })
	t.Run("OrgExtra", func(t *testing.T) { runOrgExtra(t, open) })
	t.Run("Config", func(t *testing.T) { runConfig(t, open) })
	t.Run("RBAC", func(t *testing.T) { runRBAC(t, open) })
	t.Run("ServiceAccounts", func(t *testing.T) { runServiceAccounts(t, open) })
	t.Run("KeyDecision", func(t *testing.T) { runKeyDecision(t, open) })
	t.Run("Throttle", func(t *testing.T) { runThrottle(t, open) })
	t.Run("OIDCClients", func(t *testing.T) { runOIDCClients(t, open) })
	t.Run("SigningKeys", func(t *testing.T) { runSigningKeys(t, open) })
	t.Run("OAuthTokens", func(t *testing.T) { runOAuthTokens(t, open) })
	t.Run("OAuthConsents", func(t *testing.T) { runOAuthConsents(t, open) })
	t.Run("SocialAndPAR", func(t *testing.T) { runSocialAndPAR(t, open) })
	t.Run("EmailClaim", func(t *testing.T) { runEmailClaim(t, open) })
	t.Run("AccountDeletion", func(t *testing.T) { runAccountDeletion(t, open) })
	t.Run("Outbox", func(t *testing.T) { runOutbox(t, open) })
	t.Run("Webhooks", func(t *testing.T) { runWebhooks(t, open) })
	t.Run("EmailTokens", func(t *testing.T) { runEmailTokens(t, open) })
	t.Run("EmailChange", func(t *testing.T) { runEmailChange(t, open) })
	t.Run("TwoFactor", func(t *testing.T) { runTwoFactor(t, open) })
	t.Run("Passkeys", func(t *testing.T) { runPasskeys(t, open) })
	t.Run("Billing", func(t *testing.T) { runBilling(t, open) })
	t.Run("Usage", func(t *testing.T) { runUsage(t, open) })
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testPing(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	if err := s.Ping(testContext(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if d := s.Dialect(); d != store.SQLite && d != store.Postgres {
		t.Errorf("Dialect() = %q", d)
	}
}

// latestVersion is the highest migration version for dialect in the
// embedded files.
func latestVersion(t *testing.T, dialect store.Dialect) uint {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, string(dialect))
	if err != nil {
		t.Fatal(err)
	}
	var latest uint
	for _, e := range entries {
		v, err := strconv.ParseUint(regexp.MustCompile(`^\d+`).FindString(e.Name()), 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		latest = max(latest, uint(v))
	}
	return latest
}

func checkVersion(t *testing.T, s *store.Store, want uint) {
	t.Helper()
	v, dirty, err := s.Version(testContext(t))
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if v != want || dirty {
		t.Fatalf("Version() = %d, dirty %v; want %d, clean", v, dirty, want)
	}
}

func testMigrate(t *testing.T, open func(t *testing.T) *store.Store) {
	ctx := testContext(t)
	s := open(t)
	latest := latestVersion(t, s.Dialect())
	checkVersion(t, s, latest)

	// Up again is a no-op.
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	checkVersion(t, s, latest)

	if err := s.MigrateDown(ctx); err != nil {
		t.Fatalf("MigrateDown: %v", err)
	}
	checkVersion(t, s, 0)
	if _, err := s.ListAudit(ctx, store.AuditFilter{}); err == nil {
		t.Error("ListAudit after MigrateDown: want an error, table should be gone")
	}
	if err := s.MigrateDown(ctx); err != nil {
		t.Fatalf("second MigrateDown: %v", err)
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after MigrateDown: %v", err)
	}
	checkVersion(t, s, latest)
	appendAudit(t, s, &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.migrate"})
	if got := listAudit(t, s, store.AuditFilter{}); len(got) != 1 {
		t.Errorf("after re-migrating: %d entries, want 1", len(got))
	}
	// The store's own pools survived the migrate instances closing.
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after migrations: %v", err)
	}
}

func appendAudit(t *testing.T, s *store.Store, entries ...*store.AuditEntry) {
	t.Helper()
	err := s.InTx(testContext(t), func(tx *store.Tx) error {
		for _, e := range entries {
			if err := tx.AppendAudit(testContext(t), e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append audit: %v", err)
	}
}

func listAudit(t *testing.T, s *store.Store, f store.AuditFilter) []store.AuditEntry {
	t.Helper()
	got, err := s.ListAudit(testContext(t), f)
	if err != nil {
		t.Fatalf("ListAudit(%+v): %v", f, err)
	}
	return got
}

func ids(entries []store.AuditEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.ID
	}
	return out
}

func testInTx(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Commit", func(t *testing.T) {
		s := open(t)
		e := &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.commit"}
		appendAudit(t, s, e)
		if got := ids(listAudit(t, s, store.AuditFilter{})); !reflect.DeepEqual(got, []string{e.ID}) {
			t.Errorf("after commit: %v, want [%s]", got, e.ID)
		}
	})

	t.Run("RollbackOnError", func(t *testing.T) {
		s := open(t)
		errBoom := errors.New("boom")
		err := s.InTx(testContext(t), func(tx *store.Tx) error {
			if err := tx.AppendAudit(testContext(t), &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.rollback"}); err != nil {
				return err
			}
			return fmt.Errorf("wrapped: %w", errBoom)
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InTx = %v, want fn's error", err)
		}
		if got := listAudit(t, s, store.AuditFilter{}); len(got) != 0 {
			t.Errorf("after rollback: %d entries, want 0", len(got))
		}
		// The writer connection is free again.
		appendAudit(t, s, &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.after"})
	})

	t.Run("RollbackOnPanic", func(t *testing.T) {
		s := open(t)
		recovered := func() (p any) {
			defer func() { p = recover() }()
			_ = s.InTx(testContext(t), func(tx *store.Tx) error {
				if err := tx.AppendAudit(testContext(t), &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.panic"}); err != nil {
					t.Errorf("AppendAudit: %v", err)
				}
				panic("boom")
			})
			return nil
		}()
		if recovered != "boom" {
			t.Fatalf("recovered %v, want the panic to propagate", recovered)
		}
		if got := listAudit(t, s, store.AuditFilter{}); len(got) != 0 {
			t.Errorf("after panic: %d entries, want 0", len(got))
		}
		appendAudit(t, s, &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.after"})
	})
}

// testConcurrentWriters checks that parallel transactions all commit
// (SQLite: no SQLITE_BUSY with one writer connection).
func testConcurrentWriters(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				errs <- s.InTx(testContext(t), func(tx *store.Tx) error {
					return tx.AppendAudit(testContext(t), &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.concurrent"})
				})
				// Reads run alongside the writes.
				if _, err := s.ListAudit(testContext(t), store.AuditFilter{Limit: 1}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := listAudit(t, s, store.AuditFilter{}); len(got) != writers*each {
		t.Errorf("%d entries, want %d", len(got), writers*each)
	}
}

func testAuditRoundTrip(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))
	e := store.AuditEntry{
		ID:             store.NewID("aud"),
		ActorType:      store.ActorServiceAccount,
		ActorID:        "sa_1",
		Action:         "config.update",
		TargetType:     "config_entry",
		TargetID:       "DATABASE_URL",
		OrganizationID: "org_1",
		ProjectID:      "prj_1",
		RequestID:      "req-1",
		IPAddress:      "192.0.2.1",
		UserAgent:      "curl/8.0",
		Metadata:       map[string]any{"environment": "production", "version": 3.0, "nested": map[string]any{"ok": true}},
		OccurredAt:     at,
	}
	appendAudit(t, s, &e)
	want := e
	want.OccurredAt = at.UTC().Truncate(time.Microsecond)

	got := listAudit(t, s, store.AuditFilter{})
	if len(got) != 1 {
		t.Fatalf("%d entries, want 1", len(got))
	}
	if got[0].OccurredAt.Location() != time.UTC {
		t.Errorf("OccurredAt location = %v, want UTC", got[0].OccurredAt.Location())
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got[0], want)
	}
	if !e.OccurredAt.Equal(want.OccurredAt) {
		t.Errorf("AppendAudit left OccurredAt = %v, want it normalised to %v", e.OccurredAt, want.OccurredAt)
	}

	// Optional fields come back empty.
	bare := store.AuditEntry{ActorType: store.ActorUser, ActorID: "usr_1", Action: "organization.create"}
	appendAudit(t, s, &bare)
	got = listAudit(t, s, store.AuditFilter{Limit: 1})
	if g := got[0]; g.ID != bare.ID || g.OrganizationID != "" || g.ProjectID != "" || g.Metadata != nil {
		t.Errorf("bare entry read back as %#v", g)
	}
}

func testAuditDefaults(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	before := s.Now()
	e := store.AuditEntry{ActorType: store.ActorSystem, Action: "test.defaults"}
	appendAudit(t, s, &e)
	after := s.Now()

	if !regexp.MustCompile(`^aud_[0-9a-hjkmnp-tv-z]{26}$`).MatchString(e.ID) {
		t.Errorf("ID = %q, want aud_<26 base32>", e.ID)
	}
	if e.OccurredAt.Before(before) || e.OccurredAt.After(after) || e.OccurredAt.Location() != time.UTC {
		t.Errorf("OccurredAt = %v, want UTC within [%v, %v]", e.OccurredAt, before, after)
	}
	got := listAudit(t, s, store.AuditFilter{})
	if len(got) != 1 || got[0].ID != e.ID || !got[0].OccurredAt.Equal(e.OccurredAt) {
		t.Errorf("read back %+v, want ID %s at %v", got, e.ID, e.OccurredAt)
	}
}

func testAuditInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	for _, e := range []store.AuditEntry{
		{ActorType: "robot", Action: "test.invalid"},
		{ActorType: store.ActorUser},
		{ActorType: store.ActorUser, Action: "test.invalid", Metadata: map[string]any{"f": func() {}}},
	} {
		err := s.InTx(testContext(t), func(tx *store.Tx) error { return tx.AppendAudit(testContext(t), &e) })
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AppendAudit(%+v) = %v, want ErrInvalid", e, err)
		}
	}
	if got := listAudit(t, s, store.AuditFilter{}); len(got) != 0 {
		t.Errorf("%d entries written, want 0", len(got))
	}
}

func testAuditOrder(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(id string, at time.Time) *store.AuditEntry {
		return &store.AuditEntry{ID: id, ActorType: store.ActorSystem, Action: "test.order", OccurredAt: at}
	}
	// Inserted out of order. aud_b and aud_c share a timestamp: the ID
	// breaks the tie. aud_a is one microsecond older than them; aud_e
	// carries a later year written in another zone.
	appendAudit(t, s,
		entry("aud_c", t0.Add(time.Second)),
		entry("aud_a", t0.Add(time.Second-time.Microsecond)),
		entry("aud_e", time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("X", 2*3600))),
		entry("aud_b", t0.Add(time.Second)),
		entry("aud_d", t0.Add(time.Hour)),
	)
	want := []string{"aud_e", "aud_d", "aud_c", "aud_b", "aud_a"}
	if got := ids(listAudit(t, s, store.AuditFilter{})); !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}

	// Entries appended in quick succession with the store clock come back in
	// reverse order of appending (IDs are monotonic).
	s2 := open(t)
	var appended []string
	for range 20 {
		e := &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.order"}
		appendAudit(t, s2, e)
		appended = append([]string{e.ID}, appended...)
	}
	if got := ids(listAudit(t, s2, store.AuditFilter{})); !reflect.DeepEqual(got, appended) {
		t.Errorf("order = %v, want %v", got, appended)
	}
}

func testAuditLimit(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var entries []*store.AuditEntry
	for i := range store.MaxAuditPage + 5 {
		entries = append(entries, &store.AuditEntry{
			ActorType: store.ActorSystem, Action: "test.limit", OccurredAt: t0.Add(time.Duration(i) * time.Minute),
		})
	}
	appendAudit(t, s, entries...)
	newest := entries[len(entries)-1].ID

	for _, tc := range []struct{ limit, want int }{
		{0, store.MaxAuditPage}, {-1, store.MaxAuditPage}, {1000, store.MaxAuditPage}, {10, 10}, {1, 1},
	} {
		got := listAudit(t, s, store.AuditFilter{Limit: tc.limit})
		if len(got) != tc.want {
			t.Errorf("Limit %d: %d entries, want %d", tc.limit, len(got), tc.want)
			continue
		}
		if got[0].ID != newest {
			t.Errorf("Limit %d: first = %s, want the newest %s", tc.limit, got[0].ID, newest)
		}
	}
}

func testAuditFilter(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	entry := func(org, project string) *store.AuditEntry {
		return &store.AuditEntry{ActorType: store.ActorUser, Action: "test.filter", OrganizationID: org, ProjectID: project}
	}
	org1prj1, org1prj2, org1, org2prj3, none := entry("org_1", "prj_1"), entry("org_1", "prj_2"), entry("org_1", ""), entry("org_2", "prj_3"), entry("", "")
	appendAudit(t, s, org1prj1, org1prj2, org1, org2prj3, none)

	for _, tc := range []struct {
		filter store.AuditFilter
		want   []*store.AuditEntry
	}{
		{store.AuditFilter{}, []*store.AuditEntry{none, org2prj3, org1, org1prj2, org1prj1}},
		{store.AuditFilter{OrganizationID: "org_1"}, []*store.AuditEntry{org1, org1prj2, org1prj1}},
		{store.AuditFilter{OrganizationID: "org_2"}, []*store.AuditEntry{org2prj3}},
		{store.AuditFilter{ProjectID: "prj_2"}, []*store.AuditEntry{org1prj2}},
		{store.AuditFilter{OrganizationID: "org_1", ProjectID: "prj_1"}, []*store.AuditEntry{org1prj1}},
		{store.AuditFilter{OrganizationID: "org_2", ProjectID: "prj_1"}, nil},
		{store.AuditFilter{ProjectID: "prj_missing"}, nil},
	} {
		got := listAudit(t, s, tc.filter)
		if got == nil {
			t.Errorf("%+v: nil slice, want empty", tc.filter)
		}
		want := make([]string, len(tc.want))
		for i, e := range tc.want {
			want[i] = e.ID
		}
		if !reflect.DeepEqual(ids(got), want) {
			t.Errorf("%+v: %v, want %v", tc.filter, ids(got), want)
		}
	}
}

func testConflict(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	first := &store.AuditEntry{ActorType: store.ActorSystem, Action: "test.conflict"}
	appendAudit(t, s, first)

	dup := &store.AuditEntry{ID: first.ID, ActorType: store.ActorSystem, Action: "test.conflict"}
	err := s.InTx(testContext(t), func(tx *store.Tx) error { return tx.AppendAudit(testContext(t), dup) })
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate ID: %v, want ErrConflict", err)
	}
	if got := listAudit(t, s, store.AuditFilter{}); len(got) != 1 {
		t.Errorf("%d entries, want 1", len(got))
	}
}

func testNewID(t *testing.T) {
	format := regexp.MustCompile(`^prj_[0-9a-hjkmnp-tv-z]{26}$`)
	const n = 10000
	seen := make(map[string]bool, n)
	prev := ""
	for range n {
		id := store.NewID("prj")
		if !format.MatchString(id) {
			t.Fatalf("NewID = %q, want prj_<26 lower-case Crockford base32>", id)
		}
		if seen[id] {
			t.Fatalf("duplicate ID %s", id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("NewID not increasing: %s after %s", id, prev)
		}
		prev = id
	}

	// The first 10 characters are the Unix millisecond timestamp.
	before := time.Now().UnixMilli()
	id := store.NewID("x")[2:]
	after := time.Now().UnixMilli()
	var ms int64
	for _, c := range id[:10] {
		ms = ms<<5 | int64(strings.IndexRune("0123456789abcdefghjkmnpqrstvwxyz", c))
	}
	// Monotonicity may push the timestamp a little past the clock, never
	// behind it.
	if ms < before || ms > after+1000 {
		t.Errorf("timestamp part of %s decodes to %d, want about %d..%d", id, ms, before, after)
	}
}
