package server

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigDefaults(t *testing.T) {
	cfg, err := ConfigFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != ":8080" || cfg.BaseURL != "http://localhost:8080" ||
		cfg.DatabaseURL != "sqlite:data/gatehouse.db" || cfg.Secure() {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"GATEHOUSE_BASE_URL":        {"GATEHOUSE_BASE_URL": "gatehouse.example.com"},
		"GATEHOUSE_LISTEN_ADDR":     {"GATEHOUSE_LISTEN_ADDR": "8080"},
		"GATEHOUSE_TRUSTED_ORIGINS": {"GATEHOUSE_TRUSTED_ORIGINS": "https://ok.example.com, null"},
		"GATEHOUSE_TRUSTED_PROXIES": {"GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/33"},
		"GATEHOUSE_LOG_FORMAT":      {"GATEHOUSE_LOG_FORMAT": "xml"},
		"GATEHOUSE_INVITATION_URL":  {"GATEHOUSE_INVITATION_URL": "https://evil.example/join/{id}"},
		"GATEHOUSE_LOG_LEVEL":       {"GATEHOUSE_LOG_LEVEL": "loud"},
	}
	for name, env := range cases {
		_, err := ConfigFromEnv(envOf(env))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != name {
			t.Errorf("%v: err = %v, want a ConfigError naming %s", env, err, name)
		}
	}
}

func TestNormalizeOrigin(t *testing.T) {
	good := map[string]string{
		"https://App.Example.com":     "https://app.example.com",
		"https://app.example.com/":    "https://app.example.com",
		"https://app.example.com:443": "https://app.example.com",
		"http://localhost:8080":       "http://localhost:8080",
		"http://[::1]:8080":           "http://[::1]:8080",
	}
	for in, want := range good {
		if got, err := NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"null", "", "app.example.com", "ftp://x.example.com", "https://x.example.com/app",
		"https://user@x.example.com", "https://x.example.com?q=1", "javascript:alert(1)"} {
		if got, err := NormalizeOrigin(in); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", in, got)
		}
	}
}

func TestLoadSecretKey(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	cfg := Config{BaseURL: "http://localhost:8080", DataDir: filepath.Join(dir, "data")}

	k1, err := LoadSecretKey(cfg, envOf(nil), log)
	if err != nil || len(k1) != 32 {
		t.Fatalf("generated key: %d bytes, %v", len(k1), err)
	}
	info, err := os.Stat(filepath.Join(cfg.DataDir, SecretKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}
	k2, err := LoadSecretKey(cfg, envOf(nil), log)
	if err != nil || string(k1) != string(k2) {
		t.Fatal("the development key is not reused across starts")
	}

	explicit := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, base64
	k3, err := LoadSecretKey(cfg, envOf(map[string]string{"GATEHOUSE_SECRET_KEY": explicit}), log)
	if err != nil || string(k3) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("explicit key = %q, %v", k3, err)
	}

	var ce *ConfigError
	if _, err := LoadSecretKey(cfg, envOf(map[string]string{"GATEHOUSE_SECRET_KEY": "c2hvcnQ="}), log); !errors.As(err, &ce) {
		t.Errorf("short key accepted: %v", err)
	}
	secure := Config{BaseURL: "https://gatehouse.example.com", DataDir: cfg.DataDir}
	if _, err := LoadSecretKey(secure, envOf(nil), log); !errors.As(err, &ce) || ce.Var != "GATEHOUSE_SECRET_KEY" {
		t.Errorf("https without GATEHOUSE_SECRET_KEY: err = %v, want a ConfigError", err)
	}
}

func TestInvitationURL(t *testing.T) {
	cfg, err := ConfigFromEnv(envOf(map[string]string{
		"GATEHOUSE_TRUSTED_ORIGINS": "https://app.example.com",
		"GATEHOUSE_INVITATION_URL":  "https://app.example.com/join/{id}?from=mail",
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: cfg}
	if got := s.invitationAcceptURL("inv_123"); got != "https://app.example.com/join/inv_123?from=mail" {
		t.Fatalf("accept URL = %q", got)
	}
	if got := (&Server{cfg: Config{BaseURL: "http://localhost:8080"}}).invitationAcceptURL("inv_1"); got != "http://localhost:8080/accept-invitation/inv_1" {
		t.Fatalf("default accept URL = %q", got)
	}
	if _, err := ConfigFromEnv(envOf(map[string]string{"GATEHOUSE_INVITATION_URL": "http://localhost:8080/join"})); err == nil {
		t.Fatal("a template without {id} was accepted")
	}
}
