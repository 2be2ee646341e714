package storetest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runOIDCClients covers OIDC clients: creation and its invariants, reads
// without secret material, disable/enable, secret rotation and the protocol
// routes' lookup by client id.
func runOIDCClients(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Create", func(t *testing.T) { testCreateOIDCClient(t, open) })
	t.Run("CreateInvalid", func(t *testing.T) { testCreateOIDCClientInvalid(t, open) })
	t.Run("List", func(t *testing.T) { testListOIDCClients(t, open) })
	t.Run("Disable", func(t *testing.T) { testSetOIDCClientDisabled(t, open) })
	t.Run("RotateSecret", func(t *testing.T) { testSetOIDCClientSecretHash(t, open) })
	t.Run("ByID", func(t *testing.T) { testOIDCClientByID(t, open) })
	t.Run("Update", func(t *testing.T) { testUpdateOIDCClient(t, open) })
}

// clientHash returns the SHA-256 of a random secret, standing in for the
// HMAC the server stores.
func clientHash() []byte {
	sum := sha256.Sum256([]byte(rand.Text()))
	return sum[:]
}

func webClient(projectID, name string) store.OIDCClient {
	return store.OIDCClient{
		ProjectID: projectID, Name: name, Type: store.OIDCClientWeb,
		RedirectURIs:           []string{"https://shop.example.com/cb", "https://shop.example.com/a/cb?x=1"},
		PostLogoutRedirectURIs: []string{"https://shop.example.com/"},
		GrantTypes:             []string{"authorization_code", "refresh_token", "client_credentials"},
		Scopes:                 []string{"openid", "offline_access", "roles"},
		SkipConsent:            true,
		SecretHash:             clientHash(),
	}
}

func nativeClient(projectID, name string) store.OIDCClient {
	return store.OIDCClient{
		ProjectID: projectID, Name: name, Type: store.OIDCClientNative,
		RedirectURIs: []string{"http://127.0.0.1/cb"},
		GrantTypes:   []string{"authorization_code"},
		Scopes:       []string{"openid"},
	}
}

func createClient(t *testing.T, s *store.Store, c *store.OIDCClient) {
	t.Helper()
	mustTx(t, s, func(tx *store.Tx) error { return tx.CreateOIDCClient(testContext(t), c) })
}

func getClient(t *testing.T, s *store.Store, projectID, id string) store.OIDCClient {
	t.Helper()
	got, err := s.OIDCClient(testContext(t), projectID, id)
	if err != nil {
		t.Fatalf("OIDCClient(%s, %s): %v", projectID, id, err)
	}
	return got
}

func testCreateOIDCClient(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	before := f.s.Now()
	web := webClient(f.project.ID, "web")
	hash := bytes.Clone(web.SecretHash)
	createClient(t, f.s, &web)
	after := f.s.Now()

	if !idFormat("cli").MatchString(web.ID) {
		t.Errorf("id %q, want cli_…", web.ID)
	}
	checkStamped(t, "CreatedAt", web.CreatedAt, before, after)
	if !web.UpdatedAt.Equal(web.CreatedAt) || web.DisabledAt != nil || web.SecretHash != nil {
		t.Errorf("created %+v: want UpdatedAt = CreatedAt, not disabled, hash cleared", web)
	}
	got := getClient(t, f.s, f.project.ID, web.ID)
	if !reflect.DeepEqual(got, web) {
		t.Errorf("OIDCClient =\n%+v\nwant\n%+v", got, web)
	}
	// Order is kept as registered.
	if !reflect.DeepEqual(got.RedirectURIs, []string{"https://shop.example.com/cb", "https://shop.example.com/a/cb?x=1"}) ||
		!reflect.DeepEqual(got.GrantTypes, []string{"authorization_code", "refresh_token", "client_credentials"}) {
		t.Errorf("lists %v, %v", got.RedirectURIs, got.GrantTypes)
	}
	auth, err := f.s.OIDCClientByID(ctx, web.ID)
	if err != nil || !bytes.Equal(auth.SecretHash, hash) {
		t.Fatalf("OIDCClientByID: hash %x, %v; want %x", auth.SecretHash, err, hash)
	}

	// A public client: no hash, empty post-logout list when none is given.
	native := nativeClient(f.project.ID, "native")
	createClient(t, f.s, &native)
	got = getClient(t, f.s, f.project.ID, native.ID)
	if got.SecretHash != nil || got.PostLogoutRedirectURIs == nil || len(got.PostLogoutRedirectURIs) != 0 ||
		got.SkipConsent || got.Type != store.OIDCClientNative || !got.Public() {
		t.Errorf("native client %+v", got)
	}
	if auth, err := f.s.OIDCClientByID(ctx, native.ID); err != nil || auth.SecretHash != nil {
		t.Errorf("OIDCClientByID(native): hash %x, %v; want none", auth.SecretHash, err)
	}
	// An id that is not text (a protocol request's client_id arrives unvalidated) is not found
	// on either database, never a query PostgreSQL refuses.
	for _, id := range []string{"cli_x\x00", "\xff\xfe\xfd", "\xc0\xae\xc0\xaf"} {
		if _, err := f.s.OIDCClientByID(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("OIDCClientByID(%q): %v, want ErrNotFound", id, err)
		}
	}

	// Another project does not see it; the same id twice conflicts.
	if _, err := f.s.OIDCClient(ctx, f.other.ID, web.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OIDCClient from another project: %v, want ErrNotFound", err)
	}
	dup := webClient(f.project.ID, "dup")
	dup.ID = web.ID
	err = f.s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOIDCClient(ctx, &dup) })
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate id: %v, want ErrConflict", err)
	}
}

