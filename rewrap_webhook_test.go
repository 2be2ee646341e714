package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// TestKeysRewrapWebhookSecrets: `gatehouse keys rewrap` re-seals a webhook endpoint's signing
// secret and the previous secret of a rotation; afterwards the new key alone opens both.
func TestKeysRewrapWebhookSecrets(t *testing.T) {
	f := newRotationFixture(t)
	aText, a := newKey(t)
	bText, b := newKey(t)
	ctx := context.Background()
	st, err := store.Open(ctx, f.env("GATEHOUSE_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ringA, err := seal.NewKeyring(a)
	if err != nil {
		t.Fatal(err)
	}
	projectID, err := st.EnvironmentProject(ctx, f.envID)
	if err != nil {
		t.Fatal(err)
	}
	const current, previous = "whsec_Y3VycmVudC1zZWNyZXQtb2YtMzItYnl0ZXMhISE=", "whsec_cHJldmlvdXMtc2VjcmV0LW9mLTMyLWJ5dGVzISE="
	e := store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), ProjectID: projectID, URL: "https://203.0.113.10/h", EventTypes: []string{"*"}}
	if e.Secret, err = ringA.Seal([]byte(current), store.WebhookSecretAAD(e.ID)); err != nil {
		t.Fatal(err)
	}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateWebhookEndpoint(ctx, &e); err != nil {
			return err
		}
		if e.PreviousSecret, err = ringA.Seal([]byte(previous), store.WebhookPreviousSecretAAD(e.ID)); err != nil {
			return err
		}
		until := time.Now().Add(time.Hour)
		e.PreviousSecretExpiresAt = &until
		return tx.UpdateWebhookEndpoint(ctx, &e)
	})
	if err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	if code := run(ctx, []string{"keys", "rewrap"}, f.withKeys(bText, aText), &stderr, nil); code != 0 ||
		!strings.Contains(stderr.String(), "rewrapped 2 of 2 sealed values") {
		t.Fatalf("rewrap: exit %d: %s", code, stderr.String())
	}
	got, err := st.WebhookEndpoint(ctx, projectID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	ringB, err := seal.NewKeyring(b)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := ringB.Open(got.Secret, store.WebhookSecretAAD(e.ID))
	if err != nil || string(cur) != current {
		t.Fatalf("secret under the new key: %q, %v", cur, err)
	}
	prev, err := ringB.Open(got.PreviousSecret, store.WebhookPreviousSecretAAD(e.ID))
	if err != nil || string(prev) != previous {
		t.Fatalf("previous secret under the new key: %q, %v", prev, err)
	}
	if _, err := ringA.Open(got.Secret, store.WebhookSecretAAD(e.ID)); err == nil {
		t.Fatal("the old key still opens the rewrapped secret")
	}
}
