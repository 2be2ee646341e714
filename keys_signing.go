package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/oauth"
)

// rotateSigning is `gatehouse keys rotate-signing`: for GATEHOUSE_SIGNING_ALG and each of
// GATEHOUSE_SIGNING_ALGS it generates the next token signing key of that algorithm, publishes
// it in the JWKS at once and lets it sign after the publish delay
// (GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY, a Go duration ≥ 0, default 1h), and schedules the
// retirement of the algorithm's current key for when the last token it signs has expired
// (activation + 1 h token lifetime + 5 min clock skew); see package oauth. The keys of
// algorithms no longer offered retire with GATEHOUSE_SIGNING_ALG's, so a rotation can move from
// one algorithm to another, the old key published until it retires. Running replicas pick the
// new keys up within a minute and switch at the activation time; nothing needs a restart.
//
// It refuses while an earlier rotation of an algorithm has not activated yet (the algorithms
// before it are rotated). A delay of 0 makes the new keys sign at once: relying parties that
// cached the JWKS refuse their tokens until they refetch.
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
	ks := oauth.NewKeySet(st, ring, oauth.KeySetOptions{Algorithm: cfg.SigningAlg, Algorithms: cfg.SigningAlgs})
	for i, alg := range ks.Algorithms() {
		var r oauth.Rotation
		if i == 0 {
			r, err = ks.Rotate(ctx, cfg.SigningKeyPublishDelay)
		} else {
			r, err = ks.RotateAlgorithm(ctx, alg, cfg.SigningKeyPublishDelay)
		}
		if err != nil {
			return err
		}
		log.Info("signing key rotated", "kid", r.KeyID, "alg", alg, "signs_from", r.ActivatesAt, "previous_kids", r.Retired, "previous_retires_at", r.RetiresAt)
		if r.RetiredKeyID == "" {
			fmt.Fprintf(out, "gatehouse: %s signing key %s created; it signs from now on\n", alg, r.KeyID)
			continue
		}
		fmt.Fprintf(out, "gatehouse: %s signing key %s published; it signs from %s; key %s stays published until %s\n",
			alg, r.KeyID, r.ActivatesAt.Format(time.RFC3339), strings.Join(r.Retired, ", "), r.RetiresAt.Format(time.RFC3339))
	}
	return nil
}
