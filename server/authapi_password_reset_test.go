package server

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// resetRequested is request-password-reset's one answer, better-auth's.
var resetRequested = map[string]any{"status": true, "message": "If this email exists in our system, check your email for the reset link"}

// requestReset calls request-password-reset and checks its one answer.
func (a mailApp) requestReset(t *testing.T, email, redirectTo string) {
	t.Helper()
	body := `{"email":` + jsonString(email)
	if redirectTo != "" {
		body += `,"redirectTo":` + jsonString(redirectTo)
	}
	var got map[string]any
	a.do(request{method: http.MethodPost, path: "/api/auth/request-password-reset", body: body + "}"}).decode(t, http.StatusOK, &got)
	if !reflect.DeepEqual(got, resetRequested) {
		t.Fatalf("request-password-reset %s: %v, want %v", email, got, resetRequested)
	}
}

// verifiedUser makes a user with password "password-"+email whose address is verified.
func (a mailApp) verifiedUser(t *testing.T, name, email string) testUser {
	t.Helper()
	u := a.newUser(t, name, email)
	if err := a.store.InTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.VerifyEmail(context.Background(), u.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return u
}

// The reset link goes through reset-password/{token} to the product's page with the token; the
// new password works at once, the old one and every session end; the link works once.
func TestPasswordReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		ada := a.verifiedUser(t, "Ada", "ada@example.com")
		_, signedIn := a.signIn(t, "ada@example.com", "password-ada@example.com")

		a.requestReset(t, "ada@example.com", "https://app.example.com/reset?step=2")
		a.requestReset(t, "nobody@example.com", "https://app.example.com/reset?step=2")
		msg := a.smtp.WaitFor(t, "ada@example.com", 20*time.Second)
		if msg.Subject != "Reset your Gatehouse password" || !strings.Contains(msg.Text, "The link works once, within 1 hour.") ||
			!strings.Contains(msg.HTML, ">Choose a new password</a>") {
			t.Errorf("reset mail %q:\n%s", msg.Subject, msg.Text)
		}
		link := a.link(t, "ada@example.com", 1, "/api/auth/reset-password/")
		u, _ := url.Parse(link)
		token := strings.TrimPrefix(u.Path, "/api/auth/reset-password/")
		if len(token) != 43 || u.Query().Get("callbackURL") != "https://app.example.com/reset?step=2" {
			t.Fatalf("link %s", link)
		}
		if _, err := a.store.EmailTokenByHash(context.Background(), store.EmailTokenResetPassword, identity.HashToken(token)); err != nil {
			t.Errorf("the token's hash is not stored: %v", err)
		}

		// The link forwards the token, without using it, and the token is never logged.
		want := "https://app.example.com/reset?step=2&token=" + token
		for range 2 {
			res := a.do(request{method: http.MethodGet, path: link})
			if res.Code != http.StatusFound || res.Header().Get("Location") != want {
				t.Fatalf("link = %d to %q, want %q", res.Code, res.Header().Get("Location"), want)
			}
		}
		if logs := a.logs.String(); strings.Contains(logs, token) || !strings.Contains(logs, "path=/api/auth/reset-password/:token") {
			t.Errorf("access log:\n%s", logs)
		}

		res := a.do(request{method: http.MethodPost, path: "/api/auth/reset-password",
			body: `{"newPassword":"a-brand-new-password","token":"` + token + `"}`})
		if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != `{"status":true}` || len(res.Header().Values("Set-Cookie")) != 0 {
			t.Fatalf("reset = %d %s, cookies %v", res.Code, res.Body, res.Header().Values("Set-Cookie"))
		}
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":"password-ada@example.com"}`}), http.StatusUnauthorized, "INVALID_EMAIL_OR_PASSWORD")
		if in, _ := a.signIn(t, "ada@example.com", "a-brand-new-password"); in.User.ID != ada.ID {
			t.Errorf("sign-in with the new password: %+v", in)
		}
		for _, cookie := range []string{ada.Cookie, signedIn} {
			if got := a.getSession(t, cookie); got != nil {
				t.Errorf("a session from before the reset survived: %+v", got)
			}
		}
		rows := auditEntries(t, a.store, identity.PasswordResetAction)
		if len(rows) != 1 || rows[0].ActorID != ada.ID || rows[0].TargetID != ada.ID || rows[0].Metadata["claimed"] != false ||
			rows[0].Metadata["sessionsEnded"] != float64(2) {
			t.Errorf("password reset audit rows = %+v", rows)
		}
		wantAuditRow(t, a.store, identity.PasswordResetAction, ada.ID, token)
		if n := len(auditEntries(t, a.store, identity.EmailClaimAction)); n != 0 {
			t.Errorf("%d email claims for a verified account", n)
		}

		// Once only.
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/reset-password",
			body: `{"newPassword":"another-new-password","token":"` + token + `"}`}), http.StatusBadRequest, "INVALID_TOKEN")
		res = a.do(request{method: http.MethodGet, path: link})
		if loc := res.Header().Get("Location"); res.Code != http.StatusFound || loc != "https://app.example.com/reset?error=INVALID_TOKEN&step=2" {
			t.Errorf("used link = %d to %q", res.Code, loc)
		}
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/reset-password", body: `{"newPassword":"another-new-password"}`}),
			http.StatusBadRequest, "INVALID_TOKEN")
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/request-password-reset",
			body: `{"email":"ada@example.com","redirectTo":"https://evil.example/reset"}`}), http.StatusForbidden, "INVALID_CALLBACK_URL")
		outboxDrained(t, a.store)
		if n := len(a.smtp.To("nobody@example.com")); n != 0 {
			t.Errorf("%d mails to an address without an account", n)
		}
	})
}

