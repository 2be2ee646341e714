package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// wantConfigError fails unless err is a *ConfigError naming name.
func wantConfigError(t *testing.T, err error, name, context string) *ConfigError {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != name {
		t.Errorf("%s: err = %v, want a ConfigError naming %s", context, err, name)
		return nil
	}
	return ce
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := configFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != ":8080" || cfg.BaseURL != "http://localhost:8080" || cfg.DataDir != "./data" ||
		cfg.DatabaseURL != "sqlite:data/gatehouse.db" || cfg.Secure() || cfg.SecretKey != nil || cfg.OldSecretKeys != nil ||
		cfg.TrustedOrigins != nil || cfg.TrustedProxies != nil || cfg.InvitationURL != "" || cfg.MetricsAddr != "" ||
		cfg.LogFormat != "text" || cfg.LogLevel != slog.LevelInfo || cfg.ShutdownTimeout != 20*time.Second ||
		cfg.StripeAPIBase != "https://api.stripe.com" || cfg.Social != nil || cfg.BodyLimit != 1<<20 {
		t.Fatalf("defaults = %+v", cfg)
	}
	// The table's defaults are the ones the packages fall back on for a zero value.
	if cfg.SigningKeyPublishDelay != oauth.DefaultPublishDelay {
		t.Errorf("publish delay %v, want oauth.DefaultPublishDelay %v", cfg.SigningKeyPublishDelay, oauth.DefaultPublishDelay)
	}
	if cfg.SigningAlg != oauth.DefaultSigningAlgorithm {
		t.Errorf("signing algorithm %q, want oauth.DefaultSigningAlgorithm %q", cfg.SigningAlg, oauth.DefaultSigningAlgorithm)
	}
	if cfg.github.Endpoints != identity.GitHubEndpoints || cfg.google.Endpoints != identity.GoogleEndpoints {
		t.Errorf("social endpoints %+v, %+v; want the real providers'", cfg.github.Endpoints, cfg.google.Endpoints)
	}
	// GATEHOUSE_DATABASE_URL's default follows GATEHOUSE_DATA_DIR.
	if cfg, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_DATA_DIR": "/var/lib/gatehouse"})); err != nil ||
		cfg.DatabaseURL != "sqlite:/var/lib/gatehouse/gatehouse.db" {
		t.Errorf("database URL under another data dir: %q, %v", cfg.DatabaseURL, err)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		"GATEHOUSE_BASE_URL":                  {"GATEHOUSE_BASE_URL": "gatehouse.example.com"},
		"GATEHOUSE_LISTEN_ADDR":               {"GATEHOUSE_LISTEN_ADDR": "8080"},
		"GATEHOUSE_METRICS_ADDR":              {"GATEHOUSE_METRICS_ADDR": "9090"},
		"GATEHOUSE_TRUSTED_ORIGINS":           {"GATEHOUSE_TRUSTED_ORIGINS": "https://ok.example.com, null"},
		"GATEHOUSE_TRUSTED_PROXIES":           {"GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/33"},
		"GATEHOUSE_LOG_FORMAT":                {"GATEHOUSE_LOG_FORMAT": "xml"},
		"GATEHOUSE_INVITATION_URL":            {"GATEHOUSE_INVITATION_URL": "https://evil.example/join/{id}"},
		"GATEHOUSE_LOG_LEVEL":                 {"GATEHOUSE_LOG_LEVEL": "loud"},
		"GATEHOUSE_SHUTDOWN_TIMEOUT":          {"GATEHOUSE_SHUTDOWN_TIMEOUT": "0s"},
		"GATEHOUSE_STRIPE_API_BASE":           {"GATEHOUSE_STRIPE_API_BASE": "api.stripe.com"},
		"GATEHOUSE_SECRET_KEY":                {"GATEHOUSE_SECRET_KEY": "c2hvcnQ="},
		"GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY": {"GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY": "-1h"},
		"GATEHOUSE_GITHUB_TOKEN_URL":          {"GATEHOUSE_GITHUB_TOKEN_URL": "github.com/login/oauth/access_token"},
		"GATEHOUSE_SIGNING_ALG":               {"GATEHOUSE_SIGNING_ALG": "HS256"},
	}
	for name, env := range cases {
		_, err := configFromEnv(envOf(env))
		wantConfigError(t, err, name, name+"="+env[name])
	}
}

