package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/gatehouse-dev/gatehouse/identity/outbox"
)

// TLSMode is how an SMTPSender secures its connection.
type TLSMode string

// The TLS modes of GATEHOUSE_SMTP_URL.
const (
	// TLSOpportunistic (smtp://) upgrades with STARTTLS when the server offers it.
	TLSOpportunistic TLSMode = "opportunistic"
	// TLSRequired (smtp://…?tls=required) refuses a server that does not offer STARTTLS.
	TLSRequired TLSMode = "required"
	// TLSImplicit (smtps://) speaks TLS from the first byte.
	TLSImplicit TLSMode = "implicit"
)

// SMTPConfig is a parsed GATEHOUSE_SMTP_URL.
type SMTPConfig struct {
	Host               string
	Port               int
	Username, Password string
	TLS                TLSMode
}

// ParseSMTPURL parses smtp://[user[:password]@]host[:port][?tls=required] (port 587 by
// default; STARTTLS when offered, or required) or smtps://[user[:password]@]host[:port] (port
// 465 by default; implicit TLS). The user and password are percent-decoded. Error messages
// never repeat the URL (it may hold a password).
func ParseSMTPURL(raw string) (SMTPConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return SMTPConfig{}, errors.New("not a URL; want smtp://user:password@host:587 or smtps://…")
	}
	var c SMTPConfig
	switch u.Scheme {
	case "smtp":
		c.Port, c.TLS = 587, TLSOpportunistic
	case "smtps":
		c.Port, c.TLS = 465, TLSImplicit
	default:
		return SMTPConfig{}, errors.New("want the scheme smtp:// or smtps://")
	}
	if c.Host = u.Hostname(); c.Host == "" || u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return SMTPConfig{}, errors.New("want smtp://user:password@host:port, without a path")
	}
	if p := u.Port(); p != "" {
		if c.Port, err = strconv.Atoi(p); err != nil || c.Port < 1 || c.Port > 65535 {
			return SMTPConfig{}, errors.New("the port must be 1-65535")
		}
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	q := u.Query()
	for k, v := range q {
		switch {
		case k == "tls" && len(v) == 1 && v[0] == "required" && c.TLS == TLSOpportunistic:
			c.TLS = TLSRequired
		case k == "tls" && len(v) == 1 && v[0] == "required":
			// smtps is implicit TLS, required already.
		default:
			return SMTPConfig{}, fmt.Errorf("unknown parameter %q: the only one is tls=required", k)
		}
	}
	return c, nil
}

// SMTPSender sends each message over a new SMTP connection with go-mail.
type SMTPSender struct {
	cfg  SMTPConfig
	from string
	tls  *tls.Config
}

// NewSMTPSender returns a sender to the server cfg names, writing From: from (an address, or
// "Name <address>"). tlsConfig, when not nil, replaces the default TLS settings (tests trust
// their own certificate authority with it); the server name is cfg.Host either way.
func NewSMTPSender(cfg SMTPConfig, from string, tlsConfig *tls.Config) *SMTPSender {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig = tlsConfig.Clone()
	tlsConfig.ServerName = cfg.Host
	return &SMTPSender{cfg: cfg, from: from, tls: tlsConfig}
}

// Send delivers m: From, To, Subject, Date, Message-ID and a multipart/alternative body of its
// text and HTML parts. A recipient the server refuses for good (a 5xx answer to RCPT TO) is a
// permanent failure; anything else (the server unreachable, a 4xx) may be retried.
func (s *SMTPSender) Send(ctx context.Context, m Message) error {
	msg := gomail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return outbox.Permanent(fmt.Errorf("mail: from address: %w", err))
	}
	if err := msg.To(m.To); err != nil {
		return outbox.Permanent(fmt.Errorf("mail: recipient address: %w", err))
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)

	opts := []gomail.Option{gomail.WithPort(s.cfg.Port), gomail.WithTimeout(20 * time.Second),
		gomail.WithTLSConfig(s.tls)}
	switch s.cfg.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	case TLSRequired:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if s.cfg.Username != "" {
		// The strongest mechanism the server offers; PLAIN and LOGIN only over TLS.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	client, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return fmt.Errorf("mail: smtp client: %w", err)
	}
	err = client.DialAndSendWithContext(ctx, msg)
	if se, ok := errors.AsType[*gomail.SendError](err); ok && se.Reason == gomail.ErrSMTPRcptTo && !se.IsTemp() {
		return outbox.Permanent(err)
	}
	if err != nil {
		return fmt.Errorf("mail: send to %s: %w", net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)), err)
	}
	return nil
}

// LogSender is the development Sender (GATEHOUSE_SMTP_URL unset): it sends nothing and logs each
// message — recipient, subject and its link — at info level, so that a developer can open the
// link. That line is the one place a token is written to a log, on purpose.
type LogSender struct {
	Log *slog.Logger
}

// Send logs m.
func (s LogSender) Send(ctx context.Context, m Message) error {
	s.Log.InfoContext(ctx, "mail (not sent: GATEHOUSE_SMTP_URL is not set)",
		"to", m.To, "template", m.Template, "subject", m.Subject, "link", m.Link)
	return nil
}
