package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// acctProblem is a decoded /api/auth problem with better-auth's code and message.
type acctProblem struct {
	problem
	Code    string `json:"code"`
	Message string `json:"message"`
}

// wantAuthProblem asserts an /api/auth problem's status, type kind and better-auth code, and
// that message is present.
func (r response) wantAuthProblem(t *testing.T, status int, kind, code string) acctProblem {
	t.Helper()
	if r.Code != status {
		t.Fatalf("status = %d, want %d; body %s", r.Code, status, r.Body)
	}
	if ct := r.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content-type = %q, want application/problem+json", ct)
	}
	var p acctProblem
	if err := json.Unmarshal(r.Body.Bytes(), &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, r.Body)
	}
	if want := testBaseURL + "/problems/" + kind; p.Type != want {
		t.Errorf("type = %q, want %q", p.Type, want)
	}
	if p.Status != status || p.Code != code || p.Message == "" || p.Title == "" {
		t.Errorf("problem = %+v, want status %d code %s with message and title", p, status, code)
	}
	if p.RequestID == "" || p.RequestID != r.Header().Get("X-Request-Id") {
		t.Errorf("requestId = %q, header %q", p.RequestID, r.Header().Get("X-Request-Id"))
	}
	return p
}

// authUserBody and authSessionBody are the wire forms, decoded independently of gen.
type authUserBody struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Email         string    `json:"email"`
	EmailVerified bool      `json:"emailVerified"`
	Image         *string   `json:"image"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

type authSessionBody struct {
	ID                   string    `json:"id"`
	Token                string    `json:"token"`
	UserID               string    `json:"userId"`
	ExpiresAt            time.Time `json:"expiresAt"`
	CreatedAt            time.Time `json:"createdAt"`
	UpdatedAt            time.Time `json:"updatedAt"`
	IPAddress            string    `json:"ipAddress"`
	UserAgent            string    `json:"userAgent"`
	ActiveOrganizationID *string   `json:"activeOrganizationId"`
}

type signInBody struct {
	Redirect bool         `json:"redirect"`
	Token    string       `json:"token"`
	URL      *string      `json:"url"`
	User     authUserBody `json:"user"`
}

type sessionWithUserBody struct {
	Session authSessionBody `json:"session"`
	User    authUserBody    `json:"user"`
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9]{32}$`)

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// form is a form-urlencoded POST.
func form(path string, values url.Values) request {
	return request{method: http.MethodPost, path: path, body: values.Encode(),
		headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
}

// sessionCookie returns the one session cookie the response sets, failing when there is none.
func (r response) sessionCookie(t *testing.T, name string) *http.Cookie {
	t.Helper()
	var found *http.Cookie
	for _, c := range r.Result().Cookies() {
		if c.Name == name {
			if found != nil {
				t.Fatalf("two %s cookies set: %v", name, r.Header().Values("Set-Cookie"))
			}
			found = c
		}
	}
	if found == nil {
		t.Fatalf("no %s cookie set; Set-Cookie %v", name, r.Header().Values("Set-Cookie"))
	}
	return found
}

// cookieHeader is the Cookie request header that sends c back.
func cookieHeader(c *http.Cookie) string { return c.Name + "=" + c.Value }

// withCookie returns r sent with the Cookie header cookie and a trusted Origin.
func withCookie(cookie string, r request) request {
	h := map[string]string{"Cookie": cookie, "Origin": testBaseURL}
	for k, v := range r.headers {
		h[k] = v
	}
	r.headers = h
	return r
}

// signIn signs email in through the API and returns the body and the Cookie header.
func (a *testApp) signIn(t *testing.T, email, password string) (signInBody, string) {
	t.Helper()
	res := a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
		body: `{"email":` + jsonString(email) + `,"password":` + jsonString(password) + `}`})
	var body signInBody
	res.decode(t, http.StatusOK, &body)
	return body, cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
}

