package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
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

// form is a form-urlencoded POST from a page of the base URL (form posts must name their
// origin: TestFormSignInNeedsTrustedOrigin).
func form(path string, values url.Values) request {
	return request{method: http.MethodPost, path: path, body: values.Encode(),
		headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": testBaseURL}}
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
			if tok, ok := identity.VerifySignedToken(app.srv.cookieKey, c.Value); !ok || tok != *body.Token {
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
			if ok, err := identity.VerifyPassword(hash, "correct-horse-battery"); !ok || err != nil {
				t.Errorf("stored hash %q does not verify: %v", hash, err)
			}
			sess, _, err := st.SessionByTokenHash(ctx, identity.HashToken(*body.Token))
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
			wantAuditRow(t, st, "user.sign_up", u.ID, "correct-horse-battery", *body.Token, identity.HashToken(*body.Token), c.Value)
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
