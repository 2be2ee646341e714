package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// mailApp is an app whose mail a real SMTP server receives, over a store whose clock the test
// moves.
type mailApp struct {
	*testApp
	smtp  *mailtest.Server
	clock *storetest.Clock
}

func newMailApp(t *testing.T, b storetest.Backend, cfg Config) mailApp {
	t.Helper()
	clock := storetest.NewClock(time.Now())
	st := openURL(t, b.URL(t), store.WithClock(clock.Now))
	smtp := mailtest.Start(t, mailtest.Options{STARTTLS: true, Username: "gatehouse", Password: "mail-pass"})
	return mailApp{testApp: newTestAppWith(t, st, cfg, testDeps{smtp: smtp}), smtp: smtp, clock: clock}
}

// signUp signs name up with email and password (and callbackURL when not "") and returns the
// response.
func (a mailApp) signUp(name, email, password, callbackURL string) response {
	body := map[string]string{"name": name, "email": email, "password": password}
	if callbackURL != "" {
		body["callbackURL"] = callbackURL
	}
	raw, _ := json.Marshal(body)
	return a.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email", body: string(raw)})
}

// link waits for the n-th message to address and returns the link in it that starts with
// prefix (after the base URL), as a path to request.
func (a mailApp) link(t *testing.T, address string, n int, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(a.smtp.To(address)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages to %s within 20s, want %d", len(a.smtp.To(address)), address, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	msg := a.smtp.To(address)[n-1]
	return strings.TrimPrefix(msg.Link(t, testBaseURL+prefix), testBaseURL)
}

// getSession returns the session cookie's user, or nil when it is not signed in.
func (a mailApp) getSession(t *testing.T, cookie string) *authUserBody {
	t.Helper()
	var got *sessionWithUserBody
	a.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/get-session"})).decode(t, http.StatusOK, &got)
	if got == nil {
		return nil
	}
	return &got.User
}

// Sign-up mails a verification link; opening it in the signed-up browser verifies the address,
// keeps that browser signed in (new cookie) and keeps the password the link was mailed for.
func TestEmailVerification(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		res := a.signUp("Ada", "ada@example.com", "correct-horse-battery", "/welcome")
		var up struct {
			Token *string      `json:"token"`
			User  authUserBody `json:"user"`
		}
		res.decode(t, http.StatusOK, &up)
		if up.Token == nil || up.User.EmailVerified {
			t.Fatalf("sign-up = %+v", up)
		}
		cookie := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))

		msg := a.smtp.WaitFor(t, "ada@example.com", 20*time.Second)
		if msg.Subject != "Confirm your email address for Gatehouse" || msg.ContentType != "multipart/alternative" ||
			!strings.Contains(msg.Text, "Hello Ada,") || !strings.Contains(msg.HTML, ">Confirm my email address</a>") {
			t.Errorf("verification mail: %q\n%s", msg.Subject, msg.Text)
		}
		link := a.link(t, "ada@example.com", 1, "/api/auth/verify-email?")
		u, _ := url.Parse(link)
		token := u.Query().Get("token")
		if len(token) != 43 || u.Query().Get("callbackURL") != "/welcome" {
			t.Fatalf("link %s", link)
		}
		// Only the token's SHA-256 is stored.
		if _, err := a.store.EmailTokenByHash(context.Background(), store.EmailTokenVerifyEmail, token); err == nil {
			t.Error("the token is stored as it is")
		}
		if _, err := a.store.EmailTokenByHash(context.Background(), store.EmailTokenVerifyEmail, identity.HashToken(token)); err != nil {
			t.Errorf("the token's hash is not stored: %v", err)
		}

		// Opened in the browser that signed up: 302 to the callbackURL, a new session cookie.
		res = a.do(withCookie(cookie, request{method: http.MethodGet, path: link}))
		if res.Code != http.StatusFound || res.Header().Get("Location") != "/welcome" {
			t.Fatalf("verify = %d to %q; body %s", res.Code, res.Header().Get("Location"), res.Body)
		}
		fresh := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
		if got := a.getSession(t, fresh); got == nil || !got.EmailVerified || got.ID != up.User.ID {
			t.Errorf("session after verifying = %+v", got)
		}
		if got := a.getSession(t, cookie); got != nil {
			t.Errorf("the sessions from before verifying still work: %+v", got)
		}
		// The password the link was mailed for stays.
		if in, _ := a.signIn(t, "ada@example.com", "correct-horse-battery"); !in.User.EmailVerified {
			t.Errorf("sign-in after verifying: %+v", in)
		}
		claims := auditEntries(t, a.store, identity.EmailClaimAction)
		if len(claims) != 1 || claims[0].Metadata["proof"] != "verification-link" || claims[0].Metadata["passwordKept"] != true ||
			claims[0].Metadata["passwordRemoved"] != false || claims[0].ActorID != up.User.ID {
			t.Errorf("claim audit rows = %+v", claims)
		}

		// Opened again (a scanner opened it first): still a success, nothing more happens.
		res = a.do(request{method: http.MethodGet, path: link})
		if res.Code != http.StatusFound || res.Header().Get("Location") != "/welcome" || len(res.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("second opening = %d to %q, cookies %v", res.Code, res.Header().Get("Location"), res.Header().Values("Set-Cookie"))
		}
		// Signed in and verified: nothing to send; another address is not the caller's.
		wantCode(t, a.do(withCookie(fresh, request{method: http.MethodPost, path: "/api/auth/send-verification-email",
			body: `{"email":"ada@example.com"}`})), http.StatusBadRequest, "EMAIL_ALREADY_VERIFIED")
		wantCode(t, a.do(withCookie(fresh, request{method: http.MethodPost, path: "/api/auth/send-verification-email",
			body: `{"email":"grace@example.com"}`})), http.StatusBadRequest, "EMAIL_MISMATCH")
	})
}

