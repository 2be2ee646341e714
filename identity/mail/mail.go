// Package mail writes and sends the messages Gatehouse mails to people — email verification,
// password reset, organization invitations — as one outbox payload kind (Kind) that
// identity/outbox's worker delivers.
//
// Every message has a plain-text and an HTML part, rendered from embedded templates
// (text/template and html/template) with the product's brand (name, logo URL, accent colour).
// A Sender delivers a rendered message: SMTPSender over SMTP (github.com/wneessen/go-mail),
// or LogSender, the development default, which logs each message with its link instead.
//
// It imports identity/outbox (and so store/) only.
package mail

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/outbox"
)

// Kind is the outbox payload kind of a mail message.
const Kind = "mail"

// The message templates.
const (
	TemplateVerifyEmail   = "verify-email"
	TemplateResetPassword = "reset-password"
	TemplateInvitation    = "invitation"
	// TemplateChangeEmail is the link of an email change, mailed to the new address.
	TemplateChangeEmail = "change-email"
	// TemplateEmailChangeNotice tells the old address that a change was asked for.
	TemplateEmailChangeNotice = "email-change-notice"
)

// Message is one rendered mail, the outbox payload of Kind (as JSON).
type Message struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
	// Template names what the message is (TemplateVerifyEmail, …).
	Template string `json:"template"`
	// Link is the message's one link (a verification, reset or accept link), which the
	// development LogSender logs.
	Link string `json:"link"`
	// Discard marks a decoy: queued like any message so that a request for an address without
	// an account does the same work as one with (request-password-reset), and never sent.
	Discard bool `json:"discard,omitempty"`
}

// Brand is how messages present the product: its name, a logo (an absolute URL; none shows the
// name instead) and the accent colour of the header and button (#rrggbb).
type Brand struct {
	Name    string
	LogoURL string
	Color   string
}

// Brand defaults.
const (
	DefaultBrandName  = "Gatehouse"
	DefaultBrandColor = "#1f5fcc"
)

//go:embed templates/*
var templateFiles embed.FS

// Composer renders messages with a brand.
type Composer struct {
	brand Brand
	text  *texttemplate.Template
	html  *htmltemplate.Template
}

// NewComposer returns a Composer for brand (empty fields take the defaults).
func NewComposer(brand Brand) *Composer {
	if brand.Name == "" {
		brand.Name = DefaultBrandName
	}
	if brand.Color == "" {
		brand.Color = DefaultBrandColor
	}
	return &Composer{
		brand: brand,
		text:  texttemplate.Must(texttemplate.ParseFS(templateFiles, "templates/*.txt")),
		html:  htmltemplate.Must(htmltemplate.ParseFS(templateFiles, "templates/*.html")),
	}
}

// Brand returns the composer's brand, defaults filled in.
func (c *Composer) Brand() Brand { return c.brand }

// content is what the templates see.
type content struct {
	Brand   Brand
	Subject string
	To      string
	Name    string
	Link    string
	// Action is the button's label.
	Action string
	// ValidFor is how long the link works, in words.
	ValidFor   string
	Invitation *Invitation
	// NewEmail is the address an email change moves the account to.
	NewEmail string
}

// Invitation is what an invitation message tells its recipient.
type Invitation struct {
	OrganizationName string
	InviterName      string
	InviterEmail     string
	Role             string
	ExpiresAt        time.Time
}

// Expires is the expiry as the message shows it.
func (i Invitation) Expires() string { return i.ExpiresAt.UTC().Format("2 January 2006 at 15:04 UTC") }

// VerifyEmail is the message that asks name to confirm the address to through link, which
// works once within validFor.
func (c *Composer) VerifyEmail(to, name, link string, validFor time.Duration) (Message, error) {
	return c.render(TemplateVerifyEmail, content{
		Subject: "Confirm your email address for " + c.brand.Name, To: to, Name: name, Link: link,
		Action: "Confirm my email address", ValidFor: inWords(validFor),
	})
}

// ResetPassword is the message that lets name, at to, choose a new password through link,
// which works once within validFor.
func (c *Composer) ResetPassword(to, name, link string, validFor time.Duration) (Message, error) {
	return c.render(TemplateResetPassword, content{
		Subject: "Reset your " + c.brand.Name + " password", To: to, Name: name, Link: link,
		Action: "Choose a new password", ValidFor: inWords(validFor),
	})
}

// ChangeEmail is the message, to the new address to of an email change, that asks name to
// confirm it through link, which works once within validFor.
func (c *Composer) ChangeEmail(to, name, link string, validFor time.Duration) (Message, error) {
	return c.render(TemplateChangeEmail, content{
		Subject: "Confirm your new email address for " + c.brand.Name, To: to, Name: name, Link: link,
		Action: "Confirm my new email address", ValidFor: inWords(validFor),
	})
}

// EmailChangeNotice is the message, to the address to that name's account has now, saying
// that a change to newEmail was asked for (it carries no link).
func (c *Composer) EmailChangeNotice(to, name, newEmail string) (Message, error) {
	return c.render(TemplateEmailChangeNotice, content{
		Subject: "Your " + c.brand.Name + " email address is about to change", To: to, Name: name, NewEmail: newEmail,
	})
}

// Invitation is the message that invites to into an organization; link is the accept page.
func (c *Composer) Invitation(to string, inv Invitation, link string) (Message, error) {
	return c.render(TemplateInvitation, content{
		Subject: inv.InviterName + " invited you to " + inv.OrganizationName + " on " + c.brand.Name,
		To:      to, Link: link, Action: "Accept the invitation", Invitation: &inv,
	})
}

func (c *Composer) render(name string, data content) (Message, error) {
	data.Brand = c.brand
	data.Subject = headerSafe(data.Subject)
	var text, html bytes.Buffer
	if err := c.text.ExecuteTemplate(&text, name+".txt", data); err != nil {
		return Message{}, fmt.Errorf("mail: render %s: %w", name, err)
	}
	if err := c.html.ExecuteTemplate(&html, name+".html", data); err != nil {
		return Message{}, fmt.Errorf("mail: render %s: %w", name, err)
	}
	return Message{To: data.To, Subject: data.Subject, Text: text.String(), HTML: html.String(),
		Template: name, Link: data.Link}, nil
}

// headerSafe replaces control characters (a line break in an organization name) with spaces,
// so that a subject is one header line whatever its parts.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// inWords is a link's lifetime as messages say it: "24 hours", "1 hour", "30 minutes".
func inWords(d time.Duration) string {
	unit, n := "minute", int(d/time.Minute)
	if d >= time.Hour && d%time.Hour == 0 {
		unit, n = "hour", int(d/time.Hour)
	}
	if n != 1 {
		unit += "s"
	}
	return strconv.Itoa(n) + " " + unit
}

// Sender delivers a rendered message. Implementations are safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Handler is the outbox handler of Kind: it decodes the payload and sends it with s (a decoy,
// Discard, is done without sending).
func Handler(s Sender) outbox.Handler {
	return func(ctx context.Context, payload []byte) error {
		var m Message
		if err := json.Unmarshal(payload, &m); err != nil || m.To == "" {
			return outbox.Permanent(fmt.Errorf("mail: payload is not a message"))
		}
		if m.Discard {
			return nil
		}
		return s.Send(ctx, m)
	}
}

// Payload is m as the outbox stores it.
func (m Message) Payload() ([]byte, error) { return json.Marshal(m) }
