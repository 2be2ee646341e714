package main

// The configuration. Every GATEHOUSE_* variable the binary reads is one row of envVars: its
// name, its default as README.md documents it, one line on what it sets, and how its value is
// parsed. README.md's configuration table is this table (TestREADMEConfigTable holds the names
// and defaults equal), and no other code reads the environment (TestConfigVariablesInTable).

import (
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
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
	// UsageRetention (0: keep forever) and UsageReplayWindow are the store's
	// WithUsageRetention and WithUsageReplayWindow.
	UsageRetention, UsageReplayWindow time.Duration
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
	// README's table shows it (Markdown): "none", "off", or how the value is derived.
	Unset string
	// Doc is one line on what the variable sets.
	Doc string
	// Parse sets the variable's part of s from v, its value with surrounding blanks removed
	// (Default when unset; "" when unset without a Default). An error is the reason v is
	// invalid; a *ConfigError is returned as it is, naming its own variable.
	Parse func(s *settings, v string) error
}

// documented is the default as the README's table shows it.
func (e envVar) documented() string {
	if e.Default != "" {
		return "`" + e.Default + "`"
	}
	return e.Unset
}

// envVars is the configuration table, in the README's order. A row may read the fields that
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

// parseInvitationURL is GATEHOUSE_INVITATION_URL's parser: an absolute URL containing {id}
// whose origin is the base URL or a trusted origin; "" leaves the server's default.
func parseInvitationURL(s *settings, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || !strings.Contains(v, "{id}") {
		return errors.New("want an absolute URL containing {id}")
	}
	origin, err := server.NormalizeOrigin(u.Scheme + "://" + u.Host)
	if err != nil || (origin != s.BaseURL && !slices.Contains(s.TrustedOrigins, origin)) {
		return errors.New("its origin must be GATEHOUSE_BASE_URL or one of GATEHOUSE_TRUSTED_ORIGINS")
	}
	s.InvitationURL = v
	return nil
}

// parseSMTPURL is GATEHOUSE_SMTP_URL's parser ("" leaves development mode).
func parseSMTPURL(s *settings, v string) error {
	if v == "" {
		return nil
	}
	c, err := mail.ParseSMTPURL(v)
	if err != nil {
		return err
	}
	s.SMTP = &c
	return nil
}

// parseMailFrom is GATEHOUSE_MAIL_FROM's parser: an RFC 5322 address, required with an SMTP URL.
func parseMailFrom(s *settings, v string) error {
	if v == "" {
		if s.SMTP != nil {
			return errors.New("required when GATEHOUSE_SMTP_URL is set")
		}
		return nil
	}
	if _, err := netmail.ParseAddress(v); err != nil {
		return errors.New(`want an address such as no-reply@example.com or "Example <no-reply@example.com>"`)
	}
	s.MailFrom = v
	return nil
}

// parseBrandName is GATEHOUSE_BRAND_NAME's parser: one line of at most 100 characters.
func parseBrandName(s *settings, v string) error {
	if len([]rune(v)) > 100 || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("want one line of at most 100 characters")
	}
	s.Brand.Name = v
	return nil
}

// parseBrandLogoURL is GATEHOUSE_BRAND_LOGO_URL's parser: an absolute https URL, or http on
// localhost or a loopback address, whose origin the hosted pages' CSP can name (mail.LogoOrigin).
func parseBrandLogoURL(s *settings, v string) error {
	if v == "" {
		return nil
	}
	if _, err := mail.LogoOrigin(v); err != nil {
		return err
	}
	s.Brand.LogoURL = v
	return nil
}

// brandColor is the accepted form of GATEHOUSE_BRAND_COLOR.
var brandColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// parseBrandColor is GATEHOUSE_BRAND_COLOR's parser: #rrggbb.
func parseBrandColor(s *settings, v string) error {
	if !brandColor.MatchString(v) {
		return errors.New("want a colour such as #1f5fcc")
	}
	s.Brand.Color = strings.ToLower(v)
	return nil
}

// clientSecret sets a social provider's client secret; its client id (set by the row above)
// and secret go together, and one without the other is a *ConfigError naming the missing one.
func clientSecret(p *server.SocialConfig, secret, idVar, secretVar string) error {
	switch {
	case p.ClientID == "" && secret != "":
		return &ConfigError{Var: idVar, Reason: "required when " + secretVar + " is set"}
	case p.ClientID != "" && secret == "":
		return &ConfigError{Var: secretVar, Reason: "required when " + idVar + " is set"}
	}
	p.ClientSecret = secret
	return nil
}

// endpoint parses a social provider's endpoint, an absolute http(s) URL, into the field that
// field returns.
func endpoint(field func(s *settings) *string) func(s *settings, v string) error {
	return func(s *settings, v string) error {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("want an absolute http(s) URL")
		}
		*field(s) = v
		return nil
	}
}

// hostPort accepts a listen address host:port.
func hostPort(v, example string) (string, error) {
	if _, _, err := net.SplitHostPort(v); err != nil {
		return "", errors.New("want host:port, for example " + example)
	}
	return v, nil
}

// wholeNumber accepts a whole number of at least least.
func wholeNumber(v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("want a whole number of at least %d", least)
	}
	return n, nil
}

// parseLifetime accepts a session lifetime: a Go duration (such as 720h or 90m) of at least a
// minute.
func parseLifetime(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		return 0, errors.New("want a Go duration of at least 1m, for example 720h")
	}
	return d, nil
}

// parseDays accepts a number of days ("400d") or a Go duration ("9600h") of at least one day.
func parseDays(v string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		if n, err = strconv.Atoi(days); err == nil {
			d = time.Duration(n) * 24 * time.Hour
		}
	} else {
		d, err = time.ParseDuration(v)
	}
	if err != nil || d < 24*time.Hour {
		return 0, errors.New("want a number of days such as 400d, or a Go duration of at least 24h")
	}
	return d, nil
}

// splitList splits a comma-separated list, dropping blanks around and between its items.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parsePrefix accepts an IP address (a single-address prefix) or a CIDR.
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

// baseURLPortMismatch reports whether baseURL names a loopback host (localhost, 127.0.0.0/8,
// ::1) on a port other than listenPort. Then a browser at the listening port sends an Origin
// that is not the base URL, and every cookie write is refused with 403 "Invalid origin": serve
// warns. A base URL elsewhere belongs to a proxy or load balancer, which may map ports freely.
func baseURLPortMismatch(baseURL string, listenPort int) bool {
	u, err := url.Parse(baseURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); !strings.EqualFold(host, "localhost") && (err != nil || !a.IsLoopback()) {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return port != strconv.Itoa(listenPort)
}
