package main

import (
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/server"
)

// The value parsers of the configuration table (config.go): each turns one variable's text into
// settings, or an error naming what is wrong.

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

// parseReadURLs reads GATEHOUSE_DATABASE_READ_URL: postgres:// URLs, which need a PostgreSQL
// GATEHOUSE_DATABASE_URL (the row above).
func parseReadURLs(s *settings, v string) error {
	urls := splitList(v)
	if len(urls) == 0 {
		return nil
	}
	if !isPostgresURL(s.DatabaseURL) {
		return errors.New("read replicas need a postgres:// GATEHOUSE_DATABASE_URL")
	}
	for i, u := range urls {
		if !isPostgresURL(u) {
			return fmt.Errorf("item %d is not a postgres:// URL", i+1)
		}
		if _, err := url.Parse(u); err != nil {
			return fmt.Errorf("item %d is not a URL", i+1)
		}
	}
	s.ReadURLs = urls
	return nil
}

func isPostgresURL(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// parseReadMaxLag reads GATEHOUSE_READ_MAX_LAG.
func parseReadMaxLag(s *settings, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > time.Hour {
		return errors.New("want a duration such as 5s, above 0 and at most 1h")
	}
	s.ReadMaxLag = d
	return nil
}
