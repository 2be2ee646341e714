package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestSignInCookie(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	for i, tc := range []struct {
		base, name, attrs string
	}{
		{"http://gatehouse.test", "gatehouse.session_token", "; Path=/; Max-Age=604800; HttpOnly; SameSite=Lax"},
		{"https://gatehouse.test", "__Host-gatehouse.session_token", "; Path=/; Max-Age=604800; HttpOnly; Secure; SameSite=Lax"},
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
			sess, _, err := st.SessionByTokenHash(ctx, identity.HashToken(body.Token))
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

func TestSignInThrottle(t *testing.T) {
	// The counts live in the database: each subtest gets a store of its own.
	open := storetest.Backends(t)[0].Open
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
		st := open(t)
		app := newTestApp(t, st, testConfig())
		clock := storetest.NewClock(time.Now())
		app.srv.accountThrottle = identity.NewAccountThrottle(st, clock.Now)
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
		st := open(t)
		app := newTestApp(t, st, testConfig())
		for range accountFailureLimit {
			signIn(app, "ghost@example.com", "wrong-password").wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")
		}
		// Throttled exactly like an existing account, so the 429 reveals nothing.
		wantThrottled(t, signIn(app, "ghost@example.com", "wrong-password"), 900)
	})

	t.Run("per IP", func(t *testing.T) {
		st := open(t)
		app := newTestApp(t, st, testConfig())
		clock := storetest.NewClock(time.Now())
		app.srv.ipThrottle = identity.NewIPThrottle(st, clock.Now)
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