// Without redirectTo the link opens the hosted form, which posts the new password and gets a
// page back; an expired link, an older link and a link in the query are handled.
func TestPasswordResetHostedPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		a.verifiedUser(t, "Ada", "ada@example.com")
		a.requestReset(t, "ada@example.com", "")
		a.requestReset(t, "ada@example.com", "")
		first := a.link(t, "ada@example.com", 1, "/api/auth/reset-password/")
		second := a.link(t, "ada@example.com", 2, "/api/auth/reset-password/")
		html := map[string]string{"Accept": "text/html,application/xhtml+xml"}

		res := a.do(request{method: http.MethodGet, path: second, headers: html})
		token := strings.TrimPrefix(second, "/api/auth/reset-password/")
		if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), `<form method="post" action="/api/auth/reset-password">`) ||
			!strings.Contains(res.Body.String(), `<input type="hidden" name="token" value="`+token+`">`) ||
			res.Header().Get("Cache-Control") != "no-store" || !strings.HasPrefix(res.Header().Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("reset page = %d %v\n%s", res.Code, res.Header(), res.Body)
		}
		post := func(values url.Values) response {
			r := form("/api/auth/reset-password", values)
			r.headers["Accept"] = "text/html,application/xhtml+xml"
			return a.do(r)
		}
		res = post(url.Values{"newPassword": {"hosted-new-password"}, "token": {token}})
		if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), "<h1>Password changed</h1>") {
			t.Fatalf("form post = %d %s", res.Code, res.Body)
		}
		a.signIn(t, "ada@example.com", "hosted-new-password")
		// The first link died with the reset.
		firstToken := strings.TrimPrefix(first, "/api/auth/reset-password/")
		res = post(url.Values{"newPassword": {"yet-another-password"}, "token": {firstToken}})
		if res.Code != http.StatusBadRequest || !strings.Contains(res.Body.String(), "<code>INVALID_TOKEN</code>") {
			t.Errorf("older link's form post = %d %s", res.Code, res.Body)
		}

		// A link an hour old has expired; the token may also come in the query.
		a.requestReset(t, "ada@example.com", "")
		third := strings.TrimPrefix(a.link(t, "ada@example.com", 3, "/api/auth/reset-password/"), "/api/auth/reset-password/")
		a.do(request{method: http.MethodPost, path: "/api/auth/reset-password?token=" + third,
			body: `{"newPassword":"query-token-password"}`}).decode(t, http.StatusOK, &struct{}{})
		a.signIn(t, "ada@example.com", "query-token-password")
		a.requestReset(t, "ada@example.com", "")
		fourth := a.link(t, "ada@example.com", 4, "/api/auth/reset-password/")
		a.clock.Advance(time.Hour + time.Second)
		res = a.do(request{method: http.MethodGet, path: fourth, headers: html})
		if res.Code != http.StatusBadRequest || !strings.Contains(res.Body.String(), "The password reset link has expired") {
			t.Errorf("expired link page = %d %s", res.Code, res.Body)
		}
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/reset-password",
			body: `{"newPassword":"too-late-password","token":"` + strings.TrimPrefix(fourth, "/api/auth/reset-password/") + `"}`}),
			http.StatusBadRequest, "INVALID_TOKEN")
	})
}

