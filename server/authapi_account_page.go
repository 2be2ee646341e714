package server

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/boombuler/barcode/qr"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
)

// The hosted account page: a signed-in user turns the second factor on (a secret shown as text
// and as an otpauth link, backup codes shown once, a first code to confirm), makes new backup
// codes and turns it off. Its forms post back to it and run the JSON routes' handlers, so that
// passwords, codes, throttles and audit rows work the same way.

// AccountPagePath is the hosted account page.
const AccountPagePath = "/api/auth/account"

// pageAccount is the account page's template.
const pageAccount = "account.html"

// twoFactorView is what the account page shows of the second factor.
type twoFactorView struct {
	Email string
	On    bool
	// URI and Secret are a new secret's, while it waits for its first code. URI is our own
	// otpauth: link, which html/template would otherwise refuse as an unsafe scheme.
	URI    template.URL
	Secret string
	// QR is URI as an inline SVG QR code (qrSVG).
	QR template.HTML
	// Codes are backup codes made by this request.
	Codes []string
	// Continue is the callbackURL, offered once the factor is on; Reason says an organization
	// requires it.
	Continue string
	Reason   bool
	// Passkeys are the user's passkeys, which the page's script registers, renames and removes.
	Passkeys []passkeyView
}

// passkeyView is one passkey on the account page.
type passkeyView struct {
	ID, Name, Created string
}

// signedInRedirect is sign-in/email's answer to a browser's form post that signed in: a 303 to
// enrolmentDue's choice.
func (s *Server) signedInRedirect(ctx context.Context, userID, callbackURL string) (gen.SignInEmailResponseObject, error) {
	loc, err := s.enrolmentDue(ctx, userID, callbackURL)
	if err != nil {
		return nil, err
	}
	return gen.SignInEmail303Response{Headers: gen.SignInEmail303ResponseHeaders{Location: &loc}}, nil
}

// enrolmentDue is where a browser that just signed in with a password (or a social provider)
// goes: callbackURL, or
// the account page (with callbackURL to continue to) when an organization of the user requires
// a second factor the user has not turned on (neither TOTP nor a passkey).
func (s *Server) enrolmentDue(ctx context.Context, userID, callbackURL string) (string, error) {
	required, err := s.store.TwoFactorRequiredOf(ctx, userID)
	if err != nil || !required {
		return callbackURL, err
	}
	if on, err := identity.HasSecondFactor(ctx, s.store, userID); err != nil || on {
		return callbackURL, err
	}
	return AccountPagePath + "?" + url.Values{"callbackURL": {callbackURL}, "reason": {"organization"}}.Encode(), nil
}

