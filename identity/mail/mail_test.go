package mail_test

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
)

const link = "http://gatehouse.test/api/auth/verify-email?token=tok_123&callbackURL=%2Fwelcome"

var acme = mail.Brand{Name: "Acme Cloud", LogoURL: "https://acme.example/logo.png", Color: "#d94f00"}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// A message sent over SMTP with STARTTLS and AUTH arrives at a real SMTP server with both
// parts, the brand and the link.
func TestSMTPSenderDelivers(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{STARTTLS: true, Username: "mailer", Password: "s3cret:/@"})
	cfg, err := mail.ParseSMTPURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS != mail.TLSRequired || cfg.Username != "mailer" || cfg.Password != "s3cret:/@" {
		t.Fatalf("parsed %+v", cfg)
	}
	msg, err := mail.NewComposer(acme).VerifyEmail("ada@example.com", "Ada", link, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sender := mail.NewSMTPSender(cfg, "Acme Cloud <no-reply@acme.example>", srv.ClientTLS)
	if err := sender.Send(ctx(t), msg); err != nil {
		t.Fatalf("send: %v", err)
	}
	got := srv.Wait(t, 1, 10*time.Second)[0]
	if got.From != "no-reply@acme.example" || strings.Join(got.To, ",") != "ada@example.com" {
		t.Errorf("envelope from %q to %q", got.From, got.To)
	}
	if h := got.Header.Get("From"); h != `"Acme Cloud" <no-reply@acme.example>` {
		t.Errorf("From = %q", h)
	}
	if got.Subject != "Confirm your email address for Acme Cloud" {
		t.Errorf("Subject = %q", got.Subject)
	}
	if got.ContentType != "multipart/alternative" || got.Header.Get("Message-Id") == "" || got.Header.Get("Date") == "" {
		t.Errorf("content type %q, message id %q, date %q", got.ContentType, got.Header.Get("Message-Id"), got.Header.Get("Date"))
	}
	if l := got.Link(t, "http://gatehouse.test/"); l != link {
		t.Errorf("text link = %q, want %q", l, link)
	}
	for _, want := range []string{"Hello Ada,", "Confirm that ada@example.com is your email address for Acme Cloud",
		"The link works once, within 24 hours."} {
		if !strings.Contains(got.Text, want) {
			t.Errorf("text part lacks %q:\n%s", want, got.Text)
		}
	}
	for _, want := range []string{`href="` + html.EscapeString(link) + `"`, `src="https://acme.example/logo.png"`,
		`alt="Acme Cloud"`, "border-top:6px solid #d94f00", "background:#d94f00", ">Confirm my email address</a>",
		"within 24 hours"} {
		if !strings.Contains(got.HTML, want) {
			t.Errorf("HTML part lacks %q:\n%s", want, got.HTML)
		}
	}
}

// tls=required refuses a server that does not offer STARTTLS; the default (opportunistic)
// sends to it in the clear.
func TestSMTPSenderTLSPolicy(t *testing.T) {
	plain := mailtest.Start(t, mailtest.Options{})
	msg := mail.Message{To: "ada@example.com", Subject: "s", Text: "t", HTML: "<p>h</p>"}
	required, err := mail.ParseSMTPURL("smtp://" + plain.Addr() + "?tls=required")
	if err != nil {
		t.Fatal(err)
	}
	if err := mail.NewSMTPSender(required, "no-reply@acme.example", nil).Send(ctx(t), msg); err == nil ||
		!strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("tls=required without STARTTLS: %v, want a STARTTLS error", err)
	}
	opportunistic, _ := mail.ParseSMTPURL("smtp://" + plain.Addr())
	if err := mail.NewSMTPSender(opportunistic, "no-reply@acme.example", nil).Send(ctx(t), msg); err != nil {
		t.Fatalf("opportunistic: %v", err)
	}
	if got := plain.Wait(t, 1, 10*time.Second); len(got) != 1 || got[0].Text != "t" || got[0].HTML != "<p>h</p>" {
		t.Errorf("received %+v", got)
	}
}

// A recipient refused with a 5xx is permanent; an unreachable server is not.
func TestSMTPSenderFailures(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{Reject: []string{"gone@example.com"}})
	cfg, _ := mail.ParseSMTPURL("smtp://" + srv.Addr())
	s := mail.NewSMTPSender(cfg, "no-reply@acme.example", nil)
	err := s.Send(ctx(t), mail.Message{To: "gone@example.com", Subject: "s", Text: "t", HTML: "h"})
	if err == nil || !outbox.IsPermanent(err) {
		t.Errorf("refused recipient: %v, want a permanent error", err)
	}
	srv.Stop()
	err = s.Send(ctx(t), mail.Message{To: "ada@example.com", Subject: "s", Text: "t", HTML: "h"})
	if err == nil || outbox.IsPermanent(err) {
		t.Errorf("server down: %v, want a temporary error", err)
	}
}

