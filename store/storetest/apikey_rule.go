package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// testAPIKeyUsable: the Go form of the key rule, on states written into an APIKeyAuth,
// including the expiry boundary (a key is expired from its ExpiresAt on) and the order of the
// reasons (a key refused for several reasons is counted under the first).
func testAPIKeyUsable(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	cases := []struct {
		name   string
		auth   store.APIKeyAuth
		usable bool
		why    store.APIKeyRefusal
	}{
		{"fresh", store.APIKeyAuth{}, true, ""},
		{"expires later", store.APIKeyAuth{ExpiresAt: &future}, true, ""},
		{"expires now", store.APIKeyAuth{ExpiresAt: &now}, false, "expired"},
		{"expired", store.APIKeyAuth{ExpiresAt: &past}, false, "expired"},
		{"revoked", store.APIKeyAuth{RevokedAt: &past}, false, "revoked"},
		{"disabled", store.APIKeyAuth{DisabledAt: &past}, false, "disabled"},
		{"project archived", store.APIKeyAuth{ProjectArchived: true}, false, "archived"},
		{"organization archived", store.APIKeyAuth{OrganizationArchived: true}, false, "archived"},
		{"revoked and expired", store.APIKeyAuth{RevokedAt: &past, ExpiresAt: &past}, false, "revoked"},
		{"disabled and expired", store.APIKeyAuth{DisabledAt: &past, ExpiresAt: &past}, false, "disabled"},
		{"expired, project archived", store.APIKeyAuth{ExpiresAt: &past, ProjectArchived: true}, false, "expired"},
	}
	for _, c := range cases {
		if usable, why := store.APIKeyUsable(c.auth, now); usable != c.usable || why != c.why {
			t.Errorf("%s: APIKeyUsable = %v %q, want %v %q", c.name, usable, why, c.usable, c.why)
		}
	}
}