// auditEntries returns the audit rows with action.
func auditEntries(t *testing.T, st *store.Store, action string) []store.AuditEntry {
	t.Helper()
	all, err := st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, e := range all {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// wantAuditRow asserts one row of action by user userID about userID, outside any
// organization, whose fields hold none of secrets.
func wantAuditRow(t *testing.T, st *store.Store, action, userID string, secrets ...string) {
	t.Helper()
	rows := auditEntries(t, st, action)
	if len(rows) != 1 {
		t.Fatalf("%d %s audit rows, want 1", len(rows), action)
	}
	e := rows[0]
	if e.ActorType != store.ActorUser || e.ActorID != userID || e.TargetType != "user" || e.TargetID != userID ||
		e.OrganizationID != "" || e.ProjectID != "" || e.RequestID == "" || e.IPAddress != "192.0.2.10" {
		t.Errorf("%s audit row = %+v", action, e)
	}
	dump, _ := json.Marshal(e)
	for _, s := range secrets {
		if s != "" && strings.Contains(string(dump), s) {
			t.Errorf("%s audit row contains a secret: %s", action, dump)
		}
	}
	if strings.Contains(string(dump), "argon2id") {
		t.Errorf("%s audit row contains a password hash: %s", action, dump)
	}
}

func TestSignUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		ctx := context.Background()

		t.Run("json", func(t *testing.T) {
			before := time.Now().Add(-time.Second)
			res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
				body: `{"name":"Ada Lovelace","email":" Ada@Example.COM ","password":"correct-horse-battery","image":"https://img.example/ada.png"}`})
			var body struct {
				Token *string      `json:"token"`
				User  authUserBody `json:"user"`
			}
			res.decode(t, http.StatusOK, &body)
			if body.Token == nil || !tokenRE.MatchString(*body.Token) {
				t.Fatalf("token = %v, want 32 alphanumerics", body.Token)
			}
			u := body.User
			if !strings.HasPrefix(u.ID, "usr_") || u.Name != "Ada Lovelace" || u.Email != "ada@example.com" ||
				u.EmailVerified || u.Image == nil || *u.Image != "https://img.example/ada.png" ||
				u.CreatedAt.Before(before) || !u.UpdatedAt.Equal(u.CreatedAt) {
				t.Errorf("user = %+v", u)
			}
			if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q", cc)
			}
			c := res.sessionCookie(t, "gatehouse.session_token")
			if tok, ok := oauth.VerifySignedToken(app.srv.cookieKey, c.Value); !ok || tok != *body.Token {
				t.Errorf("cookie carries %q, %v; want the token", tok, ok)
			}
			if c.MaxAge != 604800 {
				t.Errorf("Max-Age = %d", c.MaxAge)
			}
			// The user, its argon2id password and the session are stored.
			stored, hash, err := st.UserByEmail(ctx, "ada@example.com")
			if err != nil || stored.ID != u.ID {
				t.Fatalf("stored user %+v, %v", stored, err)
			}
			if ok, err := oauth.VerifyPassword(hash, "correct-horse-battery"); !ok || err != nil {
				t.Errorf("stored hash %q does not verify: %v", hash, err)
			}
			sess, _, err := st.SessionByTokenHash(ctx, oauth.HashToken(*body.Token))
			if err != nil || sess.UserID != u.ID || !sess.RememberMe || sess.IPAddress != "192.0.2.10" {
				t.Errorf("session %+v, %v", sess, err)
			}
			// The cookie authenticates.
			var got sessionWithUserBody
			app.do(withCookie(cookieHeader(c), request{method: http.MethodGet, path: "/api/auth/get-session"})).
				decode(t, http.StatusOK, &got)
			if got.User.ID != u.ID || got.Session.Token != *body.Token {
				t.Errorf("get-session = %+v", got)
			}
			wantAuditRow(t, st, "user.sign_up", u.ID, "correct-horse-battery", *body.Token, oauth.HashToken(*body.Token), c.Value)
		})

		t.Run("form", func(t *testing.T) {
			res := app.do(form("/api/auth/sign-up/email", url.Values{
				"name": {"Bob"}, "email": {"bob@example.com"}, "password": {"correct-horse-battery"}, "rememberMe": {"false"}}))
			var body struct {
				Token string       `json:"token"`
				User  authUserBody `json:"user"`
			}
			res.decode(t, http.StatusOK, &body)
			if body.User.Email != "bob@example.com" || body.User.Image != nil || !tokenRE.MatchString(body.Token) {
				t.Errorf("body = %+v", body)
			}
			if c := res.sessionCookie(t, "gatehouse.session_token"); c.MaxAge != 0 {
				t.Errorf("rememberMe false: Max-Age = %d, want none", c.MaxAge)
			}
			if _, _, err := st.UserByEmail(ctx, "bob@example.com"); err != nil {
				t.Error(err)
			}
		})

		t.Run("duplicate email", func(t *testing.T) {
			res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
				body: `{"name":"Imposter","email":"ADA@example.com","password":"another-password"}`})
			p := res.wantAuthProblem(t, http.StatusUnprocessableEntity, "http-4xx", "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL")
			if p.Message != "User already exists. Use another email." {
				t.Errorf("message = %q", p.Message)
			}
			if len(res.Header().Values("Set-Cookie")) != 0 {
				t.Error("a failed sign-up set a cookie")
			}
			if n := len(auditEntries(t, st, "user.sign_up")); n != 2 {
				t.Errorf("%d sign-up audit rows, want 2", n)
			}
		})

		t.Run("validation", func(t *testing.T) {
			for _, tc := range []struct {
				name, body string
				path       []string
			}{
				{"short password", `{"name":"C","email":"c@example.com","password":"short"}`, []string{"body", "password"}},
				{"long password", `{"name":"C","email":"c@example.com","password":"` + strings.Repeat("p", 129) + `"}`, []string{"body", "password"}},
				{"missing name", `{"email":"c@example.com","password":"long-enough"}`, []string{"body", "name"}},
				{"unknown member", `{"name":"C","email":"c@example.com","password":"long-enough","role":"admin"}`, []string{"body", "role"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email", body: tc.body})
					p := res.wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")
					found := false
					for _, e := range p.Errors {
						found = found || strings.Join(e.Path, "/") == strings.Join(tc.path, "/")
					}
					if !found {
						t.Errorf("errors = %+v, want one at %v", p.Errors, tc.path)
					}
					if strings.Contains(res.Body.String(), "short") {
						t.Errorf("problem echoes the password: %s", res.Body)
					}
				})
			}
			if _, _, err := st.UserByEmail(ctx, "c@example.com"); err == nil {
				t.Error("an invalid sign-up created the user")
			}
		})

		t.Run("untrusted callbackURL", func(t *testing.T) {
			res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-up/email",
				body: `{"name":"D","email":"d@example.com","password":"long-enough","callbackURL":"https://evil.example/welcome"}`})
			res.wantAuthProblem(t, http.StatusForbidden, "http-403", "INVALID_CALLBACK_URL")
			if _, _, err := st.UserByEmail(ctx, "d@example.com"); err == nil {
				t.Error("the refused sign-up created the user")
			}
		})
	})
}

