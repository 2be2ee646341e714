package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/oauth"
)

// rotateSigning is `gatehouse keys rotate-signing`: it generates the next token signing key,
// publishes it in the JWKS at once and lets it sign after the publish delay
// (GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY, a Go duration ≥ 0, default 1h), and schedules the
// current key's retirement for when the last token it signs has expired. The new key is of
// GATEHOUSE_SIGNING_ALG (default RS256), so a rotation can move from one algorithm to another;
// the old key, of whatever algorithm, stays published until it retires (activation + 1 h token
// lifetime + 5 min clock skew); see package oauth. Running replicas pick the new key up within
// a minute and switch at the activation time; nothing needs a restart.
//
// It refuses while an earlier rotation has not activated yet. A delay of 0 makes the new key
// sign at once: relying parties that cached the JWKS refuse its tokens until they refetch.
func rotateSigning(ctx context.Context, cfg settings, out io.Writer, log *slog.Logger) error {
	ring, err := loadKeyring(cfg, log, "keys rotate-signing", "the key that seals signing keys")
	if err != nil {
		return err
	}
	st, err := openMigrated(ctx, cfg, "keys rotate-signing")
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := oauth.NewKeySet(st, ring, oauth.KeySetOptions{Algorithm: cfg.SigningAlg}).Rotate(ctx, cfg.SigningKeyPublishDelay)
	if err != nil {
		return err
	}
	log.Info("signing key rotated", "kid", r.KeyID, "alg", cfg.SigningAlg, "signs_from", r.ActivatesAt, "previous_kid", r.RetiredKeyID, "previous_retires_at", r.RetiresAt)
	if r.RetiredKeyID == "" {
		fmt.Fprintf(out, "gatehouse: %s signing key %s created; it signs from now on\n", cfg.SigningAlg, r.KeyID)
		return nil
	}
	fmt.Fprintf(out, "gatehouse: %s signing key %s published; it signs from %s; key %s stays published until %s\n",
		cfg.SigningAlg, r.KeyID, r.ActivatesAt.Format(time.RFC3339), r.RetiredKeyID, r.RetiresAt.Format(time.RFC3339))
	return nil
}
