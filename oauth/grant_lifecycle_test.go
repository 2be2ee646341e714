package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// grantState is what survives of a user's credentials, each seen through the endpoint that
// uses it (the columns of "What survives what" in docs/security.md).
type grantState struct {
	SessionHere  bool // get-session in the browser that acted answers a session
	SessionOther bool // get-session in the user's other browser answers a session
	AccessToken  bool // introspection of the grant's access token: active
	RefreshToken bool // x/oauth2 refreshes the grant
	Consent      bool // /authorize with prompt=none answers a code, not consent_required
	APIKey       bool // the service-account key the user created authenticates
}

// lifecycleUser is a user signed in on two browsers (here, which acts, and another device)
// who authorized the consent-asking client (a grant with a refresh token, and a consent) and
// created a service-account API key.
type lifecycleUser struct {
	apptest.User
	password    string
	here, other *apptest.Browser
	cfg         *oauth2.Config
	tok         *oauth2.Token
	apiKey      string
}

// browserJSON sends a JSON request from br with a trusted Origin, as the better-auth client does.
func browserJSON(br *apptest.Browser, method, path, body string) apptest.Page {
	req, _ := http.NewRequest(method, br.Base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Origin", br.Base)
	return br.Do(req)
}

func (e *providerEnv) newLifecycleUser(t *testing.T, shop apptest.OIDCClient, email string) *lifecycleUser {
	t.Helper()
	ctx := context.Background()
	u := &lifecycleUser{User: e.app.NewUser(t, "Ada Lovelace", email), password: "password-" + email}
	// An admin of the organization, so that she may create a service account.
	err := e.app.Store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.AddMember(ctx, e.project.OrganizationID, u.ID, server.RoleAdmin)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	u.here, u.other = apptest.NewBrowser(t, e.url), apptest.NewBrowser(t, e.url)
	u.here.SignIn(t, u.Email, u.password)
	u.other.SignIn(t, u.Email, u.password)
	u.cfg = e.clientConfig(shop, *shop.ClientSecret, "openid", "email", "offline_access")
	u.tok = e.userGrant(t, u.here, u.cfg)
	res := browserJSON(u.here, "POST", "/api/v1/projects/"+e.project.ID+"/service-accounts", `{"name":"ci","scopes":["project:read"]}`)
	var sa struct {
		Data struct {
			APIKey string `json:"apiKey"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(res.Body), &sa); err != nil || res.Status != http.StatusCreated || sa.Data.APIKey == "" {
		t.Fatalf("create a service account: %d %s", res.Status, res.Body)
	}
	u.apiKey = sa.Data.APIKey
	return u
}

// observe reads u's grantState through the endpoints. A refresh that works replaces u's
// tokens with the new ones (the old access token is retired by the rotation), so observe can
// run again.
func (e *providerEnv) observe(t *testing.T, u *lifecycleUser, shopID string) grantState {
	t.Helper()
	var s grantState
	session := func(br *apptest.Browser) bool {
		res := br.Get("/api/auth/get-session")
		if res.Status != http.StatusOK {
			t.Fatalf("get-session: %d %s", res.Status, res.Body)
		}
		return strings.TrimSpace(res.Body) != "null"
	}
	s.SessionHere, s.SessionOther = session(u.here), session(u.other)

	// Introspection first: a refresh retires the access token it replaces.
	switch res := e.introspect(t, u.tok.AccessToken); {
	case res.Status == http.StatusOK && res.Body == "{\"active\":false}\n":
	case res.Status == http.StatusOK && strings.HasPrefix(res.Body, `{"active":true`):
		s.AccessToken = true
	default:
		t.Fatalf("introspection: %d %s", res.Status, res.Body)
	}
	refreshed, err := u.cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: u.tok.RefreshToken}).Token()
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
		s.RefreshToken, u.tok = true, refreshed
	case errors.As(err, &re) && re.ErrorCode == "invalid_grant":
	default:
		t.Fatalf("refresh: %v", err)
	}

	// Consent: ask without prompting, signed in again here when the event signed her out. A
	// deleted user cannot sign in; no endpoint lists consents, so the store says.
	signedIn := s.SessionHere
	if !signedIn {
		res := u.here.Post("/api/auth/sign-in/email", url.Values{"email": {u.Email}, "password": {u.password}, "callbackURL": {"/"}}, e.url)
		signedIn = res.Status == http.StatusSeeOther && res.Header.Get("Location") == "/"
	}
	if !signedIn {
		consents, err := e.app.Store.OAuthConsents(context.Background(), u.ID, shopID)
		if err != nil {
			t.Fatal(err)
		}
		s.Consent = len(consents) > 0
	} else {
		res := u.here.Get(apptest.AuthorizeURL(e.url, shopID, u.cfg.RedirectURL, oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()),
			"scope", "openid email offline_access", "prompt", "none"))
		switch q := res.RedirectParams(t, "prompt=none", u.cfg.RedirectURL+"?"); {
		case q.Get("code") != "":
			s.Consent = true
		case q.Get("error") != "consent_required":
			t.Fatalf("prompt=none: %v", q)
		}
	}

	req, _ := http.NewRequest("GET", e.url+"/api/v1/projects/"+e.project.ID, nil)
	req.Header.Set("X-API-Key", u.apiKey)
	switch res := u.other.Do(req); res.Status {
	case http.StatusOK:
		s.APIKey = true
	case http.StatusUnauthorized:
	default:
		t.Fatalf("API key: %d %s", res.Status, res.Body)
	}
	return s
}

// TestOAuthGrantLifecycle walks the rows of "What survives what" (docs/security.md) that exist: for each
// event, a fresh user with two signed-in browsers, a grant of a consent-asking client and an
// API key, first seen whole, then after the event.
func TestOAuthGrantLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		shop, _ := env.create(t, consentClientBody)
		smtp := startMailWorker(t, env)
		changePassword := func(revokeOthers string) func(t *testing.T, u *lifecycleUser) {
			return func(t *testing.T, u *lifecycleUser) {
				body := `{"currentPassword":"` + u.password + `","newPassword":"a-new-password-1234"` + revokeOthers + `}`
				if res := browserJSON(u.here, "POST", "/api/auth/change-password", body); res.Status != http.StatusOK {
					t.Fatalf("change-password: %d %s", res.Status, res.Body)
				}
				u.password = "a-new-password-1234"
			}
		}
		// passwordReset resets the password through the mailed link, the address verified before
		// (verified) or never (the reset then claims the account).
		passwordReset := func(verified bool) func(t *testing.T, u *lifecycleUser) {
			return func(t *testing.T, u *lifecycleUser) {
				if verified {
					if err := env.app.Store.InTx(context.Background(), func(tx *store.Tx) error {
						_, err := tx.VerifyEmail(context.Background(), u.ID)
						return err
					}); err != nil {
						t.Fatal(err)
					}
				}
				if res := browserJSON(u.other, "POST", "/api/auth/request-password-reset", `{"email":"`+u.Email+`"}`); res.Status != http.StatusOK {
					t.Fatalf("request-password-reset: %d %s", res.Status, res.Body)
				}
				link := smtp.WaitFor(t, u.Email, 20*time.Second).Link(t, env.url+"/api/auth/reset-password/")
				token := strings.TrimPrefix(link, env.url+"/api/auth/reset-password/")
				body := `{"newPassword":"a-reset-password-1234","token":"` + token + `"}`
				if res := browserJSON(u.other, "POST", "/api/auth/reset-password", body); res.Status != http.StatusOK {
					t.Fatalf("reset-password: %d %s", res.Status, res.Body)
				}
				u.password = "a-reset-password-1234"
			}
		}
		rows := []struct {
			name  string
			event func(t *testing.T, u *lifecycleUser)
			want  grantState
		}{
			{"sign-out", func(t *testing.T, u *lifecycleUser) {
				if res := browserJSON(u.here, "POST", "/api/auth/sign-out", `{}`); res.Status != http.StatusOK || res.Body != `{"success":true}`+"\n" {
					t.Fatalf("sign-out: %d %s", res.Status, res.Body)
				}
			}, grantState{SessionHere: false, SessionOther: true, AccessToken: true, RefreshToken: true, Consent: true, APIKey: true}},
			{"password change", changePassword(""),
				grantState{SessionHere: true, SessionOther: false, AccessToken: true, RefreshToken: true, Consent: true, APIKey: true}},
			{"password change with revokeOtherSessions", changePassword(`,"revokeOtherSessions":true`),
				grantState{SessionHere: true, SessionOther: false, AccessToken: false, RefreshToken: false, Consent: true, APIKey: true}},
			{"email verification", func(t *testing.T, u *lifecycleUser) {
				// The fixture user's address was never verified: the link claims the account.
				if res := browserJSON(u.here, "POST", "/api/auth/send-verification-email", `{"email":"`+u.Email+`"}`); res.Status != http.StatusOK {
					t.Fatalf("send-verification-email: %d %s", res.Status, res.Body)
				}
				link := smtp.WaitFor(t, u.Email, 20*time.Second).Link(t, env.url+"/api/auth/verify-email?")
				if res := u.here.Get(link); res.Status != http.StatusOK {
					t.Fatalf("verify-email: %d %s", res.Status, res.Body)
				}
			}, grantState{SessionHere: true, SessionOther: false, AccessToken: false, RefreshToken: false, Consent: false, APIKey: true}},
			{"password reset", passwordReset(true),
				grantState{SessionHere: false, SessionOther: false, AccessToken: false, RefreshToken: false, Consent: true, APIKey: true}},
			{"password reset of a never-verified address", passwordReset(false),
				grantState{SessionHere: false, SessionOther: false, AccessToken: false, RefreshToken: false, Consent: false, APIKey: true}},
			{"subject deletion", func(t *testing.T, u *lifecycleUser) {
				res := env.app.Do(env.owner.As(apptest.Request{Method: "DELETE", Path: "/api/v1/projects/" + env.project.ID + "/subjects/" + u.ID,
					Headers: map[string]string{"Origin": env.url}}))
				var d struct {
					Data struct {
						Deleted  bool `json:"deleted"`
						Consents int  `json:"consents"`
					} `json:"data"`
				}
				res.Decode(t, http.StatusOK, &d)
				if !d.Data.Deleted || d.Data.Consents != 1 {
					t.Errorf("subject deletion: %s; want deleted with 1 consent", res.Body)
				}
			}, grantState{SessionHere: false, SessionOther: false, AccessToken: false, RefreshToken: false, Consent: false, APIKey: true}},
			{"account deletion", func(t *testing.T, u *lifecycleUser) {
				res := browserJSON(u.here, "POST", "/api/auth/delete-user", `{"password":"`+u.password+`"}`)
				if res.Status != http.StatusOK || res.Body != `{"message":"User deleted","success":true}`+"\n" {
					t.Fatalf("delete-user: %d %s", res.Status, res.Body)
				}
			}, grantState{SessionHere: false, SessionOther: false, AccessToken: false, RefreshToken: false, Consent: false, APIKey: true}},
		}
		for i, row := range rows {
			t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
				u := env.newLifecycleUser(t, shop, "ada-lifecycle-"+string(rune('a'+i))+"@example.com")
				whole := grantState{true, true, true, true, true, true}
				if got := env.observe(t, u, shop.ID); got != whole {
					t.Fatalf("before %s: %+v, want %+v", row.name, got, whole)
				}
				row.event(t, u)
				if got := env.observe(t, u, shop.ID); got != row.want {
					t.Errorf("after %s:\n got %+v\nwant %+v", row.name, got, row.want)
				}
			})
		}
	})
}

// startMailWorker runs, for the test, the outbox worker main runs, delivering env's mail to a
// real SMTP server, which it returns.
func startMailWorker(t *testing.T, env *providerEnv) *mailtest.Server {
	t.Helper()
	smtp := mailtest.Start(t, mailtest.Options{})
	cfg := testConfig()
	smtpCfg, err := mail.ParseSMTPURL(smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SMTP, cfg.MailFrom = &smtpCfg, "no-reply@gatehouse.test"
	ring, err := seal.NewKeyring(cfg.SecretKey)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.OutboxWorker(env.app.Store, ring, slog.New(slog.DiscardHandler), outbox.WorkerConfig{PollInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return smtp
}