func TestSignInCookie(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	for i, tc := range []struct {
		base, name, attrs string
	}{
		{"http://gatehouse.test", "gatehouse.session_token", "; Path=/; Max-Age=604800; HttpOnly; SameSite=Lax"},
		{"https://gatehouse.test", "__Secure-gatehouse.session_token", "; Path=/; Max-Age=604800; HttpOnly; Secure; SameSite=Lax"},
	} {
		t.Run(tc.base, func(t *testing.T) {
			cfg := testConfig()
			cfg.BaseURL = tc.base
			app := newTestApp(t, st, cfg)
			u := app.newUser(t, "Ada", "ada-"+strconv.Itoa(i)+"@example.com")
			res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
				body: `{"email":` + jsonString(u.Email) + `,"password":` + jsonString("password-"+u.Email) + `}`})
			var body signInBody
			res.decode(t, http.StatusOK, &body)
			if body.Redirect || body.URL != nil || !tokenRE.MatchString(body.Token) || body.User.ID != u.ID || body.User.Email != u.Email {
				t.Errorf("body = %+v", body)
			}
			if !strings.Contains(res.Body.String(), `"url":null`) {
				t.Errorf("url is not null: %s", res.Body)
			}
			set := res.Header().Values("Set-Cookie")
			if len(set) != 1 {
				t.Fatalf("Set-Cookie = %v, want one", set)
			}
			value, attrs, ok := strings.Cut(strings.TrimPrefix(set[0], tc.name+"="), ";")
			if !strings.HasPrefix(set[0], tc.name+"=") || !ok || "; "+strings.TrimPrefix(attrs, " ") != tc.attrs {
				t.Fatalf("Set-Cookie = %q, want %s=<value>%s", set[0], tc.name, tc.attrs)
			}
			// value = encodeURIComponent(token + "." + base64std(HMAC-SHA256(key, token))).
			decoded, err := url.PathUnescape(value)
			if err != nil {
				t.Fatal(err)
			}
			tok, sig, _ := strings.Cut(decoded, ".")
			mac := hmac.New(sha256.New, app.srv.cookieKey)
			mac.Write([]byte(tok))
			if tok != body.Token || len(sig) != 44 || !strings.HasSuffix(sig, "=") ||
				sig != base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
				t.Errorf("cookie value %q: token %q, signature %q", value, tok, sig)
			}
			if strings.ContainsAny(value, "+/=") {
				t.Errorf("cookie value %q is not URL-encoded", value)
			}
		})
	}
}

func TestSignIn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		ctx := context.Background()
		u := app.newUser(t, "Ada", "ada@example.com")
		pw := "password-ada@example.com"

		t.Run("rotation", func(t *testing.T) {
			first, c1 := app.signIn(t, "  ADA@example.com ", pw)
			second, c2 := app.signIn(t, "ada@example.com", pw)
			if first.Token == second.Token || c1 == c2 || first.Token == u.Token {
				t.Fatalf("sign-in reused a token: %q %q", first.Token, second.Token)
			}
			for _, c := range []string{c1, c2} {
				app.do(withCookie(c, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).decode(t, http.StatusOK, &[]authSessionBody{})
			}
		})

		t.Run("rememberMe false", func(t *testing.T) {
			res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
				body: `{"email":"ada@example.com","password":` + jsonString(pw) + `,"rememberMe":false}`})
			var body signInBody
			res.decode(t, http.StatusOK, &body)
			if set := res.Header().Get("Set-Cookie"); strings.Contains(set, "Max-Age") {
				t.Errorf("Set-Cookie = %q, want no Max-Age", set)
			}
			sess, _, err := st.SessionByTokenHash(ctx, oauth.HashToken(body.Token))
			if err != nil || sess.RememberMe {
				t.Errorf("session %+v, %v; want remember_me false", sess, err)
			}
		})

		t.Run("form", func(t *testing.T) {
			res := app.do(form("/api/auth/sign-in/email", url.Values{"email": {"ada@example.com"}, "password": {pw}}))
			var body signInBody
			res.decode(t, http.StatusOK, &body)
			if body.User.ID != u.ID || res.sessionCookie(t, "gatehouse.session_token").MaxAge != 604800 {
				t.Errorf("form sign-in: %+v", body)
			}
		})

		t.Run("callbackURL", func(t *testing.T) {
			for _, cb := range []string{testBaseURL + "/dashboard", "https://app.example.com/welcome?x=1", "/dashboard"} {
				res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
					body: `{"email":"ada@example.com","password":` + jsonString(pw) + `,"callbackURL":` + jsonString(cb) + `}`})
				var body signInBody
				res.decode(t, http.StatusOK, &body)
				if !body.Redirect || body.URL == nil || *body.URL != cb {
					t.Errorf("callbackURL %q: redirect %v url %v", cb, body.Redirect, body.URL)
				}
			}
			for _, cb := range []string{"https://evil.example/x", "//evil.example/x", "/\\evil.example", "/\t/evil.example",
				"javascript:alert(1)", "https://app.example.com@evil.example/", "http://app.example.com/x", "evil.example"} {
				res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
					body: `{"email":"ada@example.com","password":` + jsonString(pw) + `,"callbackURL":` + jsonString(cb) + `}`})
				res.wantAuthProblem(t, http.StatusForbidden, "http-403", "INVALID_CALLBACK_URL")
				if len(res.Header().Values("Set-Cookie")) != 0 {
					t.Errorf("callbackURL %q: a cookie was set", cb)
				}
			}
		})

		t.Run("wrong password and unknown email", func(t *testing.T) {
			var bodies []string
			for _, body := range []string{
				`{"email":"ada@example.com","password":"wrong-password"}`,
				`{"email":"nobody@example.com","password":"wrong-password"}`,
			} {
				res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email", body: body})
				p := res.wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
				if p.Message != "Invalid email or password" {
					t.Errorf("message = %q", p.Message)
				}
				if len(res.Header().Values("Set-Cookie")) != 0 {
					t.Error("a failed sign-in set a cookie")
				}
				bodies = append(bodies, strings.Replace(res.Body.String(), p.RequestID, "", 1))
			}
			if bodies[0] != bodies[1] {
				t.Errorf("unknown email and wrong password differ:\n%s\n%s", bodies[0], bodies[1])
			}
		})

		t.Run("no secrets in logs", func(t *testing.T) {
			if strings.Contains(app.logs.String(), pw) || strings.Contains(app.logs.String(), "wrong-password") {
				t.Error("a password reached the log")
			}
		})
	})
}