// An account whose address was never verified: the reset proves the requester owns the
// address, so it claims the account — whoever signed up with it loses their password and
// sessions.
func TestPasswordResetClaimsUnverifiedAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		res := a.signUp("Mallory", "victim@example.com", "mallory-password-1", "")
		res.decode(t, http.StatusOK, &struct{}{})
		squatter := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
		a.requestReset(t, "victim@example.com", "")
		token := strings.TrimPrefix(a.link(t, "victim@example.com", 2, "/api/auth/reset-password/"), "/api/auth/reset-password/")
		a.do(request{method: http.MethodPost, path: "/api/auth/reset-password",
			body: `{"newPassword":"victims-own-password","token":"` + token + `"}`}).decode(t, http.StatusOK, &struct{}{})

		if got := a.getSession(t, squatter); got != nil {
			t.Errorf("the squatter's session survived: %+v", got)
		}
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"victim@example.com","password":"mallory-password-1"}`}), http.StatusUnauthorized, "INVALID_EMAIL_OR_PASSWORD")
		if in, _ := a.signIn(t, "victim@example.com", "victims-own-password"); !in.User.EmailVerified {
			t.Errorf("after the reset: %+v", in.User)
		}
		claims := auditEntries(t, a.store, identity.EmailClaimAction)
		if len(claims) != 1 || claims[0].Metadata["proof"] != "password-reset" || claims[0].Metadata["passwordRemoved"] != true {
			t.Errorf("claims = %+v", claims)
		}
		if rows := auditEntries(t, a.store, identity.PasswordResetAction); len(rows) != 1 || rows[0].Metadata["claimed"] != true {
			t.Errorf("reset rows = %+v", rows)
		}
	})
}

// A user locked out by failed sign-ins may sign in with the new password right after a reset.
func TestPasswordResetLiftsTheLockout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		a.verifiedUser(t, "Ada", "ada@example.com")
		for range accountFailureLimit {
			a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email", body: `{"email":"ada@example.com","password":"guess-guess-1"}`})
		}
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":"password-ada@example.com"}`}), http.StatusTooManyRequests, "TOO_MANY_REQUESTS")
		a.requestReset(t, "ada@example.com", "")
		token := strings.TrimPrefix(a.link(t, "ada@example.com", 1, "/api/auth/reset-password/"), "/api/auth/reset-password/")
		a.do(request{method: http.MethodPost, path: "/api/auth/reset-password",
			body: `{"newPassword":"after-the-lockout","token":"` + token + `"}`}).decode(t, http.StatusOK, &struct{}{})
		a.signIn(t, "ada@example.com", "after-the-lockout")
	})
}
