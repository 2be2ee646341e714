package storetest

import (
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// runSocialAndPAR covers the single-use rows of social sign-in (states), pushed
// authorization requests and client assertion jtis, linked accounts, and the OIDC client
// fields of private_key_jwt and PAR.
func runSocialAndPAR(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("SocialState", func(t *testing.T) { testSocialState(t, open) })
	t.Run("PARRequest", func(t *testing.T) { testPARRequest(t, open) })
	t.Run("ClientAssertion", func(t *testing.T) { testClientAssertion(t, open) })
	t.Run("UsedChallenge", func(t *testing.T) { testUsedChallenge(t, open) })
	t.Run("LinkedAccounts", func(t *testing.T) { testLinkedAccounts(t, open) })
	t.Run("KeyClient", func(t *testing.T) { testKeyClient(t, open) })
}

// concurrently runs fn n times at once and counts the nil results.
func concurrently(n int, fn func() error) int {
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if fn() == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}

func testSocialState(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	later := time.Now().Add(10 * time.Minute)
	if err := s.CreateSocialState(ctx, "state-1", "github", later); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeSocialState(ctx, "state-1", "google"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("consume with another provider: %v, want ErrNotFound", err)
	}
	if err := s.ConsumeSocialState(ctx, "state-1", "github"); err != nil {
		t.Errorf("consume: %v", err)
	}
	if err := s.ConsumeSocialState(ctx, "state-1", "github"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("consume twice: %v, want ErrNotFound", err)
	}
	if err := s.CreateSocialState(ctx, "state-old", "github", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsumeSocialState(ctx, "state-old", "github"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("consume an expired state: %v, want ErrNotFound", err)
	}
	if err := s.CreateSocialState(ctx, "state-race", "github", later); err != nil {
		t.Fatal(err)
	}
	if n := concurrently(8, func() error { return s.ConsumeSocialState(ctx, "state-race", "github") }); n != 1 {
		t.Errorf("%d concurrent consumes succeeded, want 1", n)
	}
}

func testPARRequest(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	later := time.Now().Add(time.Minute)
	const uri = "urn:ietf:params:oauth:request_uri:abc"
	if err := s.CreatePARRequest(ctx, uri, "cli_1", `{"form":"a=b"}`, later); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePARRequest(ctx, uri, "cli_1", `{}`, later); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same request_uri twice: %v, want ErrConflict", err)
	}
	for range 2 {
		if client, err := s.PARRequestClient(ctx, uri); err != nil || client != "cli_1" {
			t.Errorf("the client of a pushed request: %q %v", client, err)
		}
	}
	client, req, err := s.TakePARRequest(ctx, uri)
	if err != nil || client != "cli_1" || req != `{"form":"a=b"}` {
		t.Errorf("take: %q %q %v", client, req, err)
	}
	if _, _, err := s.TakePARRequest(ctx, uri); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("take twice: %v, want ErrNotFound", err)
	}
	if _, err := s.PARRequestClient(ctx, uri); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the client of a taken request: %v, want ErrNotFound", err)
	}
	if err := s.CreatePARRequest(ctx, uri+"-old", "cli_1", `{}`, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PARRequestClient(ctx, uri+"-old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the client of an expired request: %v, want ErrNotFound", err)
	}
	if _, _, err := s.TakePARRequest(ctx, uri+"-old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("take an expired request: %v, want ErrNotFound", err)
	}
	if err := s.CreatePARRequest(ctx, uri+"-race", "cli_1", `{}`, later); err != nil {
		t.Fatal(err)
	}
	if n := concurrently(8, func() error { _, _, err := s.TakePARRequest(ctx, uri+"-race"); return err }); n != 1 {
		t.Errorf("%d concurrent takes succeeded, want 1", n)
	}
}

