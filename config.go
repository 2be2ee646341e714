package main

// The configuration. Every GATEHOUSE_* variable the binary reads is one row of envVars: its
// name, its default as docs/configuration.md documents it, one line on what it sets, and how its
// value is parsed. The table of docs/configuration.md is this table (TestConfigTableInDocs holds
// the names and defaults equal), and no other code reads the environment (TestConfigVariablesInTable).

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
)

// ConfigError names the variable (or the command's flag) that is invalid; run prints it as
// one line and exits 2.
type ConfigError struct {
	Var    string
	Reason string
}

func (e *ConfigError) Error() string { return "invalid " + e.Var + ": " + e.Reason }

// settings is what the environment configures: the server's Config, and what only the
// commands read.
type settings struct {
	server.Config
	// SigningKeyPublishDelay is how long `keys rotate-signing` publishes the next token
	// signing key before it signs.
	SigningKeyPublishDelay time.Duration
	// SigningAlg is the algorithm of new token signing keys (GATEHOUSE_SIGNING_ALG): the first
	// key the server creates and the next key `keys rotate-signing` creates.
	SigningAlg string
	// SigningAlgs are further algorithms offered beside SigningAlg (GATEHOUSE_SIGNING_ALGS):
	// each keeps an active key, and clients may register it as idTokenSignedResponseAlg.
	SigningAlgs []string
	// UsageRetention (0: keep forever) and UsageReplayWindow are the store's
	// WithUsageRetention and WithUsageReplayWindow.
	UsageRetention, UsageReplayWindow time.Duration
	// ReadURLs and ReadMaxLag are the store's WithReadReplicas (docs/read-replicas.md).
	ReadURLs   []string
	ReadMaxLag time.Duration
	// github and google collect a social provider's variables; configFromEnv puts those with a
	// client id (and so a secret) into Config.Social, in this order.
	github, google server.SocialConfig
}

// envVar is one row of the configuration table.
type envVar struct {
	// Name is the variable.
	Name string
	// Default is the value the variable takes when it is unset or blank, parsed like a set
	// value. Empty when unset means something else, which Unset describes.
	Default string
	// Unset is, when there is no Default, what leaving the variable unset means, as the
	// table of docs/configuration.md shows it (Markdown): "none", "off", or how the value is derived.
	Unset string
	// Doc is one line on what the variable sets.
	Doc string
	// Parse sets the variable's part of s from v, its value with surrounding blanks removed
	// (Default when unset; "" when unset without a Default). An error is the reason v is
	// invalid; a *ConfigError is returned as it is, naming its own variable.
	Parse func(s *settings, v string) error
}

// documented is the default as the table of docs/configuration.md shows it.
func (e envVar) documented() string {
	if e.Default != "" {
		return "`" + e.Default + "`"
	}
	return e.Unset
}

