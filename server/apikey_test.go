package server

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// apiKeyShape is the spec's ApiKeySecret pattern.
var apiKeyShape = regexp.MustCompile(`^svc_sk_[A-Za-z0-9]{12}_[A-Za-z0-9_-]{43}$`)

// TestAPIKeyPepper: the server derives its API-key pepper from the master key (never the key
// itself, never the session-cookie key).
func TestAPIKeyPepper(t *testing.T) {
	cfg := testConfig()
	srv, err := newServer(cfg, nil, slog.New(slog.DiscardHandler), testDeps{})
	if err != nil {
		t.Fatal(err)
	}
	if want := seal.DeriveKey(cfg.SecretKey, "api-key"); !bytes.Equal(srv.apiKeyPepper, want) ||
		bytes.Equal(srv.apiKeyPepper, cfg.SecretKey) || bytes.Equal(srv.apiKeyPepper, srv.cookieKey) {
		t.Errorf("apiKeyPepper = %x, want DeriveKey(secret key, \"api-key\") = %x", srv.apiKeyPepper, want)
	}
}