// Without a callbackURL a browser gets a page and an API client JSON; a bad or expired token
// gets a redirect with error, a 401 page or a 401 problem; an untrusted callbackURL is 403.
func TestVerifyEmailAnswers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.Brand.Name, cfg.Brand.Color = "Acme Cloud", "#d94f00"
		a := newMailApp(t, b, cfg)
		a.signUp("Grace", "grace@example.com", "correct-horse-battery", "").decode(t, http.StatusOK, &struct{}{})
		link := a.link(t, "grace@example.com", 1, "/api/auth/verify-email?")
		if strings.Contains(link, "callbackURL") {
			t.Fatalf("link without callbackURL: %s", link)
		}
		html := map[string]string{"Accept": "text/html,application/xhtml+xml"}

		res := a.do(request{method: http.MethodGet, path: link, headers: html})
		if res.Code != http.StatusOK || !strings.Contains(res.Body.String(), "<h1>Email address verified</h1>") ||
			!strings.Contains(res.Body.String(), "<title>Email address verified · Acme Cloud</title>") ||
			!strings.Contains(res.Body.String(), "border-top:6px solid #d94f00") {
			t.Errorf("page = %d %s", res.Code, res.Body)
		}
		if csp := res.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'; style-src 'nonce-") ||
			res.Header().Get("Cache-Control") != "no-store" || res.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("page headers: %v", res.Header())
		}

		bad := "/api/auth/verify-email?token=" + strings.Repeat("x", 43)
		wantCode(t, a.do(request{method: http.MethodGet, path: bad}), http.StatusUnauthorized, "INVALID_TOKEN")
		res = a.do(request{method: http.MethodGet, path: bad, headers: html})
		if res.Code != http.StatusUnauthorized || !strings.Contains(res.Body.String(), "<code>INVALID_TOKEN</code>") {
			t.Errorf("bad token page = %d %s", res.Code, res.Body)
		}
		res = a.do(request{method: http.MethodGet, path: bad + "&callbackURL=" + url.QueryEscape("https://app.example.com/verified?from=mail")})
		if loc := res.Header().Get("Location"); res.Code != http.StatusFound || loc != "https://app.example.com/verified?error=INVALID_TOKEN&from=mail" {
			t.Errorf("bad token with callbackURL = %d to %q", res.Code, loc)
		}
		wantCode(t, a.do(request{method: http.MethodGet, path: bad + "&callbackURL=" + url.QueryEscape("https://evil.example/x")}),
			http.StatusForbidden, "INVALID_CALLBACK_URL")

		// A link opened after 24 hours: TOKEN_EXPIRED. An API client gets JSON on success.
		a.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
			body: `{"name":"Hedy","email":"hedy@example.com","password":"correct-horse-battery"}`}).decode(t, http.StatusOK, &struct{}{})
		a.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
			body: `{"name":"Joan","email":"joan@example.com","password":"correct-horse-battery"}`}).decode(t, http.StatusOK, &struct{}{})
		hedy := a.link(t, "hedy@example.com", 1, "/api/auth/verify-email?")
		joan := a.link(t, "joan@example.com", 1, "/api/auth/verify-email?")
		var ok map[string]any
		a.do(request{method: http.MethodGet, path: joan}).decode(t, http.StatusOK, &ok)
		if len(ok) != 2 || ok["status"] != true || ok["user"] != nil {
			t.Errorf("JSON answer = %v, want {status: true, user: null}", ok)
		}
		a.clock.Advance(24*time.Hour + time.Second)
		wantCode(t, a.do(request{method: http.MethodGet, path: hedy}), http.StatusUnauthorized, "TOKEN_EXPIRED")
	})
}

