package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatehouse-dev/gatehouse/server"
)

// secretKeyFile is the development key's file name inside DataDir.
const secretKeyFile = "secret.key"

// loadSecretKey returns the 32-byte master key: cfg.SecretKey, from GATEHOUSE_SECRET_KEY, when
// it is set. Otherwise it fails when the base URL is https, and else reads, or generates once
// with mode 0600, DataDir/secret.key and logs a warning, so a developer's data stays readable
// across restarts. The key is never logged.
func loadSecretKey(cfg server.Config, log *slog.Logger) ([]byte, error) {
	if cfg.SecretKey != nil {
		return cfg.SecretKey, nil
	}
	if cfg.Secure() {
		return nil, &ConfigError{"GATEHOUSE_SECRET_KEY", "required when GATEHOUSE_BASE_URL is https (32 random bytes, base64: `openssl rand -base64 32`)"}
	}
	path := filepath.Join(cfg.DataDir, secretKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		key, err := decodeKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, &ConfigError{"GATEHOUSE_SECRET_KEY", fmt.Sprintf("unset, and %s is unreadable: %v", path, err)}
		}
		log.Warn("using the development secret key; set GATEHOUSE_SECRET_KEY in production", "file", path)
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	log.Warn("GATEHOUSE_SECRET_KEY is not set: generated a development secret key; "+
		"anyone who can read this file can decrypt the secrets and forge sessions — set GATEHOUSE_SECRET_KEY in production",
		"file", path)
	return key, nil
}

// decodeKey accepts 32 bytes as standard or URL base64 (padded or not) or as 64 hex digits.
func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == 32 {
			return b, nil
		}
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("want 32 random bytes, base64- or hex-encoded")
}