func testUsedChallenge(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	later := time.Now().Add(time.Minute)
	if err := s.UseChallenge(ctx, "consent:abc", later); err != nil {
		t.Fatal(err)
	}
	if err := s.UseChallenge(ctx, "consent:abc", later); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a challenge used twice: %v, want ErrConflict", err)
	}
	if err := s.UseChallenge(ctx, "pushed:abc", later); err != nil {
		t.Errorf("another challenge: %v", err)
	}
	if n := concurrently(8, func() error { return s.UseChallenge(ctx, "consent:race", later) }); n != 1 {
		t.Errorf("%d concurrent uses succeeded, want 1", n)
	}
	// Expired rows are swept by later uses.
	for i := range 3 {
		if err := s.UseChallenge(ctx, "old-"+string(rune('a'+i)), time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UseChallenge(ctx, "consent:new", later); err != nil {
		t.Fatal(err)
	}
	if err := s.UseChallenge(ctx, "old-a", later); err != nil {
		t.Errorf("an expired, swept challenge id: %v", err)
	}
}

func testClientAssertion(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	later := time.Now().Add(time.Minute)
	if known, err := s.ClientAssertionKnown(ctx, "jti-1"); err != nil || known {
		t.Errorf("unknown jti: %v %v", known, err)
	}
	if err := s.AddClientAssertion(ctx, "jti-1", later); err != nil {
		t.Fatal(err)
	}
	if known, err := s.ClientAssertionKnown(ctx, "jti-1"); err != nil || !known {
		t.Errorf("recorded jti: %v %v", known, err)
	}
	if err := s.AddClientAssertion(ctx, "jti-1", later); !errors.Is(err, store.ErrConflict) {
		t.Errorf("jti twice: %v, want ErrConflict", err)
	}
	// An expired record no longer counts and may be replaced.
	if err := s.AddClientAssertion(ctx, "jti-2", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if known, _ := s.ClientAssertionKnown(ctx, "jti-2"); known {
		t.Error("an expired jti is still known")
	}
	if err := s.AddClientAssertion(ctx, "jti-2", later); err != nil {
		t.Errorf("reuse of an expired jti: %v", err)
	}
	if n := concurrently(8, func() error { return s.AddClientAssertion(ctx, "jti-race", later) }); n != 1 {
		t.Errorf("%d concurrent adds succeeded, want 1", n)
	}
}

func testLinkedAccounts(t *testing.T, open func(t *testing.T) *store.Store) {
	s := open(t)
	ctx := testContext(t)
	u := newUser(t, s, "Grace", "grace-linked@example.com")
	var gh store.LinkedAccount
	mustTx(t, s, func(tx *store.Tx) error {
		var err error
		gh, err = tx.LinkAccount(ctx, u.ID, "github", "1001", []string{"read:user", "user:email"})
		return err
	})
	list, err := s.LinkedAccounts(ctx, u.ID)
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], gh) || !reflect.DeepEqual(gh.Scopes, []string{"read:user", "user:email"}) {
		t.Errorf("LinkedAccounts = %+v %v; want [%+v]", list, err, gh)
	}
	mustTx(t, s, func(tx *store.Tx) error {
		got, err := tx.AccountByProvider(ctx, "github", "1001")
		if err != nil || got.UserID != u.ID {
			t.Errorf("AccountByProvider: %+v %v", got, err)
		}
		if _, err := tx.AccountByProvider(ctx, "google", "1001"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("AccountByProvider of another provider: %v", err)
		}
		if got, err := tx.UserByEmailTx(ctx, " Grace-Linked@Example.com "); err != nil || got.ID != u.ID {
			t.Errorf("UserByEmailTx: %+v %v", got, err)
		}
		return nil
	})
	other := newUser(t, s, "Other", "other-linked@example.com")
	for _, c := range []struct {
		name             string
		user, prov, acct string
		want             error
	}{
		{"taken provider account", other.ID, "github", "1001", store.ErrConflict},
		{"credential provider", other.ID, store.CredentialProvider, other.ID, store.ErrInvalid},
		{"empty account id", other.ID, "google", "", store.ErrInvalid},
		{"unknown user", "usr_missing", "google", "g-1", store.ErrNotFound},
	} {
		err := s.InTx(ctx, func(tx *store.Tx) error {
			_, err := tx.LinkAccount(ctx, c.user, c.prov, c.acct, nil)
			return err
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	mustTx(t, s, func(tx *store.Tx) error { return tx.MarkEmailVerified(ctx, other.ID) })
	if got, _ := s.User(ctx, other.ID); !got.EmailVerified {
		t.Error("MarkEmailVerified did not mark the email verified")
	}
}

func testKeyClient(t *testing.T, open func(t *testing.T) *store.Store) {
	f := newSAFixture(t, open)
	ctx := testContext(t)
	c := webClient(f.project.ID, "keys")
	c.TokenEndpointAuthMethod, c.JWKS, c.RequirePAR = store.OIDCAuthPrivateKeyJWT, `{"keys":[{"kty":"EC"}]}`, true
	createClient(t, f.s, &c)
	got, err := f.s.OIDCClientByID(ctx, c.ID)
	if err != nil || got.TokenEndpointAuthMethod != "private_key_jwt" || got.JWKS != `{"keys":[{"kty":"EC"}]}` || !got.RequirePAR {
		t.Errorf("OIDCClientByID = %+v %v", got.OIDCClient, err)
	}
	if list, _ := f.s.ListOIDCClients(ctx, f.project.ID); len(list) != 1 || !reflect.DeepEqual(list[0], c) {
		t.Errorf("ListOIDCClients = %+v, want [%+v]", list, c)
	}
	err = f.s.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.SetOIDCClientSecretHash(ctx, f.project.ID, c.ID, clientHash())
		return err
	})
	if !errors.Is(err, store.ErrKeyClientSecret) {
		t.Errorf("rotate a key client's secret: %v, want ErrKeyClientSecret", err)
	}
	plain := webClient(f.project.ID, "plain")
	createClient(t, f.s, &plain)
	if got, _ := f.s.OIDCClientByID(ctx, plain.ID); got.TokenEndpointAuthMethod != "" || got.JWKS != "" || got.RequirePAR {
		t.Errorf("a plain client: %+v", got.OIDCClient)
	}
	for _, bad := range []func(c *store.OIDCClient){
		func(c *store.OIDCClient) { c.TokenEndpointAuthMethod = "client_secret_jwt" },
		func(c *store.OIDCClient) { c.TokenEndpointAuthMethod = store.OIDCAuthPrivateKeyJWT },
		func(c *store.OIDCClient) { c.JWKS = `{"keys":[]}` },
	} {
		c := webClient(f.project.ID, "bad")
		bad(&c)
		err := f.s.InTx(ctx, func(tx *store.Tx) error { return tx.CreateOIDCClient(ctx, &c) })
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("invalid key client %+v: %v, want ErrInvalid", c, err)
		}
	}
}
