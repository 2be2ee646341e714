package server

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// mfaCallback is the provider's authorization endpoint asking for acr urn:gatehouse:mfa, as
// the hosted sign-in page carries it in its callbackURL.
const mfaCallback = "/api/auth/oauth2/authorize?acr_values=urn%3Agatehouse%3Amfa&client_id=c1&response_type=code"

// signInForMethods signs in with the password (JSON) with callbackURL (none when "") and
// returns the answer's twoFactorMethods (nil when it signed in) and the pending sign-in's
// Cookie header.
func (a tfApp) signInForMethods(t *testing.T, email, callbackURL string) ([]string, string) {
	t.Helper()
	body := `{"email":` + jsonString(email) + `,"password":` + jsonString("password-"+email)
	if callbackURL != "" {
		body += `,"callbackURL":` + jsonString(callbackURL)
	}
	res := a.do(jsonPost("/api/auth/sign-in/email", body+`}`))
	var got struct {
		TwoFactorRedirect bool     `json:"twoFactorRedirect"`
		TwoFactorMethods  []string `json:"twoFactorMethods"`
		Token             string   `json:"token"`
	}
	res.decode(t, http.StatusOK, &got)
	if !got.TwoFactorRedirect {
		if got.Token == "" {
			t.Fatalf("sign-in neither signed in nor asked for a second factor: %s", res.Body)
		}
		return nil, ""
	}
	return got.TwoFactorMethods, cookieHeader(res.sessionCookie(t, "gatehouse.two_factor"))
}