// AccountPage renders the account page for the signed-in user.
func (s *Server) AccountPage(ctx context.Context, request gen.AccountPageRequestObject) (gen.AccountPageResponseObject, error) {
	noStore(ctx)
	if err := s.checkCallbackURL(request.Params.CallbackURL); err != nil {
		return nil, err
	}
	p := PrincipalFrom(ctx)
	if p == nil || p.Kind != PrincipalUser {
		body, n, err := s.renderAccountPage(ctx, pageMessage, signedOutPage())
		if err != nil {
			return nil, err
		}
		return gen.AccountPage401TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	view, err := s.twoFactorView(ctx, request.Params.CallbackURL)
	if err != nil {
		return nil, err
	}
	view.Reason = request.Params.Reason != nil
	body, n, err := s.renderAccountPage(ctx, pageAccount, s.accountView(request.Params.CallbackURL, view))
	if err != nil {
		return nil, err
	}
	return gen.AccountPage200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// AccountPageAction runs one of the account page's forms and renders the page again.
func (s *Server) AccountPageAction(ctx context.Context, request gen.AccountPageActionRequestObject) (gen.AccountPageActionResponseObject, error) {
	noStore(ctx)
	callback := request.Params.CallbackURL
	if err := s.checkCallbackURL(callback); err != nil {
		return nil, err
	}
	p := PrincipalFrom(ctx)
	if p == nil || p.Kind != PrincipalUser {
		body, n, err := s.renderAccountPage(ctx, pageMessage, signedOutPage())
		if err != nil {
			return nil, err
		}
		return gen.AccountPageAction401TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	form := request.Body
	password, code := deref(form.Password), deref(form.Code)
	var codes []string
	var uri, message string
	var err error
	switch form.Action {
	case gen.Enable:
		var res gen.EnableTwoFactorResponseObject
		if res, err = s.EnableTwoFactor(ctx, gen.EnableTwoFactorRequestObject{Body: &gen.EnableTwoFactorJSONRequestBody{Password: password}}); err == nil {
			e := res.(gen.EnableTwoFactor200JSONResponse)
			uri, codes = e.TotpURI, e.BackupCodes
		}
	case gen.Confirm:
		_, err = s.VerifyTotp(ctx, gen.VerifyTotpRequestObject{JSONBody: &gen.VerifyTotpJSONRequestBody{Code: code}})
		message = "Two-factor authentication is on."
	case gen.BackupCodes:
		var res gen.GenerateBackupCodesResponseObject
		if res, err = s.GenerateBackupCodes(ctx, gen.GenerateBackupCodesRequestObject{Body: &gen.GenerateBackupCodesJSONRequestBody{Password: password}}); err == nil {
			codes = res.(gen.GenerateBackupCodes200JSONResponse).BackupCodes
			message = "New backup codes are made; the old ones no longer work."
		}
	case gen.Disable:
		_, err = s.DisableTwoFactor(ctx, gen.DisableTwoFactorRequestObject{Body: &gen.DisableTwoFactorJSONRequestBody{Password: password}})
		message = "Two-factor authentication is off."
	}
	status, failure := accountFailure(err)
	if status == 0 {
		return nil, err
	}
	view, verr := s.twoFactorView(ctx, callback)
	if verr != nil {
		return nil, verr
	}
	view.Codes = codes
	if uri != "" || (form.Action == gen.Confirm && failure != "") {
		// A new secret waiting for its first code: shown (again) with the form for it.
		if uri == "" {
			if uri, verr = s.twoFactors.URI(ctx, p.User, s.totpIssuer(nil)); verr != nil {
				return nil, verr
			}
		}
		view.URI, view.Secret, view.QR = template.URL(uri), secretOf(uri), qrSVG(uri)
	}
	page := s.accountView(callback, view)
	if failure != "" {
		page.Message, page.Error = failure, true
	} else {
		page.Message = message
	}
	body, n, err := s.renderAccountPage(ctx, pageAccount, page)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusBadRequest:
		return gen.AccountPageAction400TexthtmlResponse{Body: body, ContentLength: n}, nil
	case http.StatusTooManyRequests:
		return gen.AccountPageAction429TexthtmlResponse{Body: body, ContentLength: n}, nil
	}
	return gen.AccountPageAction200TexthtmlResponse{Body: body, ContentLength: n}, nil
}

// accountFailure maps an action's error to the page's status and sentence: 200 and "" for
// none, 400 or 429 for what the user can correct or wait out, 0 for errors the page does not
// explain (they become problems).
func accountFailure(err error) (int, string) {
	var e *Error
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.Is(err, errInvalidPassword):
		return http.StatusBadRequest, "The password is not correct."
	case errors.Is(err, errNoCredentialAccount):
		return http.StatusBadRequest, "Your account has no password: set one first (reset your password)."
	case errors.Is(err, errInvalidCode):
		return http.StatusBadRequest, "That code is not correct. Try the next one your app shows."
	case errors.Is(err, errTwoFactorNotEnabled), errors.Is(err, errTOTPNotEnabled):
		return http.StatusBadRequest, "Two-factor authentication is not on."
	case errors.As(err, &e) && e.Status == http.StatusTooManyRequests:
		return http.StatusTooManyRequests, "Too many wrong attempts. Wait a while and try again."
	}
	return 0, ""
}

// twoFactorView is the caller's second-factor state.
func (s *Server) twoFactorView(ctx context.Context, callback *string) (*twoFactorView, error) {
	p := PrincipalFrom(ctx)
	on, err := s.twoFactorOn(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	v := &twoFactorView{Email: p.User.Email, On: on}
	pks, err := s.store.PasskeysOf(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	for _, pk := range pks {
		name := "Passkey"
		if pk.Name != nil {
			name = *pk.Name
		}
		v.Passkeys = append(v.Passkeys, passkeyView{ID: pk.ID, Name: name, Created: pk.CreatedAt.UTC().Format("2 January 2006")})
	}
	if on && callback != nil {
		v.Continue = *callback
	}
	return v, nil
}

// accountView is the account page for view; its forms keep the callbackURL.
func (s *Server) accountView(callback *string, view *twoFactorView) accountPage {
	action := AccountPagePath
	if callback != nil {
		action += "?" + url.Values{"callbackURL": {*callback}}.Encode()
	}
	return accountPage{Title: "Your account", Action: action, TwoFactor: view}
}

// signedOutPage is the account page of a signed-out browser.
func signedOutPage() accountPage {
	return accountPage{Title: "Sign in first", Error: true, Code: "UNAUTHORIZED",
		Message: "You are not signed in.", Next: "Sign in, then open this page again."}
}

// secretOf is the base32 secret of an otpauth URI in groups of four, as people type it.
func secretOf(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	secret := u.Query().Get("secret")
	var groups []string
	for len(secret) > 4 {
		groups, secret = append(groups, secret[:4]), secret[4:]
	}
	return strings.Join(append(groups, secret), " ")
}

// qrSVG draws uri as a QR code (error correction M) in an inline SVG: one path of unit squares
// with a four-module quiet zone, made here, so the page loads nothing. It returns "" when the
// URI does not fit a QR code.
func qrSVG(uri string) template.HTML {
	code, err := qr.Encode(uri, qr.M, qr.Auto)
	if err != nil {
		return ""
	}
	size := code.Bounds().Dx()
	const quiet = 4
	var path strings.Builder
	for y := range size {
		for x := range size {
			if r, _, _, _ := code.At(x, y).RGBA(); r == 0 {
				fmt.Fprintf(&path, "M%d %dh1v1h-1z", x+quiet, y+quiet)
			}
		}
	}
	dim := size + 2*quiet
	// Numbers only: safe to insert as HTML.
	return template.HTML(fmt.Sprintf(`<svg class="qr" role="img" aria-label="QR code of the setup link" viewBox="0 0 %d %d" width="200" height="200" shape-rendering="crispEdges"><rect width="%d" height="%d" fill="#fff"/><path d="%s" fill="#000"/></svg>`,
		dim, dim, dim, dim, path.String()))
}