func testCreateOIDCClientInvalid(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	cases := []struct {
		name   string
		mutate func(c *store.OIDCClient)
		want   error
	}{
		{"no project", func(c *store.OIDCClient) { c.ProjectID = "" }, store.ErrInvalid},
		{"no name", func(c *store.OIDCClient) { c.Name = "" }, store.ErrInvalid},
		{"unknown type", func(c *store.OIDCClient) { c.Type = "confidential" }, store.ErrInvalid},
		{"no redirect uri", func(c *store.OIDCClient) { c.RedirectURIs = nil }, store.ErrInvalid},
		{"no grant type", func(c *store.OIDCClient) { c.GrantTypes = []string{} }, store.ErrInvalid},
		{"no scope", func(c *store.OIDCClient) { c.Scopes = nil }, store.ErrInvalid},
		{"web without hash", func(c *store.OIDCClient) { c.SecretHash = nil }, store.ErrInvalid},
		{"web with short hash", func(c *store.OIDCClient) { c.SecretHash = c.SecretHash[:16] }, store.ErrInvalid},
		{"spa with hash", func(c *store.OIDCClient) { c.Type, c.SkipConsent = store.OIDCClientSPA, false }, store.ErrNoClientSecret},
		{"native skipping consent", func(c *store.OIDCClient) { c.Type, c.SecretHash = store.OIDCClientNative, nil }, store.ErrInvalid},
		{"unknown project", func(c *store.OIDCClient) { c.ProjectID = "prj_missing" }, store.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := webClient(f.project.ID, "x")
			tc.mutate(&c)
			err := f.s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOIDCClient(ctx, &c) })
			if !errors.Is(err, tc.want) {
				t.Errorf("CreateOIDCClient: %v, want %v", err, tc.want)
			}
		})
	}
	if got, err := f.s.ListOIDCClients(ctx, f.project.ID); err != nil || len(got) != 0 {
		t.Errorf("after refused creations: %d clients, %v", len(got), err)
	}
}

func testListOIDCClients(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	if got, err := f.s.ListOIDCClients(ctx, f.project.ID); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty list = %#v, %v; want an empty slice", got, err)
	}
	a, b, other := webClient(f.project.ID, "a"), nativeClient(f.project.ID, "b"), webClient(f.other.ID, "other")
	for _, c := range []*store.OIDCClient{&a, &b, &other} {
		createClient(t, f.s, c)
	}
	got, err := f.s.ListOIDCClients(ctx, f.project.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []store.OIDCClient{a, b}) {
		t.Errorf("ListOIDCClients =\n%+v\nwant\n%+v", got, []store.OIDCClient{a, b})
	}
	for _, c := range got {
		if c.SecretHash != nil {
			t.Errorf("listed client %s carries a secret hash", c.ID)
		}
	}
}