// testAPIKeyRule: the key rule's two forms agree. Each row puts one key, in its own
// organization and project, into the state it names through the store's own mutations; then
// the Go form (store.APIKeyUsable on the key as APIKeyByPublicID and APIKeyDecision read it)
// and the SQL form (as usage ingest applies it, to a single event and within a batch) must
// both give the row's answer. A deleted key is one the database does not hold: neither form
// finds it.
func testAPIKeyRule(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	owner := newUser(t, s, "Owner", "key-rule@example.com")
	cases := []struct {
		name string
		// expires is the key's expiry relative to now (0: none).
		expires                                                       time.Duration
		revoked, disabled, enabledAgain, projectArchived, orgArchived bool
		restored                                                      bool // the archived project or organization restored
		deleted                                                       bool
		usable                                                        bool
		why                                                           store.APIKeyRefusal
	}{
		{name: "fresh", usable: true, why: ""},
		{name: "expires in an hour", expires: time.Hour, usable: true, why: ""},
		{name: "expired a minute ago", expires: -time.Minute, usable: false, why: "expired"},
		{name: "revoked", revoked: true, usable: false, why: "revoked"},
		{name: "revoked, expires in an hour", expires: time.Hour, revoked: true, usable: false, why: "revoked"},
		{name: "account disabled", disabled: true, usable: false, why: "disabled"},
		{name: "account disabled and enabled again", disabled: true, enabledAgain: true, usable: true, why: ""},
		{name: "project archived", projectArchived: true, usable: false, why: "archived"},
		{name: "project archived and restored", projectArchived: true, restored: true, usable: true, why: ""},
		{name: "organization archived", orgArchived: true, usable: false, why: "archived"},
		{name: "organization archived and restored", orgArchived: true, restored: true, usable: true, why: ""},
		{name: "expired, project archived", expires: -time.Minute, projectArchived: true, usable: false, why: "expired"},
		{name: "deleted", deleted: true, usable: false, why: ""},
	}

	type placed struct{ keyID, publicID, projectID string }
	keys := make([]placed, len(cases))
	for i, c := range cases {
		if c.deleted {
			keys[i] = placed{keyID: "key_deleted", publicID: "deleted00000"}
			continue
		}
		org := newOrganization(t, s, fmt.Sprintf("key-rule-%d", i), owner.ID)
		project := newProject(t, s, org.ID, "p")
		var expiresAt *time.Time
		if c.expires != 0 {
			at := s.Now().Add(c.expires)
			expiresAt = &at
		}
		k := saKey(t, expiresAt)
		sa := store.ServiceAccount{ProjectID: project.ID, Name: "rule", Scopes: []string{"usage:write"}}
		createSA(t, s, &sa, k)
		mustTx(t, s, func(tx *store.Tx) error {
			var steps []func() error
			if c.revoked {
				steps = append(steps, func() error { _, err := tx.RevokeAPIKey(ctx, project.ID, sa.ID, k.ID); return err })
			}
			if c.disabled {
				steps = append(steps, func() error { _, err := tx.SetServiceAccountDisabled(ctx, project.ID, sa.ID, true); return err })
			}
			if c.enabledAgain {
				steps = append(steps, func() error { _, err := tx.SetServiceAccountDisabled(ctx, project.ID, sa.ID, false); return err })
			}
			if c.projectArchived {
				steps = append(steps, func() error { _, err := tx.SetProjectArchived(ctx, project.ID, true); return err })
			}
			if c.projectArchived && c.restored {
				steps = append(steps, func() error { _, err := tx.SetProjectArchived(ctx, project.ID, false); return err })
			}
			if c.orgArchived {
				steps = append(steps, func() error { _, err := tx.SetOrganizationArchived(ctx, org.ID, true); return err })
			}
			if c.orgArchived && c.restored {
				steps = append(steps, func() error { _, err := tx.SetOrganizationArchived(ctx, org.ID, false); return err })
			}
			for _, step := range steps {
				if err := step(); err != nil {
					return err
				}
			}
			return nil
		})
		keys[i] = placed{keyID: k.ID, publicID: k.PublicID, projectID: project.ID}
	}

	event := func(i int, id string) store.UsageEvent {
		return store.UsageEvent{ProjectID: "prj_key_rule", EnvironmentID: "env_key_rule", EventID: id,
			SubjectID: "sub", Meter: "m", Quantity: 1, Timestamp: usageT0, KeyID: keys[i].keyID}
	}
	var batch []store.UsageEvent
	for i, c := range cases {
		// Go: the key as authentication reads it, judged by APIKeyUsable.
		now := s.Now()
		read, err := s.APIKeyByPublicID(ctx, keys[i].publicID)
		combinedRead, cerr := s.APIKeyDecision(ctx, keys[i].publicID, keys[i].projectID, store.PrincipalUser, "u", "p:r", now)
		switch {
		case c.deleted:
			if !errors.Is(err, store.ErrNotFound) || !errors.Is(cerr, store.ErrNotFound) {
				t.Errorf("%s: APIKeyByPublicID, APIKeyDecision = %v, %v, want ErrNotFound", c.name, err, cerr)
			}
		case err != nil || cerr != nil:
			t.Fatalf("%s: APIKeyByPublicID, APIKeyDecision = %v, %v", c.name, err, cerr)
		default:
			for what, k := range map[string]store.APIKeyAuth{"APIKeyByPublicID": read, "APIKeyDecision": combinedRead.Key} {
				if usable, why := store.APIKeyUsable(k, now); usable != c.usable || why != c.why {
					t.Errorf("%s: APIKeyUsable(%s) = %v %q, want %v %q", c.name, what, usable, why, c.usable, c.why)
				}
			}
		}
		// SQL: usage ingest of a single event sent with the key.
		r := ingest(t, s, event(i, fmt.Sprintf("single-%d", i)))
		if r[0].KeyRefused != !c.usable || (r[0].ID == "") != !c.usable {
			t.Errorf("%s: single event %+v, want refused %v", c.name, r[0], !c.usable)
		}
		batch = append(batch, event(i, fmt.Sprintf("batch-%d", i)))
	}
	// SQL: one batch holding every row's key.
	for i, r := range ingest(t, s, batch...) {
		if r.KeyRefused != !cases[i].usable || (r.ID == "") != !cases[i].usable {
			t.Errorf("%s: event in a batch %+v, want refused %v", cases[i].name, r, !cases[i].usable)
		}
	}
}
