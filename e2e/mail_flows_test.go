package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// mailFlows is the app served over HTTP on a loopback port, requiring verified addresses, its
// mail delivered by the outbox worker over SMTP (STARTTLS required, AUTH PLAIN) to a real SMTP
// server the test runs. The test talks to it only over HTTP and reads links only out of the
// messages the SMTP server received: nothing is read from the database.
type mailFlows struct {
	t    *testing.T
	base string
	smtp *mailtest.Server
}

func startMailFlows(t *testing.T, b storetest.Backend) *mailFlows {
	t.Helper()
	smtp := mailtest.Start(t, mailtest.Options{STARTTLS: true, Username: "gatehouse", Password: "mail-pass"})
	smtpCfg, err := mail.ParseSMTPURL(smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32), RequireEmailVerification: true,
		TrustedOrigins: []string{"https://app.example.com"},
		SMTP:           &smtpCfg, MailFrom: "Gatehouse <no-reply@gatehouse.test>", SMTPTLSConfig: smtp.ClientTLS}
	st := b.Open(t)
	app, err := newServer(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	ring, err := seal.NewKeyring(cfg.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.OutboxWorker(st, ring, log, outbox.WorkerConfig{PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &mailFlows{t: t, base: base, smtp: smtp}
}

// browser is an HTTP client with a cookie jar that follows no redirects and sends the
// server's Origin on unsafe requests.
type browser struct {
	f      *mailFlows
	client *http.Client
}

func (f *mailFlows) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{f: f, client: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends method path (a path or a URL on the server) with a JSON body ("" for none) and
// returns the status, the Location header and the body.
func (b *browser) do(method, path, body string) (int, string, string) {
	b.f.t.Helper()
	if strings.HasPrefix(path, "/") {
		path = b.f.base + path
	}
	req, err := http.NewRequest(method, path, strings.NewReader(body))
	if err != nil {
		b.f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Origin", b.f.base)
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.f.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(raw)
}

// want sends the request and fails unless the answer has status; it returns the body.
func (b *browser) want(status int, method, path, body string) string {
	b.f.t.Helper()
	got, loc, out := b.do(method, path, body)
	if got != status {
		b.f.t.Fatalf("%s %s = %d (Location %q) %s, want %d", method, path, got, loc, out, status)
	}
	return out
}

// message waits for the n-th message to address and returns it.
func (f *mailFlows) message(address string, n int) mailtest.Message {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(f.smtp.To(address)) < n {
		if time.Now().After(deadline) {
			f.t.Fatalf("%d messages to %s within 20s, want %d", len(f.smtp.To(address)), address, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f.smtp.To(address)[n-1]
}

// link waits for the n-th message to address and returns the link in its text part that
// starts with the server's base URL + prefix.
func (f *mailFlows) link(address string, n int, prefix string) string {
	f.t.Helper()
	return f.message(address, n).Link(f.t, f.base+prefix)
}

// TestMailFlows walks every account flow that mails a link, end to end over HTTP and SMTP:
// sign-up → verification link → sign-in; forgot password → reset link → new password (the old
// session is 401, the old password refused); change email → link → the new address signs in;
// delete the account.
func TestMailFlows(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			f := startMailFlows(t, b)
			ada := f.browser()
			const signUp = `{"name":"Ada","email":"ada@example.com","password":"correct-horse-battery","callbackURL":"/welcome"}`

			// Sign-up starts no session; the link verifies and goes to the callbackURL.
			if out := ada.want(http.StatusOK, http.MethodPost, "/api/auth/sign-up/email", signUp); !strings.Contains(out, `"token":null`) {
				t.Fatalf("sign-up = %s", out)
			}
			ada.want(http.StatusForbidden, http.MethodPost, "/api/auth/sign-in/email",
				`{"email":"ada@example.com","password":"correct-horse-battery"}`)
			if msg := f.smtp.WaitFor(t, "ada@example.com", 20*time.Second); msg.Subject != "Confirm your email address for Gatehouse" {
				t.Errorf("verification mail %q", msg.Subject)
			}
			if _, loc, _ := ada.do(http.MethodGet, f.link("ada@example.com", 1, "/api/auth/verify-email?"), ""); loc != "/welcome" {
				t.Fatalf("verification link went to %q", loc)
			}
			ada.want(http.StatusOK, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"correct-horse-battery"}`)
			ada.want(http.StatusOK, http.MethodGet, "/api/auth/list-sessions", "")

			// Forgot password: the link forwards its token to redirectTo; the reset ends the
			// session and the old password.
			other := f.browser()
			other.want(http.StatusOK, http.MethodPost, "/api/auth/request-password-reset",
				`{"email":"ada@example.com","redirectTo":"https://app.example.com/reset"}`)
			_, loc, _ := other.do(http.MethodGet, f.link("ada@example.com", 3, "/api/auth/reset-password/"), "")
			to, err := url.Parse(loc)
			if err != nil || to.Host != "app.example.com" || to.Path != "/reset" || len(to.Query().Get("token")) != 43 {
				t.Fatalf("reset link went to %q", loc)
			}
			other.want(http.StatusOK, http.MethodPost, "/api/auth/reset-password",
				`{"newPassword":"frequency-hopping-1942","token":"`+to.Query().Get("token")+`"}`)
			ada.want(http.StatusUnauthorized, http.MethodGet, "/api/auth/list-sessions", "")
			other.want(http.StatusUnauthorized, http.MethodPost, "/api/auth/sign-in/email",
				`{"email":"ada@example.com","password":"correct-horse-battery"}`)
			ada.want(http.StatusOK, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"frequency-hopping-1942"}`)

			// Change email: a notice to the old address, the link to the new one.
			ada.want(http.StatusOK, http.MethodPost, "/api/auth/change-email", `{"newEmail":"ada.king@example.com","callbackURL":"/settings"}`)
			// (The old address had the sign-up's link, the refused sign-in's fresh one and the reset.)
			if notice := f.message("ada@example.com", 4); notice.Subject != "Your Gatehouse email address is about to change" ||
				!strings.Contains(notice.Text, "from ada@example.com to ada.king@example.com") {
				t.Errorf("notice to the old address %q:\n%s", notice.Subject, notice.Text)
			}
			if _, loc, _ := f.browser().do(http.MethodGet, f.link("ada.king@example.com", 1, "/api/auth/verify-email?"), ""); loc != "/settings" {
				t.Fatalf("change link went to %q", loc)
			}
			var session struct {
				User struct {
					Email         string `json:"email"`
					EmailVerified bool   `json:"emailVerified"`
				} `json:"user"`
			}
			if err := json.Unmarshal([]byte(ada.want(http.StatusOK, http.MethodGet, "/api/auth/get-session", "")), &session); err != nil ||
				session.User.Email != "ada.king@example.com" || !session.User.EmailVerified {
				t.Errorf("session after the change = %+v, %v", session, err)
			}
			again := f.browser()
			again.want(http.StatusUnauthorized, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"frequency-hopping-1942"}`)
			again.want(http.StatusOK, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada.king@example.com","password":"frequency-hopping-1942"}`)

			// Delete the account: every session and the sign-in go.
			again.want(http.StatusOK, http.MethodPost, "/api/auth/delete-user", `{"password":"frequency-hopping-1942"}`)
			ada.want(http.StatusUnauthorized, http.MethodGet, "/api/auth/list-sessions", "")
			f.browser().want(http.StatusUnauthorized, http.MethodPost, "/api/auth/sign-in/email",
				`{"email":"ada.king@example.com","password":"frequency-hopping-1942"}`)
		})
	}
}
