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

// The hosted account pages: sign-up, "forgot password", "check your inbox", the accept-invitation
// page (hostedpages.go, invitationpage.go), and what a browser sees when it opens a mailed link
// without a callbackURL (the email verification result, the password reset form and its
// result). The provider's sign-in page (oauth/pages) links to sign-up and "forgot password".
// They look like the provider's pages, in the product's brand, load nothing from elsewhere (an
// inline stylesheet allowed by a per-response CSP nonce), are never cached and never framed;
// their forms post to /api/auth operations, whose form posts must name a trusted origin
// (checkOrigin, checkFormPost).

//go:embed pages/*.html
var accountPageFiles embed.FS

var accountPages = template.Must(template.ParseFS(accountPageFiles, "pages/*.html"))

// Account page names.
const (
	pageMessage        = "message.html"
	pageResetPassword  = "reset-password.html"
	pageSignUp         = "sign-up.html"
	pageForgotPassword = "forgot-password.html"
	pageInvitation     = "invitation.html"
	pageProblem        = "problem.html"
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
	// Action is the page's form target; Token the reset form's token.
	Action, Token string
	// CallbackURL is where the page's form leads afterwards (an authorization request, an
	// invitation page), carried in a hidden field; the second step's (two-factor.html) too.
	CallbackURL string
	// Email and Name fill in the page's form.
	Email, Name string
	// SignInURL, SignUpURL and ForgotURL are the page's links to the other pages ("" hides
	// each).
	SignInURL, SignUpURL, ForgotURL string
	// Link is a link to follow once the page is read ("" URL: none).
	Link pageLink
	// Invitation is what the accept-invitation page shows.
	Invitation invitationFacts
	// Backup, AltURL and AltText are the second step's: whether it asks for a backup code,
	// and the link to the other form.
	Backup          bool
	AltURL, AltText string
	// TOTP and Passkey are the second step's methods: the code forms, the passkey button.
	TOTP, Passkey bool
	// TwoFactor is the account page's (account.html).
	TwoFactor *twoFactorView
	// Problem is the problem type page's (problem.html, problem_types.go).
	Problem *problemTypeView
	Brand   mail.Brand
	Nonce   string
}

// pageLink is a link with its words.
type pageLink struct{ URL, Label string }

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
	csp := oauth.PageCSP(p.Nonce, p.Brand.LogoURL)
	if p.TwoFactor != nil || p.Passkey {
		// The account page's passkey section and the second step's passkey button run scripts.
		csp = oauth.PageCSPWithScripts(p.Nonce, p.Brand.LogoURL)
	}
	setResponseHeader(ctx, "Content-Security-Policy", csp)
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