// TestPasskeySecondStep: a user whose only second factor is a passkey, signing in with the
// password where a second factor is required (acr_values=urn:gatehouse:mfa, or an organization
// with requireTwoFactor), is asked for the passkey, not for a TOTP code: sign-in/email answers
// twoFactorMethods ["passkey"], the hosted second step offers "Use a passkey" and no code form,
// and verify-authentication with the pending sign-in completes it with amr pwd, hwk, mfa.
// Another user's passkey does not complete it. Without a requirement the password alone signs
// in, as before.
func TestPasskeySecondStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		other := a.newUser(t, "Bob", "bob@example.com")
		auth, otherAuth := newSoftAuthenticator(t), newSoftAuthenticator(t)
		a.registerPasskey(t, u, auth, "Laptop")
		a.registerPasskey(t, other, otherAuth, "Phone")

		// No requirement: the password alone signs in.
		if methods, _ := a.signInForMethods(t, u.Email, ""); methods != nil {
			t.Fatalf("sign-in without a requirement asked for %v", methods)
		}
		// acr_values=urn:gatehouse:mfa: the passkey is asked for.
		methods, pending := a.signInForMethods(t, u.Email, mfaCallback)
		if !slices.Equal(methods, []string{"passkey"}) {
			t.Fatalf("twoFactorMethods = %v, want [passkey]", methods)
		}
		// The hosted second step offers the passkey and no code form.
		page := a.do(request{method: http.MethodGet, path: twoFactorPageURL(mfaCallback, false, ""), headers: map[string]string{"Cookie": pending}})
		if page.Code != http.StatusOK {
			t.Fatalf("second step: %d %s", page.Code, page.Body)
		}
		if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'nonce-") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("second step CSP %q lets the passkey script run nowhere", csp)
		}
		html := page.Body.String()
		for _, want := range []string{`<button type="button" id="passkey">Use a passkey</button>`, `nonce="`} {
			if !strings.Contains(html, want) {
				t.Errorf("second step lacks %q:\n%s", want, html)
			}
		}
		for _, unwanted := range []string{"verify-totp", `name="code"`, "backup code", "authenticator app"} {
			if strings.Contains(html, unwanted) {
				t.Errorf("second step of a user without TOTP offers %q:\n%s", unwanted, html)
			}
		}
		// The backup-code form is not offered either.
		if backup := a.do(request{method: http.MethodGet, path: twoFactorPageURL(mfaCallback, true, ""), headers: map[string]string{"Cookie": pending}}); strings.Contains(backup.Body.String(), "verify-backup-code") {
			t.Errorf("backup-code form offered to a user without TOTP:\n%s", backup.Body)
		}

		// Another user's passkey does not complete Ada's sign-in: it signs its own user in (a
		// passkey sign-in, amr hwk mfa) and leaves Ada's sign-in pending.
		opts, ck := a.signInOptions(t)
		var bob sessionWithUserBody
		res := a.do(verifyAuthentication(pending+"; "+ck, otherAuth.assert(t, opts)))
		res.decode(t, http.StatusOK, &bob)
		if bob.User.ID != other.ID {
			t.Fatalf("Bob's passkey signed in %q", bob.User.ID)
		}
		for _, c := range res.Result().Cookies() {
			if c.Name == "gatehouse.two_factor" {
				t.Fatalf("Bob's passkey touched Ada's pending sign-in cookie: %+v", c)
			}
		}
		if n := len(sessionsOf(t, a, other.ID)); n != 2 {
			t.Fatalf("Bob's sessions = %d, want 2", n)
		}

		// Ada's passkey completes it: amr pwd, hwk, mfa; the pending sign-in is used up.
		opts, ck = a.signInOptions(t)
		before := sessionsOf(t, a, u.ID)
		res = a.do(verifyAuthentication(pending+"; "+ck, auth.assert(t, opts)))
		var signed sessionWithUserBody
		res.decode(t, http.StatusOK, &signed)
		if signed.User.ID != u.ID {
			t.Fatalf("signed in as %q", signed.User.ID)
		}
		if c := res.sessionCookie(t, "gatehouse.two_factor"); c.MaxAge >= 0 {
			t.Errorf("two_factor cookie not expired: %+v", c)
		}
		sessions, err := a.store.ListSessions(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		var amr []string
		for _, s := range sessions {
			if !slices.Contains(before, s.ID) {
				amr = s.AMR
			}
		}
		if !slices.Equal(amr, []string{"pwd", "hwk", "mfa"}) {
			t.Fatalf("session amr = %v, want [pwd hwk mfa]", amr)
		}
		if again := a.do(request{method: http.MethodGet, path: twoFactorPageURL(mfaCallback, false, ""), headers: map[string]string{"Cookie": pending}}); again.Code != http.StatusBadRequest || !strings.Contains(again.Body.String(), "Sign in again") {
			t.Fatalf("second step after completion: %d %s", again.Code, again.Body)
		}

		// A browser's form post is sent to the second step.
		fres := a.do(form("/api/auth/sign-in/email", url.Values{"email": {u.Email}, "password": {"password-" + u.Email}, "callbackURL": {mfaCallback}}))
		if fres.Code != http.StatusSeeOther || fres.Header().Get("Location") != twoFactorPageURL(mfaCallback, false, "") {
			t.Fatalf("form sign-in: %d %q", fres.Code, fres.Header().Get("Location"))
		}

		// An organization that requires a second factor asks for the passkey too.
		err = a.store.InTx(ctx, func(tx *store.Tx) error {
			org := store.Organization{Name: "Acme", Slug: "acme"}
			if _, err := tx.CreateOrganization(ctx, &org, u.ID); err != nil {
				return err
			}
			on := true
			_, err := tx.UpdateOrganization(ctx, org.ID, store.OrganizationUpdate{RequireTwoFactor: &on})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if methods, _ := a.signInForMethods(t, u.Email, ""); !slices.Equal(methods, []string{"passkey"}) {
			t.Fatalf("member of an organization requiring a second factor: twoFactorMethods = %v, want [passkey]", methods)
		}
		// Bob is no member: his password alone still signs him in.
		if methods, _ := a.signInForMethods(t, other.Email, ""); methods != nil {
			t.Fatalf("non-member asked for %v", methods)
		}
	})
}
