package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
)

// Config is the server's configuration, read from GATEHOUSE_* environment variables.
type Config struct {
	// ListenAddr is the address the HTTP server listens on (GATEHOUSE_LISTEN_ADDR).
	ListenAddr string
	// MetricsAddr, when set, is the address of a second listener that serves only the
	// Prometheus metrics at /metrics (GATEHOUSE_METRICS_ADDR; off by default). Keep it off the
	// public network: the app's own listener never serves /metrics.
	MetricsAddr string
	// BaseURL is the public origin, without a trailing slash (GATEHOUSE_BASE_URL). It prefixes
	// problem type URIs, is the OpenAPI servers entry and the OAuth issuer, and is always a
	// trusted origin.
	BaseURL string
	// DatabaseURL is a postgres:// URL or an SQLite path or sqlite: URL (GATEHOUSE_DATABASE_URL).
	DatabaseURL string
	// DataDir holds the SQLite database and the development secret key (GATEHOUSE_DATA_DIR).
	DataDir string
	// TrustedOrigins are the product origins allowed for CORS and cookie-authenticated writes,
	// besides BaseURL (GATEHOUSE_TRUSTED_ORIGINS, comma-separated), normalised.
	TrustedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-For is believed (GATEHOUSE_TRUSTED_PROXIES,
	// comma-separated IPs or CIDRs).
	TrustedProxies []netip.Prefix
	// LogFormat is text or json (GATEHOUSE_LOG_FORMAT); LogLevel debug, info, warn or error
	// (GATEHOUSE_LOG_LEVEL).
	LogFormat string
	LogLevel  slog.Level
	// BodyLimit is the largest request body accepted, in bytes.
	BodyLimit int64
	// InvitationURL is the accept link of invitation messages, with {id} standing for the
	// invitation id (GATEHOUSE_INVITATION_URL); its origin must be the base URL or a trusted
	// origin. Empty means {base_url}/accept-invitation/{id}.
	InvitationURL string
	// SecretKey is the 32-byte master key (see LoadSecretKey); keys for cookies and sealing are
	// derived from it.
	SecretKey []byte
	// OldSecretKeys are earlier master keys (see LoadOldSecretKeys): secrets sealed under them
	// still open, and `gatehouse keys rewrap` re-seals them under SecretKey.
	OldSecretKeys [][]byte
	// ShutdownTimeout is how long a stopping server lets in-flight requests finish before it
	// closes their connections (GATEHOUSE_SHUTDOWN_TIMEOUT, a Go duration; default 20s).
	ShutdownTimeout time.Duration
	// PasswordHashConcurrency is how many argon2id password computations (19 MiB each) may run
	// at once, on sign-up, sign-in and change-password (GATEHOUSE_PASSWORD_HASH_CONCURRENCY).
	// 0 means derived from the cores and PasswordHashMemoryMB; see HashConcurrency.
	PasswordHashConcurrency int
	// PasswordHashMemoryMB is the memory, in MiB, that concurrent password hashing may hold
	// (GATEHOUSE_PASSWORD_HASH_MEMORY_MB, default DefaultPasswordHashMemoryMB); it sizes the
	// derived concurrency. 0 means the default.
	PasswordHashMemoryMB int
	// PasswordHashWait is how long a request waits for hashing capacity before it is answered
	// 503 with Retry-After (GATEHOUSE_PASSWORD_HASH_WAIT, a Go duration, default
	// DefaultPasswordHashWait). 0 means the default.
	PasswordHashWait time.Duration
	// SignUpLimit is how many sign-ups one client IP may attempt per SignUpWindow
	// (GATEHOUSE_SIGN_UP_LIMIT, default DefaultSignUpLimit); more answer 429 with Retry-After.
	// 0 means the default.
	SignUpLimit int
	// SessionIdleTimeout is how long a browser session lives unused
	// (GATEHOUSE_SESSION_IDLE_TIMEOUT, a Go duration, default 168h): get-session extends a
	// session to this from now once the extension gains the update age (a day, or a seventh of
	// a shorter idle timeout); zero means identity.DefaultSessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// SessionAbsoluteLifetime is how long a browser session lives after sign-in whatever its
	// activity (GATEHOUSE_SESSION_ABSOLUTE_LIFETIME, a Go duration, default 720h); zero means
	// identity.DefaultSessionAbsoluteLifetime.
	SessionAbsoluteLifetime time.Duration
	// StripeAPIBase is the Stripe API base URL the billing calls go to
	// (GATEHOUSE_STRIPE_API_BASE, an absolute http(s) URL; default https://api.stripe.com).
	// Tests point it at stripe-mock.
	StripeAPIBase string
	// StripeHTTPClient carries the Stripe API calls; nil means a client with a 30-second
	// timeout. Wiring, not an environment variable (tests count calls through it).
	StripeHTTPClient *http.Client
	// Social are the configured social sign-in providers, in button order (GitHub, Google):
	// those whose GATEHOUSE_<P>_CLIENT_ID and GATEHOUSE_<P>_CLIENT_SECRET are both set.
	Social []SocialConfig
}

// SocialConfig is one configured social sign-in provider (see SocialFromEnv).
type SocialConfig = identity.SocialSettings

// Defaults of the password-hashing and sign-up limits.
const (
	DefaultPasswordHashMemoryMB = 256
	DefaultPasswordHashWait     = identity.DefaultPasswordHashWait
	DefaultSignUpLimit          = identity.DefaultSignUpLimit
	// DefaultStripeAPIBase is Stripe's API.
	DefaultStripeAPIBase = "https://api.stripe.com"
	// SignUpWindow is the window of SignUpLimit.
	SignUpWindow = identity.SignUpWindow
)

// HashConcurrency is the number of password computations that may run at once:
// PasswordHashConcurrency when set, otherwise max(1, min(runtime.NumCPU(), memory / 19 MiB))
// with memory PasswordHashMemoryMB (default 256 MiB). argon2id here is single-threaded, so more
// computations than cores only add memory, not throughput. The heap they hold is at most
// HashConcurrency × 19 MiB (see identity.HashLimiter).
func (c Config) HashConcurrency() int {
	if c.PasswordHashConcurrency > 0 {
		return c.PasswordHashConcurrency
	}
	memory := c.PasswordHashMemoryMB
	if memory <= 0 {
		memory = DefaultPasswordHashMemoryMB
	}
	return max(1, min(runtime.NumCPU(), memory*1024/identity.HashMemoryKiB))
}

// Secure reports whether the base URL is https, which turns on HSTS, __Host- cookies and the
// requirement of an explicit secret key.
func (c Config) Secure() bool { return strings.HasPrefix(c.BaseURL, "https://") }

// ConfigError names the variable that is invalid; main prints it as one line and exits non-zero.
type ConfigError struct {
	Var    string
	Reason string
}

func (e *ConfigError) Error() string { return "invalid " + e.Var + ": " + e.Reason }

// ConfigFromEnv reads the configuration through getenv, applying defaults that serve a
// developer: :8080, http://localhost:8080, SQLite at ./data/gatehouse.db. It returns a
// *ConfigError for the first invalid variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	cfg := Config{
		ListenAddr: get("GATEHOUSE_LISTEN_ADDR", ":8080"),
		DataDir:    get("GATEHOUSE_DATA_DIR", "./data"),
		BodyLimit:  1 << 20,
	}
	if _, _, err := net.SplitHostPort(cfg.ListenAddr); err != nil {
		return cfg, &ConfigError{"GATEHOUSE_LISTEN_ADDR", "want host:port, for example :8080"}
	}
	if cfg.MetricsAddr = get("GATEHOUSE_METRICS_ADDR", ""); cfg.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.MetricsAddr); err != nil {
			return cfg, &ConfigError{"GATEHOUSE_METRICS_ADDR", "want host:port, for example 127.0.0.1:9090"}
		}
	}
	base, err := NormalizeOrigin(get("GATEHOUSE_BASE_URL", "http://localhost:8080"))
	if err != nil {
		return cfg, &ConfigError{"GATEHOUSE_BASE_URL", err.Error()}
	}
	cfg.BaseURL = base
	cfg.DatabaseURL = get("GATEHOUSE_DATABASE_URL", "sqlite:"+filepath.Join(cfg.DataDir, "gatehouse.db"))

	for _, o := range splitList(getenv("GATEHOUSE_TRUSTED_ORIGINS")) {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return cfg, &ConfigError{"GATEHOUSE_TRUSTED_ORIGINS", fmt.Sprintf("%q: %v", o, err)}
		}
		if n != cfg.BaseURL {
			cfg.TrustedOrigins = append(cfg.TrustedOrigins, n)
		}
	}
	for _, p := range splitList(getenv("GATEHOUSE_TRUSTED_PROXIES")) {
		prefix, err := parsePrefix(p)
		if err != nil {
			return cfg, &ConfigError{"GATEHOUSE_TRUSTED_PROXIES", fmt.Sprintf("%q is not an IP address or CIDR", p)}
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, prefix)
	}
	if v := get("GATEHOUSE_INVITATION_URL", ""); v != "" {
		u, err := url.Parse(v)
		if err != nil || !strings.Contains(v, "{id}") {
			return cfg, &ConfigError{"GATEHOUSE_INVITATION_URL", "want an absolute URL containing {id}"}
		}
		origin, err := NormalizeOrigin(u.Scheme + "://" + u.Host)
		if err != nil || (origin != cfg.BaseURL && !slices.Contains(cfg.TrustedOrigins, origin)) {
			return cfg, &ConfigError{"GATEHOUSE_INVITATION_URL", "its origin must be GATEHOUSE_BASE_URL or one of GATEHOUSE_TRUSTED_ORIGINS"}
		}
		cfg.InvitationURL = v
	}
	for _, v := range []struct {
		name string
		dst  *int
		def  int
		min  int
	}{
		{"GATEHOUSE_PASSWORD_HASH_CONCURRENCY", &cfg.PasswordHashConcurrency, 0, 1},
		{"GATEHOUSE_PASSWORD_HASH_MEMORY_MB", &cfg.PasswordHashMemoryMB, DefaultPasswordHashMemoryMB, 19},
		{"GATEHOUSE_SIGN_UP_LIMIT", &cfg.SignUpLimit, DefaultSignUpLimit, 1},
	} {
		*v.dst = v.def
		if raw := get(v.name, ""); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < v.min {
				return cfg, &ConfigError{v.name, fmt.Sprintf("want a whole number of at least %d", v.min)}
			}
			*v.dst = n
		}
	}
	cfg.StripeAPIBase = DefaultStripeAPIBase
	if v := get("GATEHOUSE_STRIPE_API_BASE", ""); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return cfg, &ConfigError{"GATEHOUSE_STRIPE_API_BASE", "want an absolute http(s) URL such as https://api.stripe.com"}
		}
		cfg.StripeAPIBase = strings.TrimSuffix(v, "/")
	}
	cfg.PasswordHashWait = DefaultPasswordHashWait
	if raw := get("GATEHOUSE_PASSWORD_HASH_WAIT", ""); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 || d > time.Minute {
			return cfg, &ConfigError{"GATEHOUSE_PASSWORD_HASH_WAIT", "want a duration such as 2s, above 0 and at most 1m"}
		}
		cfg.PasswordHashWait = d
	}
	switch cfg.LogFormat = get("GATEHOUSE_LOG_FORMAT", "text"); cfg.LogFormat {
	case "text", "json":
	default:
		return cfg, &ConfigError{"GATEHOUSE_LOG_FORMAT", "want text or json"}
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(get("GATEHOUSE_LOG_LEVEL", "info"))); err != nil {
		return cfg, &ConfigError{"GATEHOUSE_LOG_LEVEL", "want debug, info, warn or error"}
	}
	if cfg.ShutdownTimeout, err = time.ParseDuration(get("GATEHOUSE_SHUTDOWN_TIMEOUT", "20s")); err != nil || cfg.ShutdownTimeout <= 0 {
		return cfg, &ConfigError{"GATEHOUSE_SHUTDOWN_TIMEOUT", "want a positive duration such as 20s"}
	}
	for _, d := range []struct {
		name string
		def  time.Duration
		dst  *time.Duration
	}{
		{"GATEHOUSE_SESSION_IDLE_TIMEOUT", identity.DefaultSessionIdleTimeout, &cfg.SessionIdleTimeout},
		{"GATEHOUSE_SESSION_ABSOLUTE_LIFETIME", identity.DefaultSessionAbsoluteLifetime, &cfg.SessionAbsoluteLifetime},
	} {
		v, err := parseLifetime(get(d.name, ""), d.def)
		if err != nil {
			return cfg, &ConfigError{d.name, err.Error()}
		}
		*d.dst = v
	}
	if cfg.Social, err = SocialFromEnv(get); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// SocialFromEnv reads the social sign-in providers. A provider is on when both
