package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"html/template"
	"strings"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/oauth"
)

// The hosted account pages: what a browser sees when it opens a mailed link without a
// callbackURL (the email verification result, the password reset form and its result). They
// look like the provider's pages (oauth/pages), in the product's brand colour, load nothing
// from elsewhere (an inline stylesheet allowed by a per-response CSP nonce), are never cached
// and never framed.

//go:embed pages/*.html
var accountPageFiles embed.FS

var accountPages = template.Must(template.ParseFS(accountPageFiles, "pages/*.html"))

// Account page names.
const (
	pageMessage       = "message.html"
	pageResetPassword = "reset-password.html"
)

// accountPage is what an account page shows.
type accountPage struct {
	Title string
	// Message is the page's sentence; Error shows it as an alert, with Code under it.
	Message string
	Error   bool
	Code    string
	// Next says what to do now.
	Next string
	// Action and Token are the reset form's target and token.
	Action, Token string
	// CallbackURL, Backup, AltURL and AltText are the second step's (two-factor.html): where
	// to go once signed in, whether it asks for a backup code, and the link to the other form.
	CallbackURL     string
	Backup          bool
	AltURL, AltText string
	// TwoFactor is the account page's (account.html).
	TwoFactor *twoFactorView
	Brand     mail.Brand
	Nonce     string
}

// renderAccountPage renders page name and sets the page headers on ctx's response (CSP with a
// fresh nonce, no-store, no framing). It returns the body.
func (s *Server) renderAccountPage(ctx context.Context, name string, p accountPage) (*bytes.Reader, int64, error) {
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	p.Nonce = base64.RawURLEncoding.EncodeToString(raw[:])
	p.Brand = s.mailer.Compose.Brand()
	var buf bytes.Buffer
	if err := accountPages.ExecuteTemplate(&buf, name, p); err != nil {
		return nil, 0, err
	}
	setResponseHeader(ctx, "Content-Security-Policy", oauth.PageCSP(p.Nonce))
	setResponseHeader(ctx, "X-Frame-Options", "DENY")
	// A reset page's URL holds its token: no Referer leaves the site (same-origin posts keep
	// their Origin, which no-referrer would turn into "null").
	setResponseHeader(ctx, "Referrer-Policy", "same-origin")
	setResponseHeader(ctx, "Cache-Control", "no-store")
	setResponseHeader(ctx, "Pragma", "no-cache")
	return bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil
}

// wantsPage reports whether the request is a browser's navigation (Accept names text/html)
// rather than an API client's call.
func wantsPage(ctx context.Context) bool {
	return strings.Contains(requestMetaFrom(ctx).Accept, "text/html")
}