// envVars is the configuration table, in the order of docs/configuration.md. A row may read the fields that
// rows above it have set.
var envVars = []envVar{
	{Name: "GATEHOUSE_LISTEN_ADDR", Default: ":8080",
		Doc: "Address the HTTP server listens on (host:port).",
		Parse: func(s *settings, v string) (err error) {
			s.ListenAddr, err = hostPort(v, ":8080")
			return err
		}},
	{Name: "GATEHOUSE_BASE_URL", Default: "http://localhost:8080",
		Doc: "Public origin: problem type URIs, the OpenAPI servers entry, the OAuth issuer; https turns on HSTS and __Host- cookies.",
		Parse: func(s *settings, v string) (err error) {
			s.BaseURL, err = server.NormalizeOrigin(v)
			return err
		}},
	{Name: "GATEHOUSE_DATA_DIR", Default: "./data",
		Doc:   "Directory of the SQLite database and the development secret key.",
		Parse: func(s *settings, v string) error { s.DataDir = v; return nil }},
	{Name: "GATEHOUSE_DATABASE_URL", Unset: "`sqlite:$GATEHOUSE_DATA_DIR/gatehouse.db`",
		Doc: "postgres:// URL, or an SQLite path or sqlite: URL.",
		Parse: func(s *settings, v string) error {
			if v == "" {
				v = "sqlite:" + filepath.Join(s.DataDir, "gatehouse.db")
			}
			s.DatabaseURL = v
			return nil
		}},
	{Name: "GATEHOUSE_DATABASE_READ_URL", Unset: "none: every read goes to the primary",
		Doc:   "Comma-separated postgres:// URLs of streaming standbys that serve the reads the spec marks x-read: replica.",
		Parse: parseReadURLs},
	{Name: "GATEHOUSE_READ_MAX_LAG", Default: "5s",
		Doc:   "A read replica lagging more than this behind the primary is skipped (above 0, at most 1h).",
		Parse: parseReadMaxLag},
	{Name: "GATEHOUSE_SECRET_KEY", Unset: "generated once into `$GATEHOUSE_DATA_DIR/secret.key` (mode 0600, with a warning)",
		Doc: "The 32-byte master key (base64 or hex) that seals secrets and keys cookies; required under https.",
		Parse: func(s *settings, v string) (err error) {
			if v != "" {
				s.SecretKey, err = decodeKey(v)
			}
			return err
		}},
	{Name: "GATEHOUSE_SECRET_KEYS_OLD", Unset: "none",
		Doc: "Comma-separated earlier master keys that still open values sealed before a rotation.",
		Parse: func(s *settings, v string) error {
			for i, k := range splitList(v) {
				key, err := decodeKey(k)
				if err != nil {
					return fmt.Errorf("key %d: %v", i+1, err) // its position, never its value
				}
				s.OldSecretKeys = append(s.OldSecretKeys, key)
			}
			return nil
		}},
	{Name: "GATEHOUSE_TRUSTED_ORIGINS", Unset: "none",
		Doc: "Comma-separated product origins allowed for CORS and cookie-authenticated writes, besides the base URL.",
		Parse: func(s *settings, v string) error {
			for _, o := range splitList(v) {
				n, err := server.NormalizeOrigin(o)
				if err != nil {
					return fmt.Errorf("%q: %v", o, err)
				}
				if n != s.BaseURL {
					s.TrustedOrigins = append(s.TrustedOrigins, n)
				}
			}
			return nil
		}},
	{Name: "GATEHOUSE_TRUSTED_PROXIES", Unset: "none",
		Doc: "Comma-separated IPs or CIDRs whose X-Forwarded-For is believed for the client IP.",
		Parse: func(s *settings, v string) error {
			for _, p := range splitList(v) {
				prefix, err := parsePrefix(p)
				if err != nil {
					return fmt.Errorf("%q is not an IP address or CIDR", p)
				}
				s.TrustedProxies = append(s.TrustedProxies, prefix)
			}
			return nil
		}},
	{Name: "GATEHOUSE_INVITATION_URL", Unset: "`$GATEHOUSE_BASE_URL/accept-invitation/{id}`",
		Doc:   "Accept link of invitation messages, {id} standing for the invitation; on the base URL or a trusted origin.",
		Parse: parseInvitationURL},
	// Mail: where messages go and how they look (see parseMailFrom and its neighbours).
	{Name: "GATEHOUSE_SMTP_URL", Unset: "none: development mode, each message is logged with its link",
		Doc:   "SMTP server of outgoing mail: smtp://user:pass@host:587 (STARTTLS when offered; ?tls=required insists) or smtps:// (implicit TLS).",
		Parse: parseSMTPURL},
	{Name: "GATEHOUSE_MAIL_FROM", Unset: "none (required with `GATEHOUSE_SMTP_URL`)",
		Doc:   "From of every message: an address or \"Name <address>\".",
		Parse: parseMailFrom},
	{Name: "GATEHOUSE_BRAND_NAME", Default: "Gatehouse",
		Doc:   "Product name shown in messages and on the hosted account pages.",
		Parse: parseBrandName},
	{Name: "GATEHOUSE_BRAND_LOGO_URL", Unset: "none (the name is shown instead)",
		Doc:   "Absolute https URL (http only on localhost or a loopback address) of the logo at the top of each message and hosted page.",
		Parse: parseBrandLogoURL},
	{Name: "GATEHOUSE_BRAND_COLOR", Default: mail.DefaultBrandColor,
		Doc:   "Accent colour of messages and hosted account pages, #rrggbb.",
		Parse: parseBrandColor},
	{Name: "GATEHOUSE_REQUIRE_EMAIL_VERIFICATION", Default: "false",
		Doc: "true: an address must be verified (the mailed link) before its user signs in with a password.",
		Parse: func(s *settings, v string) (err error) {
			s.RequireEmailVerification, err = strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			return nil
		}},
	{Name: "GATEHOUSE_SESSION_IDLE_TIMEOUT", Default: "168h",
		Doc: "A browser session unused this long expires (a Go duration, at least 1m).",
		Parse: func(s *settings, v string) (err error) {
			s.SessionIdleTimeout, err = parseLifetime(v)
			return err
		}},
	{Name: "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME", Default: "720h",
		Doc: "A browser session ends this long after sign-in, whatever its activity (a Go duration, at least 1m).",
		Parse: func(s *settings, v string) (err error) {
			s.SessionAbsoluteLifetime, err = parseLifetime(v)
			return err
		}},
	{Name: "GATEHOUSE_SIGN_UP_LIMIT", Default: "10",
		Doc: "Sign-ups per client IP per hour; more answer 429.",
		Parse: func(s *settings, v string) (err error) {
			s.SignUpLimit, err = wholeNumber(v, 1)
			return err
		}},
	{Name: "GATEHOUSE_SIGN_UP", Default: "open",
		Doc: "Who may create an account: open (anyone), invite-only (an invited address) or closed (nobody).",
		Parse: func(s *settings, v string) (err error) {
			s.SignUp, err = server.ParseSignUpMode(v)
			return err
		}},
	{Name: "GATEHOUSE_PASSWORD_HASH_MEMORY_MB", Default: "256",
		Doc: "MiB that concurrent argon2id hashing may hold (19 MiB each); sizes the derived concurrency.",
		Parse: func(s *settings, v string) (err error) {
			s.PasswordHashMemoryMB, err = wholeNumber(v, 19)
			return err
		}},
	{Name: "GATEHOUSE_PASSWORD_HASH_CONCURRENCY", Unset: "`max(1, min(cores, memory / 19 MiB))`",
		Doc: "argon2id computations at once (0, the unset value, derives it; see server.Config.HashConcurrency).",
		Parse: func(s *settings, v string) (err error) {
			if v != "" {
				s.PasswordHashConcurrency, err = wholeNumber(v, 1)
			}
			return err
		}},
	{Name: "GATEHOUSE_PASSWORD_HASH_WAIT", Default: "2s",
		Doc: "How long a request waits for hashing room before 503 with Retry-After (above 0, at most 1m).",
		Parse: func(s *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > time.Minute {
				return errors.New("want a duration such as 2s, above 0 and at most 1m")
			}
			s.PasswordHashWait = d
			return nil
		}},
	{Name: "GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY", Default: "1h",
		Doc: "How long `keys rotate-signing` publishes the next signing key before it signs (0s or more).",
		Parse: func(s *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return errors.New("want a duration of 0s or more, such as 1h or 90m")
			}
			s.SigningKeyPublishDelay = d
			return nil
		}},
	{Name: "GATEHOUSE_SIGNING_ALG", Default: "RS256",
		Doc: "The algorithm of new token signing keys: RS256, ES256 or EdDSA; `keys rotate-signing` moves an existing instance to it.",
		Parse: func(s *settings, v string) error {
			if err := oauth.CheckSigningAlgorithm(v); err != nil {
				return errors.New("want RS256, ES256 or EdDSA")
			}
			s.SigningAlg = v
			return nil
		}},
	{Name: "GATEHOUSE_SIGNING_ALGS", Unset: "none: only `GATEHOUSE_SIGNING_ALG`",
		Doc: "Comma-separated further signing algorithms kept active beside GATEHOUSE_SIGNING_ALG, for clients that register one as idTokenSignedResponseAlg.",
		Parse: func(s *settings, v string) error {
			s.SigningAlgs = nil
			for _, a := range splitList(v) {
				if err := oauth.CheckSigningAlgorithm(a); err != nil {
					return errors.New("want a comma-separated list of RS256, ES256 and EdDSA")
				}
				s.SigningAlgs = append(s.SigningAlgs, a)
			}
			return nil
		}},
	{Name: "GATEHOUSE_SHUTDOWN_TIMEOUT", Default: "20s",
		Doc: "How long a stop signal lets in-flight requests finish before their connections are closed.",
		Parse: func(s *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return errors.New("want a positive duration such as 20s")
			}
			s.ShutdownTimeout = d
			return nil
		}},
	{Name: "GATEHOUSE_USAGE_RETENTION", Unset: "none: raw usage events are kept forever",
		Doc: "PostgreSQL: drop raw usage events received longer ago than this (`400d`, `9600h`), by whole monthly partitions.",
		Parse: func(s *settings, v string) (err error) {
			if v != "" {
				s.UsageRetention, err = parseDays(v)
			}
			return err
		}},
	{Name: "GATEHOUSE_USAGE_REPLAY_WINDOW", Default: "35d",
		Doc: "PostgreSQL: how long after an event was received a replay of its eventId is still recognised.",
		Parse: func(s *settings, v string) (err error) {
			s.UsageReplayWindow, err = parseDays(v)
			return err
		}},
	{Name: "GATEHOUSE_LOG_FORMAT", Default: "text",
		Doc: "Log format: text or json.",
		Parse: func(s *settings, v string) error {
			if v != "text" && v != "json" {
				return errors.New("want text or json")
			}
			s.LogFormat = v
			return nil
		}},
	{Name: "GATEHOUSE_LOG_LEVEL", Default: "info",
		Doc: "Log level: debug, info, warn or error.",
		Parse: func(s *settings, v string) error {
			if err := s.LogLevel.UnmarshalText([]byte(v)); err != nil {
				return errors.New("want debug, info, warn or error")
			}
			return nil
		}},
	{Name: "GATEHOUSE_GITHUB_CLIENT_ID", Unset: "none",
		Doc: "GitHub OAuth app's client id; with its secret, turns on sign-in with GitHub.",
		Parse: func(s *settings, v string) error {
			s.github.ID, s.github.ClientID = identity.GitHub, v
			return nil
		}},
	{Name: "GATEHOUSE_GITHUB_CLIENT_SECRET", Unset: "none",
		Doc: "GitHub OAuth app's client secret; set both or neither.",
		Parse: func(s *settings, v string) error {
			return clientSecret(&s.github, v, "GATEHOUSE_GITHUB_CLIENT_ID", "GATEHOUSE_GITHUB_CLIENT_SECRET")
		}},
	{Name: "GATEHOUSE_GOOGLE_CLIENT_ID", Unset: "none",
		Doc: "Google OAuth client's id; with its secret, turns on sign-in with Google.",
		Parse: func(s *settings, v string) error {
			s.google.ID, s.google.ClientID = identity.Google, v
			return nil
		}},
	{Name: "GATEHOUSE_GOOGLE_CLIENT_SECRET", Unset: "none",
		Doc: "Google OAuth client's secret; set both or neither.",
		Parse: func(s *settings, v string) error {
			return clientSecret(&s.google, v, "GATEHOUSE_GOOGLE_CLIENT_ID", "GATEHOUSE_GOOGLE_CLIENT_SECRET")
		}},
	{Name: "GATEHOUSE_GITHUB_AUTH_URL", Default: "https://github.com/login/oauth/authorize",
		Doc:   "GitHub's authorization endpoint (GitHub Enterprise, or a test fake).",
		Parse: endpoint(func(s *settings) *string { return &s.github.Endpoints.AuthURL })},
	{Name: "GATEHOUSE_GITHUB_TOKEN_URL", Default: "https://github.com/login/oauth/access_token",
		Doc:   "GitHub's token endpoint.",
		Parse: endpoint(func(s *settings) *string { return &s.github.Endpoints.TokenURL })},
	{Name: "GATEHOUSE_GITHUB_API_URL", Default: "https://api.github.com",
		Doc:   "GitHub's REST API base (/user, /user/emails).",
		Parse: endpoint(func(s *settings) *string { return &s.github.Endpoints.APIURL })},
	{Name: "GATEHOUSE_GOOGLE_AUTH_URL", Default: "https://accounts.google.com/o/oauth2/v2/auth",
		Doc:   "Google's authorization endpoint.",
		Parse: endpoint(func(s *settings) *string { return &s.google.Endpoints.AuthURL })},
	{Name: "GATEHOUSE_GOOGLE_TOKEN_URL", Default: "https://oauth2.googleapis.com/token",
		Doc:   "Google's token endpoint.",
		Parse: endpoint(func(s *settings) *string { return &s.google.Endpoints.TokenURL })},
	{Name: "GATEHOUSE_GOOGLE_ISSUER", Default: "https://accounts.google.com",
		Doc:   "The issuer Google's ID tokens are verified against.",
		Parse: endpoint(func(s *settings) *string { return &s.google.Endpoints.Issuer })},
	{Name: "GATEHOUSE_GOOGLE_JWKS_URL", Default: "https://www.googleapis.com/oauth2/v3/certs",
		Doc:   "The keys Google's ID tokens are verified with.",
		Parse: endpoint(func(s *settings) *string { return &s.google.Endpoints.JWKSURL })},
	{Name: "GATEHOUSE_STRIPE_API_BASE", Default: "https://api.stripe.com",
		Doc: "Stripe API base URL of the billing calls (tests point it at stripe-mock).",
		Parse: func(s *settings, v string) error {
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
				return errors.New("want an absolute http(s) URL such as https://api.stripe.com")
			}
			s.StripeAPIBase = strings.TrimSuffix(v, "/")
			return nil
		}},
	{Name: "GATEHOUSE_METRICS_ADDR", Unset: "off",
		Doc: "host:port of a second listener serving only the Prometheus metrics at /metrics.",
		Parse: func(s *settings, v string) (err error) {
			if v != "" {
				s.MetricsAddr, err = hostPort(v, "127.0.0.1:9090")
			}
			return err
		}},
	{Name: "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE", Default: "false",
		Doc: "true lets webhook endpoints use http and loopback, private and link-local addresses (development and tests only).",
		Parse: func(s *settings, v string) (err error) {
			s.WebhookAllowPrivate, err = strconv.ParseBool(v)
			return err
		}},
	{Name: "GATEHOUSE_WEBHOOK_RETRY_SCHEDULE", Default: "5s,5m,30m,2h,5h,10h,14h",
		Doc: "Waits between webhook delivery attempts (comma-separated Go durations); a test and tuning setting.",
		Parse: func(s *settings, v string) (err error) {
			s.WebhookRetrySchedule, err = parseSchedule(v)
			return err
		}},
}

