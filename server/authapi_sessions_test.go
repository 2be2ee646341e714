package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

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
				"unknown token":    "gatehouse.session_token=" + identity.CookieValue(app.srv.cookieKey, strings.Repeat("b", 32)),
				"other key's sign": "gatehouse.session_token=" + identity.CookieValue([]byte("another key"), u.Token),
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
				token, _ := identity.NewSessionToken()
				now := time.Now()
				sess := store.Session{TokenHash: identity.HashToken(token), UserID: u.ID, RememberMe: remember,
					ExpiresAt: now.Add(left), CreatedAt: now.Add(left - identity.DefaultSessionIdleTimeout), UpdatedAt: now.Add(left - identity.DefaultSessionIdleTimeout)}
				if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateSession(ctx, &sess) }); err != nil {
					t.Fatal(err)
				}
				return sess, "gatehouse.session_token=" + identity.CookieValue(app.srv.cookieKey, token)
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
					if lo, hi := start.Add(identity.DefaultSessionIdleTimeout-time.Second), time.Now().Add(identity.DefaultSessionIdleTimeout); stored.ExpiresAt.Before(lo) || stored.ExpiresAt.After(hi) {
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
			token, _ := identity.NewSessionToken()
			past := time.Now().Add(-time.Hour)
			sess := store.Session{TokenHash: identity.HashToken(token), UserID: u.ID, ExpiresAt: past, CreatedAt: past.Add(-identity.DefaultSessionIdleTimeout)}
			if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateSession(ctx, &sess) }); err != nil {
				t.Fatal(err)
			}
			cookie := "gatehouse.session_token=" + identity.CookieValue(app.srv.cookieKey, token)
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
			for _, secret := range []string{first.Token, ada.Token, identity.HashToken(first.Token)} {
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
				s, _, err := st.SessionByTokenHash(ctx, identity.HashToken(token))
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
	token, ok := identity.VerifySignedToken(app.srv.cookieKey, value)
	if !ok {
		t.Fatalf("cookie %q does not verify", cookie)
	}
	return token
}