// authTestClock is a settable clock (for throttles and the store), safe for concurrent use.
type authTestClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *authTestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *authTestClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestSignInThrottle(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	signIn := func(app *testApp, email, password string) response {
		return app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":` + jsonString(email) + `,"password":` + jsonString(password) + `}`})
	}
	wantThrottled := func(t *testing.T, res response, maxWait int) {
		t.Helper()
		res.wantAuthProblem(t, http.StatusTooManyRequests, "http-4xx", "TOO_MANY_REQUESTS")
		secs, err := strconv.Atoi(res.Header().Get("Retry-After"))
		if err != nil || secs < 1 || secs > maxWait {
			t.Errorf("Retry-After = %q, want 1..%d seconds", res.Header().Get("Retry-After"), maxWait)
		}
	}

	t.Run("per email", func(t *testing.T) {
		app := newTestApp(t, st, testConfig())
		clock := &authTestClock{now: time.Now()}
		app.srv.accountThrottle = newAccountThrottle(clock.Now)
		u := app.newUser(t, "Ada", "throttle@example.com")
		pw := "password-" + u.Email
		for i := range accountFailureLimit {
			signIn(app, u.Email, "wrong-password").wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
			clock.Advance(time.Second * time.Duration(i))
		}
		wantThrottled(t, signIn(app, u.Email, "wrong-password"), 900)
		// The right password is refused too, and so is another spelling of the email.
		res := signIn(app, " THROTTLE@example.com", pw)
		wantThrottled(t, res, 900)
		if len(res.Header().Values("Set-Cookie")) != 0 {
			t.Error("a throttled sign-in set a cookie")
		}
		// Another account from the same IP is not affected.
		other := app.newUser(t, "Bob", "bob@example.com")
		app.signIn(t, other.Email, "password-"+other.Email)

		// The window (opened by the first failure) ends 15 minutes later.
		clock.Advance(failureWindow - 11*time.Second)
		wantThrottled(t, signIn(app, u.Email, pw), 1)
		clock.Advance(time.Second)
		app.signIn(t, u.Email, pw)

		// Success forgets the earlier failures: four more are allowed, then the limit holds.
		signIn(app, u.Email, "wrong-password").wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		app.signIn(t, u.Email, pw)
		for range accountFailureLimit {
			signIn(app, u.Email, "wrong-password").wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		}
		wantThrottled(t, signIn(app, u.Email, pw), 900)
	})

	t.Run("unknown email", func(t *testing.T) {
		app := newTestApp(t, st, testConfig())
		for range accountFailureLimit {
			signIn(app, "ghost@example.com", "wrong-password").wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		}
		// Throttled exactly like an existing account, so the 429 reveals nothing.
		wantThrottled(t, signIn(app, "ghost@example.com", "wrong-password"), 900)
	})

	t.Run("per IP", func(t *testing.T) {
		app := newTestApp(t, st, testConfig())
		clock := &authTestClock{now: time.Now()}
		app.srv.ipThrottle = newIPThrottle(clock.Now)
		u := app.newUser(t, "Ada", "spray@example.com")
		for i := range ipFailureLimit {
			signIn(app, "user"+strconv.Itoa(i)+"@example.com", "wrong-password").
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		}
		// The right password of an untouched account is refused from this IP too.
		wantThrottled(t, signIn(app, u.Email, "password-"+u.Email), 900)
		clock.Advance(failureWindow)
		app.signIn(t, u.Email, "password-"+u.Email)
	})
}

func TestGetSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		ctx := context.Background()
		u := app.newUser(t, "Ada", "ada@example.com")

		t.Run("signed out", func(t *testing.T) {
			for name, cookie := range map[string]string{
				"no cookie":        "",
				"forged cookie":    "gatehouse.session_token=" + strings.Repeat("a", 32) + ".x",
				"unknown token":    "gatehouse.session_token=" + oauth.CookieValue(app.srv.cookieKey, strings.Repeat("b", 32)),
				"other key's sign": "gatehouse.session_token=" + oauth.CookieValue([]byte("another key"), u.Token),
			} {
				res := app.do(request{method: http.MethodGet, path: "/api/auth/get-session", headers: map[string]string{"Cookie": cookie}})
				if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != "null" {
					t.Errorf("%s: get-session = %d %s, want 200 null", name, res.Code, res.Body)
				}
				if ct := res.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s: Content-Type = %q", name, ct)
				}
				if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
					t.Errorf("%s: Cache-Control = %q", name, cc)
				}
			}
		})

		t.Run("signed in", func(t *testing.T) {
			res := app.do(u.as(request{method: http.MethodGet, path: "/api/auth/get-session",
				headers: map[string]string{"User-Agent": "test-agent"}}))
			var got sessionWithUserBody
			res.decode(t, http.StatusOK, &got)
			s := got.Session
			if s.ID != u.Session.ID || s.Token != u.Token || s.UserID != u.ID || !s.ExpiresAt.Equal(u.Session.ExpiresAt) ||
				!s.CreatedAt.Equal(u.Session.CreatedAt) || !s.UpdatedAt.Equal(u.Session.UpdatedAt) ||
				s.ActiveOrganizationID != nil || s.IPAddress != "" || s.UserAgent != "" {
				t.Errorf("session = %+v, want %+v with token %s", s, u.Session, u.Token)
			}
			if got.User.ID != u.ID || got.User.Email != u.Email || got.User.Name != "Ada" || !got.User.CreatedAt.Equal(u.CreatedAt) {
				t.Errorf("user = %+v", got.User)
			}
			if !strings.Contains(res.Body.String(), `"activeOrganizationId":null`) || !strings.Contains(res.Body.String(), `"image":null`) {
				t.Errorf("nulls missing: %s", res.Body)
			}
			if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q", cc)
			}
			if set := res.Header().Values("Set-Cookie"); len(set) != 0 {
				t.Errorf("a fresh session was refreshed: %v", set)
			}
		})

		t.Run("sliding refresh", func(t *testing.T) {
			// Sessions last 7 days and are extended once a day old, i.e. with 6 days or less left.
			mk := func(left time.Duration, remember bool) (store.Session, string) {
				token, _ := oauth.NewSessionToken()
				now := time.Now()
				sess := store.Session{TokenHash: oauth.HashToken(token), UserID: u.ID, RememberMe: remember,
					ExpiresAt: now.Add(left), CreatedAt: now.Add(left - sessionTTL), UpdatedAt: now.Add(left - sessionTTL)}
				if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateSession(ctx, &sess) }); err != nil {
					t.Fatal(err)
				}
				return sess, "gatehouse.session_token=" + oauth.CookieValue(app.srv.cookieKey, token)
			}
			for _, tc := range []struct {
				name     string
				left     time.Duration
				remember bool
				query    string
				refresh  bool
			}{
				{"two days old", 5 * 24 * time.Hour, true, "", true},
				{"not remembered", 5 * 24 * time.Hour, false, "", true},
				{"nearly expired", time.Minute, true, "", true},
				{"disableRefresh", 5 * 24 * time.Hour, true, "?disableRefresh=true", false},
				{"disableRefresh false", 5 * 24 * time.Hour, true, "?disableRefresh=false", true},
				{"under a day old", 6*24*time.Hour + time.Hour, true, "", false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					sess, cookie := mk(tc.left, tc.remember)
					start := time.Now()
					res := app.do(request{method: http.MethodGet, path: "/api/auth/get-session" + tc.query, headers: map[string]string{"Cookie": cookie}})
					var got sessionWithUserBody
					res.decode(t, http.StatusOK, &got)
					stored, _, err := st.SessionByTokenHash(ctx, sess.TokenHash)
					if err != nil {
						t.Fatal(err)
					}
					if !tc.refresh {
						if len(res.Header().Values("Set-Cookie")) != 0 || !stored.ExpiresAt.Equal(sess.ExpiresAt) || !got.Session.ExpiresAt.Equal(sess.ExpiresAt) {
							t.Errorf("refreshed: Set-Cookie %v, stored expiry %v, body %v, want %v",
								res.Header().Values("Set-Cookie"), stored.ExpiresAt, got.Session.ExpiresAt, sess.ExpiresAt)
						}
						return
					}
					if lo, hi := start.Add(sessionTTL-time.Second), time.Now().Add(sessionTTL); stored.ExpiresAt.Before(lo) || stored.ExpiresAt.After(hi) {
						t.Errorf("stored expiry %v, want about now+7d", stored.ExpiresAt)
					}
					if !got.Session.ExpiresAt.Equal(stored.ExpiresAt) || !got.Session.UpdatedAt.After(sess.UpdatedAt) {
						t.Errorf("body session %+v, stored expiry %v", got.Session, stored.ExpiresAt)
					}
					c := res.sessionCookie(t, "gatehouse.session_token")
					if cookieHeader(c) != cookie {
						t.Errorf("refreshed cookie %q, want the same value", cookieHeader(c))
					}
					if want := map[bool]int{true: 604800, false: 0}[tc.remember]; c.MaxAge != want {
						t.Errorf("Max-Age = %d, want %d", c.MaxAge, want)
					}
				})
			}
		})

		t.Run("expired", func(t *testing.T) {
			token, _ := oauth.NewSessionToken()
			past := time.Now().Add(-time.Hour)
			sess := store.Session{TokenHash: oauth.HashToken(token), UserID: u.ID, ExpiresAt: past, CreatedAt: past.Add(-sessionTTL)}
			if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateSession(ctx, &sess) }); err != nil {
				t.Fatal(err)
			}
			cookie := "gatehouse.session_token=" + oauth.CookieValue(app.srv.cookieKey, token)
			res := app.do(request{method: http.MethodGet, path: "/api/auth/get-session", headers: map[string]string{"Cookie": cookie}})
			if strings.TrimSpace(res.Body.String()) != "null" {
				t.Errorf("expired session: %s", res.Body)
			}
			app.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		})
	})
}

func TestSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		ctx := context.Background()
		pw := "password-ada@example.com"
		ada := app.newUser(t, "Ada", "ada@example.com")
		bob := app.newUser(t, "Bob", "bob@example.com")
		list := func(cookie string) []authSessionBody {
			t.Helper()
			var out []authSessionBody
			app.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).decode(t, http.StatusOK, &out)
			return out
		}
		unauthorized := func(cookie string) {
			t.Helper()
			app.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		}
		revoke := func(cookie, token string) response {
			return app.do(withCookie(cookie, request{method: http.MethodPost, path: "/api/auth/revoke-session",
				body: `{"token":` + jsonString(token) + `}`}))
		}

		t.Run("list", func(t *testing.T) {
			first, _ := app.signIn(t, ada.Email, pw)
			second, c2 := app.signIn(t, ada.Email, pw)
			res := app.do(withCookie(c2, request{method: http.MethodGet, path: "/api/auth/list-sessions"}))
			var got []authSessionBody
			res.decode(t, http.StatusOK, &got)
			if len(got) != 3 {
				t.Fatalf("%d sessions, want 3: %+v", len(got), got)
			}
			// Newest first; only the caller's own session carries its token.
			if got[0].Token != second.Token || got[2].ID != ada.Session.ID || got[2].Token != ada.Session.ID {
				t.Errorf("sessions = %+v", got)
			}
			if got[1].Token != got[1].ID || !strings.HasPrefix(got[1].ID, "ses_") {
				t.Errorf("other session token = %q, want its id", got[1].Token)
			}
			for _, secret := range []string{first.Token, ada.Token, oauth.HashToken(first.Token)} {
				if strings.Contains(res.Body.String(), secret) {
					t.Errorf("list-sessions leaks another session's secret")
				}
			}
			for i := 1; i < len(got); i++ {
				if got[i].CreatedAt.After(got[i-1].CreatedAt) || got[i].UserID != ada.ID {
					t.Errorf("order or owner wrong: %+v", got)
				}
			}
			if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q", cc)
			}
			// Bob sees only his.
			if bs := list(bob.Cookie); len(bs) != 1 || bs[0].ID != bob.Session.ID || bs[0].Token != bob.Token {
				t.Errorf("bob's sessions = %+v", bs)
			}
		})

		t.Run("revoke-session", func(t *testing.T) {
			_, mine := app.signIn(t, ada.Email, pw)
			byID, cByID := app.signIn(t, ada.Email, pw)
			byToken, cByToken := app.signIn(t, ada.Email, pw)
			idOf := func(token string) string {
				s, _, err := st.SessionByTokenHash(ctx, oauth.HashToken(token))
				if err != nil {
					t.Fatal(err)
				}
				return s.ID
			}
			// Another user's session, by id or by token: 404, and it survives.
			revoke(mine, bob.Session.ID).wantAuthProblem(t, http.StatusNotFound, "http-404", "SESSION_NOT_FOUND")
			revoke(mine, bob.Token).wantAuthProblem(t, http.StatusNotFound, "http-404", "SESSION_NOT_FOUND")
			revoke(mine, "ses_nonexistent").wantAuthProblem(t, http.StatusNotFound, "http-404", "SESSION_NOT_FOUND")
			list(bob.Cookie)

			var ok struct{ Status bool }
			res := revoke(mine, idOf(byID.Token))
			res.decode(t, http.StatusOK, &ok)
			if !ok.Status || len(res.Header().Values("Set-Cookie")) != 0 {
				t.Errorf("revoke by id: %s %v", res.Body, res.Header().Values("Set-Cookie"))
			}
			unauthorized(cByID)
			revoke(mine, byToken.Token).decode(t, http.StatusOK, &ok)
			unauthorized(cByToken)
			list(mine)

			// Revoking the current session expires the cookie.
			res = revoke(mine, idOf(mustVerify(t, app, mine)))
			res.decode(t, http.StatusOK, &ok)
			if set := res.Header().Get("Set-Cookie"); !strings.HasPrefix(set, "gatehouse.session_token=;") || !strings.Contains(set, "Max-Age=0") {
				t.Errorf("Set-Cookie = %q, want the cookie expired", set)
			}
			unauthorized(mine)
		})

		t.Run("revoke-session validation", func(t *testing.T) {
			app.do(withCookie(bob.Cookie, request{method: http.MethodPost, path: "/api/auth/revoke-session", body: `{"token":""}`})).
				wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")
			app.do(request{method: http.MethodPost, path: "/api/auth/revoke-session", body: `{"token":"x"}`}).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		})

		t.Run("revoke-other-sessions", func(t *testing.T) {
			_, c1 := app.signIn(t, ada.Email, pw)
			_, c2 := app.signIn(t, ada.Email, pw)
			_, current := app.signIn(t, ada.Email, pw)
			var ok struct{ Status bool }
			res := app.do(withCookie(current, request{method: http.MethodPost, path: "/api/auth/revoke-other-sessions", body: `{}`}))
			res.decode(t, http.StatusOK, &ok)
			if !ok.Status {
				t.Errorf("body %s", res.Body)
			}
			unauthorized(c1)
			unauthorized(c2)
			if got := list(current); len(got) != 1 {
				t.Errorf("%d sessions left, want 1", len(got))
			}
			list(bob.Cookie)
			wantAuditRow(t, st, "session.revoke_others", ada.ID, mustVerify(t, app, current))
			// Without a body too (the client may send none).
			app.do(withCookie(current, request{method: http.MethodPost, path: "/api/auth/revoke-other-sessions"})).decode(t, http.StatusOK, &ok)
		})

		t.Run("sign-out", func(t *testing.T) {
			_, c := app.signIn(t, ada.Email, pw)
			res := app.do(withCookie(c, request{method: http.MethodPost, path: "/api/auth/sign-out", body: `{}`}))
			var body struct{ Success bool }
			res.decode(t, http.StatusOK, &body)
			if !body.Success {
				t.Errorf("body %s", res.Body)
			}
			if set := res.Header().Get("Set-Cookie"); set != "gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax" {
				t.Errorf("Set-Cookie = %q", set)
			}
			// Replaying the old cookie: the session is gone server-side.
			unauthorized(c)
			if r := app.do(withCookie(c, request{method: http.MethodGet, path: "/api/auth/get-session"})); strings.TrimSpace(r.Body.String()) != "null" {
				t.Errorf("get-session after sign-out = %s", r.Body)
			}
			// Signed out already: still success.
			app.do(request{method: http.MethodPost, path: "/api/auth/sign-out"}).decode(t, http.StatusOK, &body)
			app.do(withCookie(c, request{method: http.MethodPost, path: "/api/auth/sign-out"})).decode(t, http.StatusOK, &body)
		})
	})
}