func TestParseSMTPURL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want mail.SMTPConfig
	}{
		{"smtp://mail.example.com", mail.SMTPConfig{Host: "mail.example.com", Port: 587, TLS: mail.TLSOpportunistic}},
		{"smtp://u%40x:p%3Aw@mail.example.com:2525", mail.SMTPConfig{Host: "mail.example.com", Port: 2525, Username: "u@x", Password: "p:w", TLS: mail.TLSOpportunistic}},
		{"smtp://mail.example.com?tls=required", mail.SMTPConfig{Host: "mail.example.com", Port: 587, TLS: mail.TLSRequired}},
		{"smtps://u:p@mail.example.com", mail.SMTPConfig{Host: "mail.example.com", Port: 465, Username: "u", Password: "p", TLS: mail.TLSImplicit}},
		{"smtps://mail.example.com:2465/", mail.SMTPConfig{Host: "mail.example.com", Port: 2465, TLS: mail.TLSImplicit}},
	} {
		got, err := mail.ParseSMTPURL(tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("ParseSMTPURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
	for _, raw := range []string{"http://mail.example.com", "smtp://", "smtp://mail.example.com/path",
		"smtp://mail.example.com:0", "smtp://mail.example.com:70000", "smtp://mail.example.com?tls=maybe",
		"smtp://mail.example.com?auth=plain", "mail.example.com:587", "smtp://u:hunter2@[::1"} {
		_, err := mail.ParseSMTPURL(raw)
		if err == nil {
			t.Errorf("ParseSMTPURL(%q) accepted", raw)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseSMTPURL(%q): the error repeats the password: %v", raw, err)
		}
	}
}

// Each message has a subject, a text and an HTML part; user-supplied names are escaped in the
// HTML and cannot break the subject line; the defaults brand as Gatehouse.
func TestComposer(t *testing.T) {
	c := mail.NewComposer(mail.Brand{})
	if b := c.Brand(); b.Name != "Gatehouse" || b.Color != "#1f5fcc" || b.LogoURL != "" {
		t.Errorf("default brand = %+v", b)
	}
	reset, err := c.ResetPassword("ada@example.com", "Ada", "http://gatehouse.test/api/auth/reset-password/tok", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if reset.Subject != "Reset your Gatehouse password" || reset.Template != "reset-password" ||
		reset.Link != "http://gatehouse.test/api/auth/reset-password/tok" ||
		!strings.Contains(reset.Text, "The link works once, within 1 hour.") ||
		!strings.Contains(reset.HTML, `<p style="margin:0;font-size:20px;font-weight:700;color:#1f5fcc">Gatehouse</p>`) {
		t.Errorf("reset message = %+v", reset)
	}
	inv, err := c.Invitation("grace@example.com", mail.Invitation{OrganizationName: "<Acme>\r\nBcc: x@evil.example",
		InviterName: "Ada", InviterEmail: "ada@example.com", Role: "developer",
		ExpiresAt: time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)}, "http://gatehouse.test/accept-invitation/inv_1")
	if err != nil {
		t.Fatal(err)
	}
	if inv.Subject != "Ada invited you to <Acme>  Bcc: x@evil.example on Gatehouse" {
		t.Errorf("invitation subject = %q", inv.Subject)
	}
	if !strings.Contains(inv.HTML, "Join &lt;Acme&gt;") || strings.Contains(inv.HTML, "<Acme>") {
		t.Errorf("organization name not escaped in HTML:\n%s", inv.HTML)
	}
	if !strings.Contains(inv.Text, "The invitation expires on 24 November 2026 at 09:30 UTC.") ||
		!strings.Contains(inv.Text, "as developer.") {
		t.Errorf("invitation text:\n%s", inv.Text)
	}
}

// The development sender logs the message with its link.
func TestLogSender(t *testing.T) {
	var buf strings.Builder
	s := mail.LogSender{Log: slog.New(slog.NewTextHandler(&buf, nil))}
	m := mail.Message{To: "ada@example.com", Subject: "Confirm", Template: "verify-email", Link: link}
	if err := mail.Handler(s)(ctx(t), mustPayload(t, m)); err != nil {
		t.Fatal(err)
	}
	want := `level=INFO msg="mail (not sent: GATEHOUSE_SMTP_URL is not set)" to=ada@example.com template=verify-email subject=Confirm link="` + link + `"`
	if !strings.Contains(buf.String(), want) {
		t.Errorf("log = %s\nwant %s", buf.String(), want)
	}
	// A decoy is done without sending (nothing is logged).
	decoy := m
	decoy.To, decoy.Discard = "nobody@example.com", true
	if err := mail.Handler(s)(ctx(t), mustPayload(t, decoy)); err != nil || strings.Contains(buf.String(), "nobody@example.com") {
		t.Errorf("decoy: %v; log %s", err, buf.String())
	}
	if err := mail.Handler(s)(ctx(t), []byte(`{"subject":"no recipient"}`)); !outbox.IsPermanent(err) {
		t.Errorf("payload without recipient: %v, want permanent", err)
	}
	if !errors.Is(outbox.Permanent(errors.ErrUnsupported), errors.ErrUnsupported) {
		t.Error("Permanent hides its cause")
	}
}

func mustPayload(t *testing.T, m mail.Message) []byte {
	p, err := m.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
