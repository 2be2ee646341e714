package mail_test

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
)

// TestLogoOrigin: the origin the hosted pages' CSP allows images from is the logo URL's scheme,
// host and port, in lower case, without path or query.
func TestLogoOrigin(t *testing.T) {
	for logo, want := range map[string]string{
		"https://CDN.Acme.example/brand/logo.png?v=3": "https://cdn.acme.example",
		"https://cdn.acme.example:8443/logo.svg":      "https://cdn.acme.example:8443",
		"HTTP://LocalHost:9000/logo.png":              "http://localhost:9000",
		"http://127.0.0.2/logo.png":                   "http://127.0.0.2",
	} {
		if got, err := mail.LogoOrigin(logo); got != want || err != nil {
			t.Errorf("%s: %q, %v; want %q", logo, got, err, want)
		}
	}
	for _, bad := range []string{"", "http://cdn.acme.example/logo.png", "https://cdn.acme.example;img-src */logo.png",
		"https://cdn acme.example/logo.png", "data:image/png;base64,AAAA", "https://[::1]/logo.png", "http://[::1]/logo.png"} {
		if got, err := mail.LogoOrigin(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}