// GATEHOUSE_<P>_CLIENT_ID and GATEHOUSE_<P>_CLIENT_SECRET are set (P is GITHUB or GOOGLE);
// one without the other is a *ConfigError naming the missing variable. Its endpoints default
// to the real provider's and may be overridden, each an absolute http(s) URL:
// GATEHOUSE_GITHUB_AUTH_URL, GATEHOUSE_GITHUB_TOKEN_URL, GATEHOUSE_GITHUB_API_URL;
// GATEHOUSE_GOOGLE_AUTH_URL, GATEHOUSE_GOOGLE_TOKEN_URL, GATEHOUSE_GOOGLE_ISSUER,
// GATEHOUSE_GOOGLE_JWKS_URL.
func SocialFromEnv(get func(name, def string) string) ([]SocialConfig, error) {
	var out []SocialConfig
	for _, p := range []struct {
		id, env string
		urls    []string
	}{
		{identity.GitHub, "GITHUB", []string{"AUTH_URL", "TOKEN_URL", "API_URL"}},
		{identity.Google, "GOOGLE", []string{"AUTH_URL", "TOKEN_URL", "ISSUER", "JWKS_URL"}},
	} {
		idVar, secretVar := "GATEHOUSE_"+p.env+"_CLIENT_ID", "GATEHOUSE_"+p.env+"_CLIENT_SECRET"
		id, secret := get(idVar, ""), get(secretVar, "")
		switch {
		case id == "" && secret == "":
			continue
		case id == "":
			return nil, &ConfigError{idVar, "required when " + secretVar + " is set"}
		case secret == "":
			return nil, &ConfigError{secretVar, "required when " + idVar + " is set"}
		}
		c := SocialConfig{ID: p.id, ClientID: id, ClientSecret: secret}
		for _, name := range p.urls {
			v := get("GATEHOUSE_"+p.env+"_"+name, "")
			if v == "" {
				continue
			}
			if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, &ConfigError{"GATEHOUSE_" + p.env + "_" + name, "want an absolute http(s) URL"}
			}
			switch name {
			case "AUTH_URL":
				c.Endpoints.AuthURL = v
			case "TOKEN_URL":
				c.Endpoints.TokenURL = v
			case "API_URL":
				c.Endpoints.APIURL = v
			case "ISSUER":
				c.Endpoints.Issuer = v
			case "JWKS_URL":
				c.Endpoints.JWKSURL = v
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// parseLifetime parses a session lifetime: a Go duration (such as 720h or 90m) of at least a
// minute; "" is def.
func parseLifetime(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		return 0, errors.New("want a Go duration of at least 1m, for example 720h")
	}
	return d, nil
}

// NormalizeOrigin returns the origin scheme://host[:port] of an absolute http(s) URL, lower-cased
// and without a default port. Anything else — "null", a path, a query, credentials — is an error,
// so two origins are the same exactly when their normalised strings are equal.
func NormalizeOrigin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", errors.New("want an absolute http(s) origin such as https://app.example.com")
	}
	if u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", errors.New("want an origin without path, query or credentials")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// SecretKeyFile is the development key's file name inside DataDir.
const SecretKeyFile = "secret.key"

// LoadSecretKey returns the 32-byte master key from GATEHOUSE_SECRET_KEY (base64 or hex). When
// it is unset and the base URL is https it fails; otherwise it reads, or generates once with mode
// 0600, DataDir/secret.key and logs a warning, so a developer's data stays readable across
// restarts. The key is never logged.
func LoadSecretKey(cfg Config, getenv func(string) string, log *slog.Logger) ([]byte, error) {
	if v := strings.TrimSpace(getenv("GATEHOUSE_SECRET_KEY")); v != "" {
		key, err := decodeKey(v)
		if err != nil {
			return nil, &ConfigError{"GATEHOUSE_SECRET_KEY", err.Error()}
		}
		return key, nil
	}
	if cfg.Secure() {
		return nil, &ConfigError{"GATEHOUSE_SECRET_KEY", "required when GATEHOUSE_BASE_URL is https (32 random bytes, base64: `openssl rand -base64 32`)"}
	}
	path := filepath.Join(cfg.DataDir, SecretKeyFile)
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

// LoadOldSecretKeys returns the earlier master keys of GATEHOUSE_SECRET_KEYS_OLD: a
// comma-separated list, each key 32 bytes in base64 or hex like GATEHOUSE_SECRET_KEY, kept
// after a rotation so that secrets sealed before it still open. Unset is no keys. An invalid
// entry is a *ConfigError naming the variable and the entry's position, never its value.
func LoadOldSecretKeys(getenv func(string) string) ([][]byte, error) {
	var keys [][]byte
	for i, v := range splitList(getenv("GATEHOUSE_SECRET_KEYS_OLD")) {
		key, err := decodeKey(v)
		if err != nil {
			return nil, &ConfigError{"GATEHOUSE_SECRET_KEYS_OLD", fmt.Sprintf("key %d: %v", i+1, err)}
		}
		keys = append(keys, key)
	}
	return keys, nil
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