// Signed out, send-verification-email answers the same whatever the address; it mails only
// an unverified account, within the send limit per address.
func TestSendVerificationEmail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		vera := a.newUser(t, "Vera", "vera@example.com")
		if err := a.store.InTx(context.Background(), func(tx *store.Tx) error {
			_, err := tx.VerifyEmail(context.Background(), vera.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		a.signUp("Ada", "ada@example.com", "correct-horse-battery", "").decode(t, http.StatusOK, &struct{}{})
		a.link(t, "ada@example.com", 1, "/api/auth/verify-email?")
		for _, email := range []string{"nobody@example.com", "vera@example.com", "ada@example.com"} {
			res := a.do(request{method: http.MethodPost, path: "/api/auth/send-verification-email",
				body: `{"email":"` + email + `","callbackURL":"https://app.example.com/verified"}`})
			if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != `{"status":true}` {
				t.Errorf("%s: %d %s", email, res.Code, res.Body)
			}
		}
		link := a.link(t, "ada@example.com", 2, "/api/auth/verify-email?")
		if u, _ := url.Parse(link); u.Query().Get("callbackURL") != "https://app.example.com/verified" {
			t.Errorf("second link %s", link)
		}
		// Three more to ada make five in the window; the sixth is answered the same, not sent.
		for range 4 {
			a.do(request{method: http.MethodPost, path: "/api/auth/send-verification-email",
				body: `{"email":"ada@example.com"}`}).decode(t, http.StatusOK, &struct{}{})
		}
		outboxDrained(t, a.store)
		if n := len(a.smtp.To("ada@example.com")); n != 5 {
			t.Errorf("%d messages to ada, want 5 (the limit per address)", n)
		}
		if n := len(a.smtp.To("nobody@example.com")) + len(a.smtp.To("vera@example.com")); n != 0 {
			t.Errorf("%d messages to addresses without an unverified account", n)
		}
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/send-verification-email",
			body: `{"email":"ada@example.com","callbackURL":"//evil.example"}`}), http.StatusForbidden, "INVALID_CALLBACK_URL")
	})
}