// mustVerify returns the session token that a Cookie header made by the app carries.
func mustVerify(t *testing.T, app *testApp, cookie string) string {
	t.Helper()
	_, value, _ := strings.Cut(cookie, "=")
	token, ok := oauth.VerifySignedToken(app.srv.cookieKey, value)
	if !ok {
		t.Fatalf("cookie %q does not verify", cookie)
	}
	return token
}

func TestChangePassword(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		ada := app.newUser(t, "Ada", "ada@example.com")
		oldPW, newPW := "password-ada@example.com", "staple-battery-horse"
		_, other := app.signIn(t, ada.Email, oldPW)
		change := func(cookie, body string) response {
			return app.do(withCookie(cookie, request{method: http.MethodPost, path: "/api/auth/change-password", body: body}))
		}

		change(ada.Cookie, `{"currentPassword":"wrong-password","newPassword":"whatever-123"}`).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		p := change(ada.Cookie, `{"currentPassword":`+jsonString(oldPW)+`,"newPassword":"short"}`).
			wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")
		if len(p.Errors) != 1 || strings.Join(p.Errors[0].Path, "/") != "body/newPassword" {
			t.Errorf("errors = %+v", p.Errors)
		}

		res := change(ada.Cookie, `{"currentPassword":`+jsonString(oldPW)+`,"newPassword":`+jsonString(newPW)+`,"revokeOtherSessions":true}`)
		var body struct {
			Token string       `json:"token"`
			User  authUserBody `json:"user"`
		}
		res.decode(t, http.StatusOK, &body)
		if !tokenRE.MatchString(body.Token) || body.Token == ada.Token || body.User.ID != ada.ID {
			t.Errorf("body = %+v", body)
		}
		c := res.sessionCookie(t, "gatehouse.session_token")
		if c.MaxAge != 604800 || mustVerify(t, app, cookieHeader(c)) != body.Token {
			t.Errorf("new cookie %+v", c)
		}
		// Every old session is dead; the new cookie works.
		for _, old := range []string{ada.Cookie, other} {
			app.do(withCookie(old, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		}
		var sessions []authSessionBody
		app.do(withCookie(cookieHeader(c), request{method: http.MethodGet, path: "/api/auth/list-sessions"})).decode(t, http.StatusOK, &sessions)
		if len(sessions) != 1 || sessions[0].Token != body.Token {
			t.Errorf("sessions = %+v", sessions)
		}
		// The old password no longer signs in; the new one does.
		app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":` + jsonString(oldPW) + `}`}).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		app.signIn(t, ada.Email, newPW)
		wantAuditRow(t, st, "user.password_change", ada.ID, oldPW, newPW, body.Token, c.Value)

		t.Run("throttled", func(t *testing.T) {
			cookie := cookieHeader(c)
			// The successful change above forgot the earlier failure.
			for range accountFailureLimit {
				change(cookie, `{"currentPassword":"wrong-password","newPassword":"whatever-123"}`).
					wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
			}
			res := change(cookie, `{"currentPassword":`+jsonString(newPW)+`,"newPassword":"whatever-123"}`)
			res.wantAuthProblem(t, http.StatusTooManyRequests, "http-4xx", "TOO_MANY_REQUESTS")
			if res.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
		})

		t.Run("signed out", func(t *testing.T) {
			app.do(request{method: http.MethodPost, path: "/api/auth/change-password",
				body: `{"currentPassword":"x","newPassword":"whatever-123"}`}).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		})
	})
}

func TestUpdateUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st := b.Open(t)
		app := newTestApp(t, st, testConfig())
		ada := app.newUser(t, "Ada", "ada@example.com")
		update := func(body string) response {
			return app.do(ada.as(request{method: http.MethodPost, path: "/api/auth/update-user", body: body}))
		}
		current := func() store.User {
			u, err := st.User(context.Background(), ada.ID)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		var ok struct{ Status bool }
		for _, tc := range []struct {
			body  string
			name  string
			image *string
		}{
			{`{"name":"Ada King"}`, "Ada King", nil},
			{`{"image":"https://img.example/a.png"}`, "Ada King", ptr("https://img.example/a.png")},
			{`{"name":"Countess","image":"https://img.example/b.png"}`, "Countess", ptr("https://img.example/b.png")},
			{`{"image":null}`, "Countess", nil},
		} {
			update(tc.body).decode(t, http.StatusOK, &ok)
			u := current()
			if !ok.Status || u.Name != tc.name || (u.Image == nil) != (tc.image == nil) || (u.Image != nil && *u.Image != *tc.image) {
				t.Errorf("%s: user %+v", tc.body, u)
			}
		}
		if u := current(); !u.UpdatedAt.After(ada.UpdatedAt) {
			t.Errorf("updatedAt not bumped: %v", u.UpdatedAt)
		}
		for _, body := range []string{`{}`, `{"name":""}`, `{"email":"x@example.com"}`} {
			update(body).wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")
		}
		app.do(request{method: http.MethodPost, path: "/api/auth/update-user", body: `{"name":"X"}`}).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
	})
}

func ptr[T any](v T) *T { return &v }

func TestAuthOrigin(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	app := newTestApp(t, st, testConfig())
	ada := app.newUser(t, "Ada", "ada@example.com")
	signOut := func(headers map[string]string) response {
		return app.do(request{method: http.MethodPost, path: "/api/auth/sign-out", headers: headers})
	}
	signIn := func(headers map[string]string) response {
		return app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email", headers: headers,
			body: `{"email":"ada@example.com","password":"password-ada@example.com"}`})
	}
	// In order: the last one signs out.
	for _, tc := range []struct {
		name    string
		do      func(map[string]string) response
		headers map[string]string
		status  int
		code    string
		revoked bool
	}{
		{"cookie, evil origin", signOut, map[string]string{"Cookie": ada.Cookie, "Origin": "https://evil.example"}, 403, "INVALID_ORIGIN", false},
		{"cookie, evil referer", signOut, map[string]string{"Cookie": ada.Cookie, "Referer": "https://evil.example/page"}, 403, "INVALID_ORIGIN", false},
		{"cookie, look-alike origin", signOut, map[string]string{"Cookie": ada.Cookie, "Origin": "http://gatehouse.test.evil.example"}, 403, "INVALID_ORIGIN", false},
		{"cookie, no origin", signOut, map[string]string{"Cookie": ada.Cookie}, 403, "MISSING_OR_NULL_ORIGIN", false},
		{"cookie, null origin", signOut, map[string]string{"Cookie": ada.Cookie, "Origin": "null"}, 403, "MISSING_OR_NULL_ORIGIN", false},
		{"no cookie, evil origin (login CSRF)", signIn, map[string]string{"Origin": "https://evil.example"}, 403, "INVALID_ORIGIN", false},
		{"no cookie, no origin (non-browser client)", signIn, nil, 200, "", false},
		{"no cookie, product origin", signIn, map[string]string{"Origin": "https://app.example.com"}, 200, "", false},
		{"cookie, trusted referer", signOut, map[string]string{"Cookie": ada.Cookie, "Referer": "http://localhost:5173/settings"}, 200, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.do(tc.headers)
			if tc.code != "" {
				res.wantAuthProblem(t, tc.status, "http-403", tc.code)
			} else if res.Code != tc.status {
				t.Fatalf("status = %d, want %d; %s", res.Code, tc.status, res.Body)
			}
			_, _, err := st.SessionByTokenHash(context.Background(), ada.Session.TokenHash)
			if revoked := err != nil; revoked != tc.revoked {
				t.Errorf("session revoked = %v (%v), want %v", revoked, err, tc.revoked)
			}
		})
	}
}
