package mail

import (
	"errors"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
)

// logoHost is a host name a Content-Security-Policy source can name: a DNS name or an IPv4
// address (CSP has no syntax for IPv6 literals).
var logoHost = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)

// LogoOrigin checks a brand's logo URL (GATEHOUSE_BRAND_LOGO_URL) and returns its origin,
// scheme://host[:port] in lower case, which the hosted pages' Content-Security-Policy allows
// images from. The URL is absolute https, or http on localhost or a loopback address (a
// developer's machine); it names no user, no fragment, and a host a CSP source can name (a DNS
// name or an IPv4 address). The error says what is wanted and never repeats the URL.
func LogoOrigin(logoURL string) (string, error) {
	u, err := url.Parse(logoURL)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", errors.New("want an absolute https URL such as https://example.com/logo.png")
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	if !logoHost.MatchString(host) {
		return "", errors.New("want a host name or an IPv4 address (a Content-Security-Policy cannot name other hosts)")
	}
	switch scheme {
	case "https":
	case "http":
		if a, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !a.IsLoopback()) {
			return "", errors.New("want https: http is accepted only on localhost or a loopback address")
		}
	default:
		return "", errors.New("want an absolute https URL such as https://example.com/logo.png")
	}
	origin := scheme + "://" + host
	if p := u.Port(); p != "" {
		origin += ":" + p
	}
	return origin, nil
}
