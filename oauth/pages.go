package oauth

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
)

//go:embed pages/*.html
var pageFiles embed.FS

// pageTemplates are the provider's pages: sign-in, consent, logout confirmation, signed-out
// and error. They load nothing from elsewhere: the one stylesheet is inline, allowed by a
// per-response CSP nonce.
var pageTemplates = template.Must(template.ParseFS(pageFiles, "pages/*.html"))

// Page is what the provider's pages show; each page uses some of the fields.
type Page struct {
	// Title is the document title.
	Title string
	// Action is the form's target (same origin).
	Action string
	// Error is a message for the user (sign-in failure, error page).
	Error string
	// Code is the RFC 6749 error code on the error page.
	Code string
	// Email fills in the sign-in form (login_hint) or names the account.
	Email string
	// CallbackURL is where sign-in returns (the authorization request).
	CallbackURL string
	// ClientName is the OIDC client's name.
	ClientName string
	// Scopes are the requested scopes in plain words.
	Scopes []string
	// Challenge ties a consent or logout form to its pending request and session.
	Challenge string
	// Social are the sign-in page's social sign-in buttons (configured providers only), and
	// SocialErrorURL where a refused social sign-in returns.
	Social         []SocialButton
	SocialErrorURL string
	// SignUpURL and ForgotURL are the sign-in page's links to the hosted sign-up and "forgot
	// password" pages, each carrying CallbackURL ("": no link).
	SignUpURL, ForgotURL string
	// Brand is the product's name, logo and accent colour (GATEHOUSE_BRAND_*); the provider sets it.
	Brand mail.Brand
	// Nonce is the CSP nonce of the inline stylesheet; RenderPage sets it.
	Nonce string
}

// render is RenderPage with the provider's brand.
func (b *browserProvider) render(w http.ResponseWriter, status int, name string, p Page) {
	p.Brand = b.brand
	RenderPage(w, status, name, p)
}

// The error page's sentences: what went wrong, for the person in front of the page, in one
// sentence (the page adds what to do, and shows the error code small underneath). RFC 6749's
// descriptions are for developers and stay in the redirects' error_description.
const (
	msgUnknownClient    = "This application isn't known here."
	msgRedirectMismatch = "This application's return address isn't registered."
	msgNoRedirect       = "This application didn't say where to send you back."
	msgMalformedLink    = "This sign-in link is malformed."
	msgPushedUsed       = "This sign-in link has expired or has already been used."
	msgPushedOther      = "This sign-in link belongs to another application."
	msgCannotComplete   = "This application's request can't be completed."
	msgServerError      = "Something went wrong on our side."
	msgNotSignedIn      = "You're not signed in."
	msgConsentInvalid   = "This consent request is invalid or has expired."
	msgConsentAnswered  = "This consent request has already been answered."
	msgForeignForm      = "This form wasn't sent from this site."
)

// SocialButton is a social sign-in button: the provider id (github, google) and its name.
type SocialButton struct {
	ID   string
	Name string
}

// Page names.
const (
	PageSignIn    = "signin.html"
	PageConsent   = "consent.html"
	PageLogout    = "logout.html"
	PageSignedOut = "signedout.html"
	PageError     = "error.html"
)

// PageCSP is the Content-Security-Policy of a page whose inline stylesheet carries nonce and
// which shows the brand's logo at logoURL ("": none): nothing loads from anywhere but images
// from this origin, data: URLs and exactly the logo's origin (mail.LogoOrigin; a URL it refuses,
// which configuration never lets through, adds nothing), no framing (frame-ancestors 'none'), no
// base URI. form-action is deliberately absent: browsers apply it to the redirects a form post
// answers with, and the consent form's 303 goes to the client.
func PageCSP(nonce, logoURL string) string {
	img := "'self' data:"
	if logoURL != "" {
		if origin, err := mail.LogoOrigin(logoURL); err == nil {
			img += " " + origin
		}
	}
	return "default-src 'none'; style-src 'nonce-" + nonce + "'; img-src " + img + "; base-uri 'none'; frame-ancestors 'none'"
}

// PageCSPWithScripts is PageCSP for a page that runs its own inline script (the passkey
// ceremonies of the sign-in and account pages): scripts only with the page's nonce, and fetches
// only to this origin (connect-src 'self').
func PageCSPWithScripts(nonce, logoURL string) string {
	return PageCSP(nonce, logoURL) + "; script-src 'nonce-" + nonce + "'; connect-src 'self'"
}

// RenderPage writes page name with status, as HTML with a fresh CSP nonce, never cached and
// never framed.
func RenderPage(w http.ResponseWriter, status int, name string, p Page) {
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	p.Nonce = base64.RawURLEncoding.EncodeToString(raw[:])
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, name, p); err != nil {
		http.Error(w, "page error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	csp := PageCSP(p.Nonce, p.Brand.LogoURL)
	if name == PageSignIn {
		csp = PageCSPWithScripts(p.Nonce, p.Brand.LogoURL)
	}
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// ScopeDescriptions are the scopes in plain words, for the consent page.
var ScopeDescriptions = map[string]string{
	"openid":         "Sign you in and know who you are",
	"profile":        "See your name and profile picture",
	"email":          "See your email address",
	"offline_access": "Stay signed in when you are away (keep access until you revoke it)",
	"organization":   "See your active organization and your role in it",
	"roles":          "See your roles in this application's project",
	"entitlements":   "See what your plan entitles you to",
	"billing":        "See your billing status",
}

// DescribeScopes returns scopes in plain words, in the order given; an unknown scope is shown
// as it is.
func DescribeScopes(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if d, ok := ScopeDescriptions[s]; ok {
			out = append(out, d)
		} else {
			out = append(out, s)
		}
	}
	return out
}

// pageBrand is brand with Gatehouse's name and colour where it has none.
func pageBrand(brand mail.Brand) mail.Brand {
	if brand.Name == "" {
		brand.Name = mail.DefaultBrandName
	}
	if brand.Color == "" {
		brand.Color = mail.DefaultBrandColor
	}
	return brand
}