// With GATEHOUSE_REQUIRE_EMAIL_VERIFICATION: sign-up signs nobody in and does not tell a taken
// address; sign-in with the right password is 403 EMAIL_NOT_VERIFIED and mails a fresh link;
// once verified, sign-in works.
func TestRequireEmailVerification(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.RequireEmailVerification = true
		a := newMailApp(t, b, cfg)
		res := a.signUp("Ada", "ada@example.com", "correct-horse-battery", "")
		var up map[string]json.RawMessage
		res.decode(t, http.StatusOK, &up)
		if string(up["token"]) != "null" || len(res.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("sign-up = %s, cookies %v", res.Body, res.Header().Values("Set-Cookie"))
		}
		var created authUserBody
		_ = json.Unmarshal(up["user"], &created)
		// The same address again: the same kind of answer, with a user that is not stored.
		res = a.signUp("Eve", "ada@example.com", "another-password-1", "")
		var dup struct {
			Token *string      `json:"token"`
			User  authUserBody `json:"user"`
		}
		res.decode(t, http.StatusOK, &dup)
		if dup.Token != nil || dup.User.ID == created.ID || dup.User.Email != "ada@example.com" || dup.User.EmailVerified {
			t.Errorf("duplicate sign-up = %s", res.Body)
		}
		first := a.link(t, "ada@example.com", 1, "/api/auth/verify-email?")

		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":"wrong-password-1"}`}), http.StatusUnauthorized, "INVALID_EMAIL_OR_PASSWORD")
		wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":"correct-horse-battery"}`}), http.StatusForbidden, "EMAIL_NOT_VERIFIED")
		second := a.link(t, "ada@example.com", 2, "/api/auth/verify-email?")
		if second == first {
			t.Fatal("the fresh link is the first one")
		}
		// A browser form post goes back to its callbackURL with login_error (and, the callbackURL
		// being the sign-in page's own continuation, the typed email as login_hint).
		res = a.do(form("/api/auth/sign-in/email", url.Values{"email": {"ada@example.com"},
			"password": {"correct-horse-battery"}, "callbackURL": {"/api/auth/oauth2/authorize?client_id=c"}}))
		if loc := res.Header().Get("Location"); res.Code != http.StatusSeeOther || loc != "/api/auth/oauth2/authorize?client_id=c&login_error=email_not_verified&login_hint=ada%40example.com" {
			t.Errorf("form sign-in = %d to %q", res.Code, loc)
		}

		a.do(request{method: http.MethodGet, path: second}).decode(t, http.StatusOK, &struct{}{})
		if in, _ := a.signIn(t, "ada@example.com", "correct-horse-battery"); !in.User.EmailVerified || in.User.ID != created.ID {
			t.Errorf("sign-in after verifying = %+v", in)
		}
		// The older link was voided by the verification; opened now it reports the address verified.
		a.do(request{method: http.MethodGet, path: first}).decode(t, http.StatusOK, &struct{}{})
	})
}

// Someone signed up with another person's address and changed the password since the link was
// mailed: when the address's owner opens the link, the account is theirs — the password set
// after the link was mailed and every session are gone.
func TestVerificationLinkTakesOverTheAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		res := a.signUp("Mallory", "victim@example.com", "mallory-password-1", "")
		res.decode(t, http.StatusOK, &struct{}{})
		squatter := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
		res = a.do(withCookie(squatter, request{method: http.MethodPost, path: "/api/auth/change-password",
			body: `{"currentPassword":"mallory-password-1","newPassword":"mallory-password-2"}`}))
		res.decode(t, http.StatusOK, &struct{}{})
		squatter = cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))

		link := a.link(t, "victim@example.com", 1, "/api/auth/verify-email?")
		res = a.do(request{method: http.MethodGet, path: link})
		res.decode(t, http.StatusOK, &struct{}{})
		if len(res.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("a browser that was not signed in got a session: %v", res.Header().Values("Set-Cookie"))
		}
		if got := a.getSession(t, squatter); got != nil {
			t.Errorf("the squatter's session survived: %+v", got)
		}
		for _, pw := range []string{"mallory-password-1", "mallory-password-2"} {
			wantCode(t, a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
				body: `{"email":"victim@example.com","password":"` + pw + `"}`}), http.StatusUnauthorized, "INVALID_EMAIL_OR_PASSWORD")
		}
		claims := auditEntries(t, a.store, identity.EmailClaimAction)
		if len(claims) != 1 || claims[0].Metadata["passwordRemoved"] != true || claims[0].Metadata["passwordKept"] != false ||
			claims[0].Metadata["sessionsEnded"] != float64(1) {
			t.Errorf("claim audit rows = %+v", claims)
		}
	})
}