func TestConfigSessionLifetimes(t *testing.T) {
	cfg, err := configFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionIdleTimeout != 168*time.Hour || cfg.SessionAbsoluteLifetime != 720*time.Hour {
		t.Errorf("defaults: idle %v, absolute %v; want 168h and 720h", cfg.SessionIdleTimeout, cfg.SessionAbsoluteLifetime)
	}
	cfg, err = configFromEnv(envOf(map[string]string{
		"GATEHOUSE_SESSION_IDLE_TIMEOUT": "30m", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": " 12h ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionIdleTimeout != 30*time.Minute || cfg.SessionAbsoluteLifetime != 12*time.Hour {
		t.Errorf("set: idle %v, absolute %v; want 30m and 12h", cfg.SessionIdleTimeout, cfg.SessionAbsoluteLifetime)
	}
	for _, name := range []string{"GATEHOUSE_SESSION_IDLE_TIMEOUT", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME"} {
		for _, bad := range []string{"30d", "7", "-1h", "59s", "forever"} {
			_, err := configFromEnv(envOf(map[string]string{name: bad}))
			if wantConfigError(t, err, name, name+"="+bad) == nil {
				continue
			}
			if want := "invalid " + name + ": want a Go duration of at least 1m, for example 720h"; err.Error() != want {
				t.Errorf("%s=%q: %q, want %q", name, bad, err, want)
			}
		}
	}
}

func TestConfigPasswordHashingAndSignUpLimit(t *testing.T) {
	cfg, err := configFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PasswordHashConcurrency != 0 || cfg.PasswordHashMemoryMB != server.DefaultPasswordHashMemoryMB ||
		cfg.PasswordHashWait != server.DefaultPasswordHashWait || cfg.SignUpLimit != server.DefaultSignUpLimit {
		t.Errorf("defaults = %d, %d MiB, %v, %d", cfg.PasswordHashConcurrency, cfg.PasswordHashMemoryMB, cfg.PasswordHashWait, cfg.SignUpLimit)
	}
	// Derived: min(cores, 256 MiB / 19 MiB = 13), at least 1.
	if got, want := cfg.HashConcurrency(), max(1, min(runtime.NumCPU(), 13)); got != want {
		t.Errorf("HashConcurrency() = %d, want %d", got, want)
	}
	cfg, err = configFromEnv(envOf(map[string]string{"GATEHOUSE_PASSWORD_HASH_MEMORY_MB": "19"}))
	if err != nil || cfg.HashConcurrency() != 1 {
		t.Errorf("19 MiB: %d, %v; want 1", cfg.HashConcurrency(), err)
	}
	cfg, err = configFromEnv(envOf(map[string]string{"GATEHOUSE_PASSWORD_HASH_CONCURRENCY": "7",
		"GATEHOUSE_PASSWORD_HASH_WAIT": "500ms", "GATEHOUSE_SIGN_UP_LIMIT": "3"}))
	if err != nil || cfg.HashConcurrency() != 7 || cfg.PasswordHashWait != 500*time.Millisecond || cfg.SignUpLimit != 3 {
		t.Errorf("explicit: %+v, %v", cfg, err)
	}
	for name, value := range map[string]string{
		"GATEHOUSE_PASSWORD_HASH_CONCURRENCY": "0",
		"GATEHOUSE_PASSWORD_HASH_MEMORY_MB":   "18",
		"GATEHOUSE_PASSWORD_HASH_WAIT":        "2",
		"GATEHOUSE_SIGN_UP_LIMIT":             "ten",
	} {
		_, err := configFromEnv(envOf(map[string]string{name: value}))
		wantConfigError(t, err, name, name+"="+value)
	}
}

func TestConfigInvitationURL(t *testing.T) {
	cfg, err := configFromEnv(envOf(map[string]string{
		"GATEHOUSE_TRUSTED_ORIGINS": "https://app.example.com",
		"GATEHOUSE_INVITATION_URL":  "https://app.example.com/join/{id}?from=mail",
	}))
	if err != nil || cfg.InvitationURL != "https://app.example.com/join/{id}?from=mail" {
		t.Fatalf("invitation URL = %q, %v", cfg.InvitationURL, err)
	}
	if _, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_INVITATION_URL": "http://localhost:8080/join"})); err == nil {
		t.Fatal("a template without {id} was accepted")
	}
}

func TestConfigTrustedOriginsAndProxies(t *testing.T) {
	cfg, err := configFromEnv(envOf(map[string]string{
		"GATEHOUSE_BASE_URL":        "https://gatehouse.example.com",
		"GATEHOUSE_TRUSTED_ORIGINS": " https://App.Example.com ,, https://gatehouse.example.com:443, http://localhost:5173",
		"GATEHOUSE_TRUSTED_PROXIES": "10.0.0.7/8, 192.0.2.1, ::ffff:198.51.100.2",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.TrustedOrigins, " "); got != "https://app.example.com http://localhost:5173" {
		t.Errorf("trusted origins %q (normalised, without the base URL)", got)
	}
	var proxies []string
	for _, p := range cfg.TrustedProxies {
		proxies = append(proxies, p.String())
	}
	if got := strings.Join(proxies, " "); got != "10.0.0.0/8 192.0.2.1/32 198.51.100.2/32" {
		t.Errorf("trusted proxies %q", got)
	}
}

func TestConfigSocial(t *testing.T) {
	cfg, err := configFromEnv(envOf(map[string]string{
		"GATEHOUSE_GOOGLE_CLIENT_ID": "g-id", "GATEHOUSE_GOOGLE_CLIENT_SECRET": "g-secret",
		"GATEHOUSE_GOOGLE_ISSUER":    "http://127.0.0.1:9999",
		"GATEHOUSE_GITHUB_CLIENT_ID": "gh-id", "GATEHOUSE_GITHUB_CLIENT_SECRET": "gh-secret",
	}))
	if err != nil {
		t.Fatal(err)
	}
	google := identity.GoogleEndpoints
	google.Issuer = "http://127.0.0.1:9999"
	want := []server.SocialConfig{
		{ID: identity.GitHub, ClientID: "gh-id", ClientSecret: "gh-secret", Endpoints: identity.GitHubEndpoints},
		{ID: identity.Google, ClientID: "g-id", ClientSecret: "g-secret", Endpoints: google},
	}
	if len(cfg.Social) != 2 || cfg.Social[0] != want[0] || cfg.Social[1] != want[1] {
		t.Errorf("social = %+v, want %+v", cfg.Social, want)
	}
	if cfg, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_GITHUB_CLIENT_ID": "a", "GATEHOUSE_GITHUB_CLIENT_SECRET": "b"})); err != nil ||
		len(cfg.Social) != 1 || cfg.Social[0].ID != identity.GitHub {
		t.Errorf("GitHub alone: %+v, %v", cfg.Social, err)
	}
}

func TestLoadSecretKey(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	cfg := server.Config{BaseURL: "http://localhost:8080", DataDir: filepath.Join(dir, "data")}

	k1, err := loadSecretKey(cfg, log)
	if err != nil || len(k1) != 32 {
		t.Fatalf("generated key: %d bytes, %v", len(k1), err)
	}
	info, err := os.Stat(filepath.Join(cfg.DataDir, secretKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}
	k2, err := loadSecretKey(cfg, log)
	if err != nil || string(k1) != string(k2) {
		t.Fatal("the development key is not reused across starts")
	}

	explicit := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, base64
	set, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_SECRET_KEY": explicit, "GATEHOUSE_DATA_DIR": cfg.DataDir}))
	if err != nil {
		t.Fatal(err)
	}
	k3, err := loadSecretKey(set.Config, log)
	if err != nil || string(k3) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("explicit key = %q, %v", k3, err)
	}

	_, err = configFromEnv(envOf(map[string]string{"GATEHOUSE_SECRET_KEY": "c2hvcnQ="}))
	wantConfigError(t, err, "GATEHOUSE_SECRET_KEY", "short key")
	secure := server.Config{BaseURL: "https://gatehouse.example.com", DataDir: cfg.DataDir}
	_, err = loadSecretKey(secure, log)
	wantConfigError(t, err, "GATEHOUSE_SECRET_KEY", "https without GATEHOUSE_SECRET_KEY")
}

func TestConfigOldSecretKeys(t *testing.T) {
	b64 := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // "0123456789abcdef" × 2
	hexKey := strings.Repeat("ab", 32)
	old := func(v string) (settings, error) {
		return configFromEnv(envOf(map[string]string{"GATEHOUSE_SECRET_KEYS_OLD": v}))
	}
	cfg, err := old(" " + b64 + " ,, " + hexKey + ",")
	if keys := cfg.OldSecretKeys; err != nil || len(keys) != 2 || string(keys[0]) != "0123456789abcdef0123456789abcdef" || keys[1][0] != 0xab {
		t.Fatalf("old keys = %q, %v", keys, err)
	}
	if cfg, err := old(""); err != nil || cfg.OldSecretKeys != nil {
		t.Fatalf("unset: %q, %v", cfg.OldSecretKeys, err)
	}
	_, err = old(b64 + ",c2VjcmV0LXRvby1zaG9ydA==")
	if ce := wantConfigError(t, err, "GATEHOUSE_SECRET_KEYS_OLD", "a short second key"); ce != nil &&
		(!strings.Contains(ce.Reason, "key 2") || strings.Contains(err.Error(), "c2VjcmV0")) {
		t.Fatalf("invalid key: %v", err)
	}
}

// TestBaseURLPortMismatch: the start-up warning is due when the base URL names a loopback host
// on another port than the one the server listens on, and only then (a base URL elsewhere is
// a proxy's or a load balancer's, which may map ports as it likes).
func TestBaseURLPortMismatch(t *testing.T) {
	for _, c := range []struct {
		baseURL string
		port    int
		want    bool
	}{
		{"http://localhost:8080", 3000, true},
		{"http://localhost:8080", 8080, false},
		{"http://127.0.0.1:8080", 9090, true},
		{"http://127.1.2.3:8080", 9090, true},
		{"http://[::1]:8080", 8081, true},
		{"http://LOCALHOST:8080", 8080, false},
		{"http://localhost", 8080, true},
		{"http://localhost", 80, false},
		{"https://localhost", 443, false},
		{"https://localhost", 8443, true},
		{"https://gatehouse.example.com", 8080, false},
		{"http://192.168.1.5:8080", 3000, false},
	} {
		if got := baseURLPortMismatch(c.baseURL, c.port); got != c.want {
			t.Errorf("baseURLPortMismatch(%q, %d) = %v, want %v", c.baseURL, c.port, got, c.want)
		}
	}
}
