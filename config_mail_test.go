package main

import (
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
)

// The mail variables: development mode by default, an SMTP URL with a From, and the brand.
func TestConfigMail(t *testing.T) {
	cfg, err := configFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SMTP != nil || cfg.MailFrom != "" || cfg.Brand != (mail.Brand{Name: "Gatehouse", Color: "#1f5fcc"}) {
		t.Errorf("defaults: smtp %+v, from %q, brand %+v", cfg.SMTP, cfg.MailFrom, cfg.Brand)
	}
	cfg, err = configFromEnv(envOf(map[string]string{
		"GATEHOUSE_SMTP_URL":       "smtps://mailer:p%40ss@smtp.example.com",
		"GATEHOUSE_MAIL_FROM":      "Acme <no-reply@acme.example>",
		"GATEHOUSE_BRAND_NAME":     "Acme Cloud",
		"GATEHOUSE_BRAND_LOGO_URL": "https://acme.example/logo.png",
		"GATEHOUSE_BRAND_COLOR":    "#D94F00",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := mail.SMTPConfig{Host: "smtp.example.com", Port: 465, Username: "mailer", Password: "p@ss", TLS: mail.TLSImplicit}
	if cfg.SMTP == nil || *cfg.SMTP != want || cfg.MailFrom != "Acme <no-reply@acme.example>" ||
		cfg.Brand != (mail.Brand{Name: "Acme Cloud", LogoURL: "https://acme.example/logo.png", Color: "#d94f00"}) {
		t.Errorf("configured: smtp %+v, from %q, brand %+v", cfg.SMTP, cfg.MailFrom, cfg.Brand)
	}
	for name, env := range map[string]map[string]string{
		"GATEHOUSE_SMTP_URL":       {"GATEHOUSE_SMTP_URL": "smtp://u:hunter2@smtp.example.com?tls=maybe"},
		"GATEHOUSE_MAIL_FROM":      {"GATEHOUSE_SMTP_URL": "smtp://smtp.example.com"},
		"GATEHOUSE_BRAND_NAME":     {"GATEHOUSE_BRAND_NAME": "Acme\nBcc: x"},
		"GATEHOUSE_BRAND_LOGO_URL": {"GATEHOUSE_BRAND_LOGO_URL": "javascript:alert(1)"},
		"GATEHOUSE_BRAND_COLOR":    {"GATEHOUSE_BRAND_COLOR": "red;background:url(x)"},
	} {
		_, err := configFromEnv(envOf(env))
		if ce := wantConfigError(t, err, name, name); ce != nil && strings.Contains(ce.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the password: %v", name, ce)
		}
	}
	_, err = configFromEnv(envOf(map[string]string{"GATEHOUSE_SMTP_URL": "smtp://smtp.example.com", "GATEHOUSE_MAIL_FROM": "not an address"}))
	wantConfigError(t, err, "GATEHOUSE_MAIL_FROM", "an invalid From")
}

// GATEHOUSE_BRAND_LOGO_URL: https anywhere, http only on localhost or a loopback address, and a
// host the hosted pages' Content-Security-Policy can name; anything else stops the start with
// an error naming the variable and what is wanted.
func TestConfigBrandLogoURL(t *testing.T) {
	for _, ok := range []string{
		"https://cdn.acme.example/brand/logo.png?v=3",
		"https://203.0.113.7:8443/logo.svg",
		"http://localhost:9000/logo.png",
		"http://127.0.0.1:9000/logo.png",
	} {
		cfg, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_BRAND_LOGO_URL": ok}))
		if err != nil || cfg.Brand.LogoURL != ok {
			t.Errorf("%s: logo %q, err %v", ok, cfg.Brand.LogoURL, err)
		}
	}
	const wantHTTPS = "want an absolute https URL such as https://example.com/logo.png"
	for bad, reason := range map[string]string{
		"http://cdn.acme.example/logo.png":       "want https: http is accepted only on localhost or a loopback address",
		"http://10.0.0.5/logo.png":               "want https: http is accepted only on localhost or a loopback address",
		"javascript:alert(1)":                    wantHTTPS,
		"ftp://cdn.acme.example/logo.png":        wantHTTPS,
		"//cdn.acme.example/logo.png":            wantHTTPS,
		"/logo.png":                              wantHTTPS,
		"https://user@cdn.acme.example/logo.png": wantHTTPS,
		"https://cdn.acme.example/logo.png#top":  wantHTTPS,
		"https://[2001:db8::1]/logo.png":         "want a host name or an IPv4 address (a Content-Security-Policy cannot name other hosts)",
		"https://cdn_acme.example/logo.png":      "want a host name or an IPv4 address (a Content-Security-Policy cannot name other hosts)",
	} {
		_, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_BRAND_LOGO_URL": bad}))
		if ce := wantConfigError(t, err, "GATEHOUSE_BRAND_LOGO_URL", bad); ce != nil && ce.Reason != reason {
			t.Errorf("%s: reason %q, want %q", bad, ce.Reason, reason)
		}
	}
}
