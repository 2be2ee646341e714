package server

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
)

// Config is the server's configuration. Package main reads it from the GATEHOUSE_* environment
// variables (its config.go, one table of them); the server itself reads no environment.
type Config struct {
	// Build names the binary (version, commit, Go release): not configuration, stamped at
	// build time and set by main. GET /api/v1/health reports the fields that are set.
	Build BuildInfo
	// ListenAddr is the address the HTTP server listens on (GATEHOUSE_LISTEN_ADDR).
	ListenAddr string
	// MetricsAddr, when set, is the address of a second listener that serves only the
	// Prometheus metrics at /metrics (GATEHOUSE_METRICS_ADDR; off by default). Keep it off the
	// public network: the app's own listener never serves /metrics.
	MetricsAddr string
	// WebhookAllowPrivate lets webhook endpoints use http and private addresses
	// (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE; development and tests).
	WebhookAllowPrivate bool
	// WebhookRetrySchedule is the wait after each failed webhook attempt
	// (GATEHOUSE_WEBHOOK_RETRY_SCHEDULE; webhook.DefaultSchedule when empty).
	WebhookRetrySchedule []time.Duration
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
	// SecretKey is the 32-byte master key (GATEHOUSE_SECRET_KEY, or the development key file);
	// keys for cookies and sealing are derived from it.
	SecretKey []byte
	// OldSecretKeys are earlier master keys (GATEHOUSE_SECRET_KEYS_OLD): secrets sealed under
	// them still open, and `gatehouse keys rewrap` re-seals them under SecretKey.
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
	// SignUp says who may create an account (GATEHOUSE_SIGN_UP): SignUpOpen (the default, also
	// when empty), SignUpInviteOnly or SignUpClosed.
	SignUp SignUpMode
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
	// SMTP is the mail server (GATEHOUSE_SMTP_URL). Nil is development mode: every message is
	// logged, with its link, instead of sent.
	SMTP *mail.SMTPConfig
	// MailFrom is the From of every message (GATEHOUSE_MAIL_FROM), required with SMTP.
	MailFrom string
	// SMTPTLSConfig, when not nil, replaces the SMTP connection's TLS settings. Wiring, not an
	// environment variable (tests trust their SMTP server's certificate with it).
	SMTPTLSConfig *tls.Config
	// RequireEmailVerification (GATEHOUSE_REQUIRE_EMAIL_VERIFICATION) keeps users whose address
	// is not verified from signing in with a password: sign-up starts no session, and sign-in
	// answers 403 EMAIL_NOT_VERIFIED and mails a fresh link.
	RequireEmailVerification bool
	// Brand is how messages and the hosted account pages present the product
	// (GATEHOUSE_BRAND_NAME, GATEHOUSE_BRAND_LOGO_URL, GATEHOUSE_BRAND_COLOR).
	Brand mail.Brand
}

// SocialConfig is one configured social sign-in provider (see SocialFromEnv).
type SocialConfig = identity.SocialSettings

// Defaults of the password-hashing and sign-up limits.
const (
	DefaultPasswordHashMemoryMB = 256
	DefaultPasswordHashWait     = identity.DefaultPasswordHashWait
	DefaultSignUpLimit          = identity.DefaultSignUpLimit
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

// BuildInfo describes the running binary. Empty fields are unknown.
type BuildInfo struct {
	Version, Commit, GoVersion string
}
