package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// rewrap is `gatehouse keys rewrap`, the second half of a key rotation: after the operator
// sets GATEHOUSE_SECRET_KEY to a new key and moves the previous one to
// GATEHOUSE_SECRET_KEYS_OLD, it re-seals every sealed value at rest that is not under the
// current key, in one transaction, and writes how many it rewrapped to out. Once it has run,
// the old keys may be dropped.
//
// A value that no configured key opens fails the whole run and nothing is changed. The run
// never generates a key: without GATEHOUSE_SECRET_KEY (or the development key file) it refuses.
func rewrap(ctx context.Context, cfg settings, out io.Writer, log *slog.Logger) error {
	ring, err := loadKeyring(cfg, log, "keys rewrap", "the key to re-seal under")
	if err != nil {
		return err
	}
	st, err := openMigrated(ctx, cfg, "keys rewrap")
	if err != nil {
		return err
	}
	defer st.Close()

	var rewrapped, total int
	err = st.InTx(ctx, func(tx *store.Tx) error {
		rewrapped, total = 0, 0
		var err error
		rewrapped, err = tx.ResealValues(ctx, func(v store.SealedValue) (string, bool, error) {
			total++
			sealed, changed, err := ring.Rewrap(v.Sealed, v.AAD)
			if err != nil {
				id, _ := seal.KeyIDOf(v.Sealed)
				return "", false, fmt.Errorf("keys rewrap: %s %s (key id %q) does not open with "+
					"GATEHOUSE_SECRET_KEY or GATEHOUSE_SECRET_KEYS_OLD: %w", v.Table, v.ID, id, err)
			}
			return sealed, changed, nil
		})
		return err
	})
	if err != nil {
		return err
	}
	log.Info("keys rewrapped", "rewrapped", rewrapped, "sealed_values", total, "key_id", ring.KeyID())
	fmt.Fprintf(out, "gatehouse: rewrapped %d of %d sealed values; all are now under key %s\n", rewrapped, total, ring.KeyID())
	return nil
}

// loadKeyring builds the sealing keyring of a keys command from GATEHOUSE_SECRET_KEY (or the
// development key file) and GATEHOUSE_SECRET_KEYS_OLD. It never generates a key: without one
// it refuses, naming the command and what it needs the key for.
func loadKeyring(cfg settings, log *slog.Logger, command, why string) (*seal.Keyring, error) {
	if cfg.SecretKey == nil {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, secretKeyFile)); err != nil {
			return nil, &ConfigError{Var: "GATEHOUSE_SECRET_KEY", Reason: "required by " + command + ": " + why}
		}
	}
	key, err := loadSecretKey(cfg.Config, log)
	if err != nil {
		return nil, err
	}
	ring, err := seal.NewKeyring(key, cfg.OldSecretKeys...)
	if err != nil {
		return nil, &ConfigError{Var: "GATEHOUSE_SECRET_KEYS_OLD", Reason: err.Error()}
	}
	return ring, nil
}

// openMigrated opens the database of a keys command, which must have a schema already.
func openMigrated(ctx context.Context, cfg settings, command string) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if v, _, err := st.Version(ctx); err != nil {
		st.Close()
		return nil, err
	} else if v == 0 {
		st.Close()
		return nil, errors.New(command + ": the database has no schema; run `gatehouse migrate up` first")
	}
	return st, nil
}