// parseSchedule is GATEHOUSE_WEBHOOK_RETRY_SCHEDULE's parser: 1 to 20 positive Go durations,
// comma-separated, each at most a week.
func parseSchedule(v string) ([]time.Duration, error) {
	parts := strings.Split(v, ",")
	if len(parts) > 20 {
		return nil, errors.New("at most 20 waits")
	}
	out := make([]time.Duration, len(parts))
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d <= 0 || d > 7*24*time.Hour {
			return nil, fmt.Errorf("wait %d: want a positive Go duration of at most 168h, like 5s or 10m", i+1)
		}
		out[i] = d
	}
	return out, nil
}

// configFromEnv reads the configuration through getenv, one row of envVars after the other,
// with defaults that serve a developer: :8080, http://localhost:8080, SQLite at
// ./data/gatehouse.db. It returns a *ConfigError for the first invalid variable.
func configFromEnv(getenv func(string) string) (settings, error) {
	s := settings{Config: server.Config{BodyLimit: 1 << 20}}
	for _, e := range envVars {
		v := strings.TrimSpace(getenv(e.Name))
		if v == "" {
			v = e.Default
		}
		if err := e.Parse(&s, v); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				return s, ce
			}
			return s, &ConfigError{Var: e.Name, Reason: err.Error()}
		}
	}
	for _, p := range []server.SocialConfig{s.github, s.google} {
		if p.ClientID != "" {
			s.Social = append(s.Social, p)
		}
	}
	return s, nil
}