func testSetOIDCClientDisabled(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c := webClient(f.project.ID, "web")
	createClient(t, f.s, &c)
	set := func(projectID string, disabled bool) (store.OIDCClient, error) {
		var out store.OIDCClient
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			out, err = tx.SetOIDCClientDisabled(ctx, projectID, c.ID, disabled)
			return err
		})
		return out, err
	}
	before := f.s.Now()
	disabled, err := set(f.project.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if disabled.DisabledAt == nil || !disabled.UpdatedAt.Equal(*disabled.DisabledAt) || disabled.SecretHash != nil {
		t.Fatalf("disabled = %+v", disabled)
	}
	checkStamped(t, "DisabledAt", *disabled.DisabledAt, before, f.s.Now())
	again, err := set(f.project.ID, true)
	if err != nil || !again.DisabledAt.Equal(*disabled.DisabledAt) {
		t.Errorf("disabling twice: %+v, %v; want the first DisabledAt %v", again.DisabledAt, err, disabled.DisabledAt)
	}
	if auth, err := f.s.OIDCClientByID(ctx, c.ID); err != nil || auth.DisabledAt == nil || auth.Usable() {
		t.Errorf("OIDCClientByID after disable: %+v, %v", auth, err)
	}
	enabled, err := set(f.project.ID, false)
	if err != nil || enabled.DisabledAt != nil || enabled.UpdatedAt.Before(again.UpdatedAt) {
		t.Errorf("enabled = %+v, %v", enabled, err)
	}
	if got := getClient(t, f.s, f.project.ID, c.ID); !reflect.DeepEqual(got, enabled) {
		t.Errorf("read back %+v, want %+v", got, enabled)
	}
	for _, disabled := range []bool{true, false} {
		if _, err := set(f.other.ID, disabled); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("through another project (disabled %v): %v, want ErrNotFound", disabled, err)
		}
	}
	if got := getClient(t, f.s, f.project.ID, c.ID); got.DisabledAt != nil {
		t.Errorf("another project's call disabled the client")
	}
}

func testSetOIDCClientSecretHash(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	web, native := webClient(f.project.ID, "web"), nativeClient(f.project.ID, "native")
	createClient(t, f.s, &web)
	createClient(t, f.s, &native)
	rotate := func(projectID, id string, hash []byte) (store.OIDCClient, error) {
		var out store.OIDCClient
		err := f.s.InTx(ctx, func(tx *store.Tx) error {
			var err error
			out, err = tx.SetOIDCClientSecretHash(ctx, projectID, id, hash)
			return err
		})
		return out, err
	}
	fresh := clientHash()
	got, err := rotate(f.project.ID, web.ID, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got.SecretHash != nil || got.UpdatedAt.Before(web.UpdatedAt) || got.ID != web.ID {
		t.Errorf("rotated %+v", got)
	}
	if auth, err := f.s.OIDCClientByID(ctx, web.ID); err != nil || !bytes.Equal(auth.SecretHash, fresh) {
		t.Errorf("after rotation the lookup returns %x, %v; want %x", auth.SecretHash, err, fresh)
	}
	if _, err := rotate(f.project.ID, native.ID, clientHash()); !errors.Is(err, store.ErrNoClientSecret) || !errors.Is(err, store.ErrInvalid) {
		t.Errorf("rotating a public client: %v, want ErrNoClientSecret (an ErrInvalid)", err)
	}
	if _, err := rotate(f.other.ID, web.ID, clientHash()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("through another project: %v, want ErrNotFound", err)
	}
	if _, err := rotate(f.project.ID, "cli_missing", clientHash()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown client: %v, want ErrNotFound", err)
	}
	if _, err := rotate(f.project.ID, web.ID, fresh[:31]); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("short hash: %v, want ErrInvalid", err)
	}
	if auth, _ := f.s.OIDCClientByID(ctx, web.ID); !bytes.Equal(auth.SecretHash, fresh) {
		t.Error("a refused rotation changed the stored hash")
	}
}

func testOIDCClientByID(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c := webClient(f.project.ID, "web")
	hash := bytes.Clone(c.SecretHash)
	createClient(t, f.s, &c)
	auth, err := f.s.OIDCClientByID(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.SecretHash = hash
	if !reflect.DeepEqual(auth.OIDCClient, want) || auth.OrganizationID != f.org.ID ||
		auth.ProjectArchived || auth.OrganizationArchived || !auth.Usable() {
		t.Errorf("OIDCClientByID = %+v, want %+v in organization %s", auth, want, f.org.ID)
	}
	if _, err := f.s.OIDCClientByID(ctx, "cli_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown client: %v, want ErrNotFound", err)
	}
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, err := tx.SetProjectArchived(ctx, f.project.ID, true)
		return err
	})
	if auth, err := f.s.OIDCClientByID(ctx, c.ID); err != nil || !auth.ProjectArchived || auth.Usable() {
		t.Errorf("client of an archived project: %+v, %v", auth, err)
	}
	mustTx(t, f.s, func(tx *store.Tx) error {
		_, err := tx.SetOrganizationArchived(ctx, f.org.ID, true)
		return err
	})
	if auth, err := f.s.OIDCClientByID(ctx, c.ID); err != nil || !auth.OrganizationArchived || auth.Usable() {
		t.Errorf("client of an archived organization: %+v, %v", auth, err)
	}
}
