package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestSessionConfiguredLifetimes: GATEHOUSE_SESSION_IDLE_TIMEOUT=2h and
// GATEHOUSE_SESSION_ABSOLUTE_LIFETIME=5h. The update age is then 2h/7 (about 17 minutes): a
// session used every hour slides by the idle timeout, its cookie's Max-Age shrinks near the
// 5-hour deadline and it ends there; a session left alone ends after 2 hours.
func TestSessionConfiguredLifetimes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		start := time.Now().UTC().Truncate(time.Second)
		clock := storetest.NewClock(start)
		cfg := testConfig()
		cfg.SessionIdleTimeout, cfg.SessionAbsoluteLifetime = 2*time.Hour, 5*time.Hour
		app, busy := clockedApp(t, b, clock, cfg)
		res := app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":"password-ada@example.com"}`})
		idle := res.sessionCookie(t, app.srv.sessionCookieName)
		if idle.MaxAge != 7200 {
			t.Errorf("sign-in Max-Age %d, want 7200", idle.MaxAge)
		}

		// step advances the clock by d and calls get-session with busy; it checks the stored
		// expiry and the refreshed cookie's Max-Age (0: no Set-Cookie at all).
		step := func(d time.Duration, wantExpires time.Duration, wantMaxAge int) {
			t.Helper()
			clock.Advance(d)
			res, got := getSession(t, app, busy, "")
			if got == nil {
				t.Fatalf("%v after sign-in: signed out", clock.Now().Sub(start))
			}
			if !got.Session.ExpiresAt.Equal(start.Add(wantExpires)) {
				t.Errorf("%v after sign-in: expires %v after sign-in, want %v", clock.Now().Sub(start),
					got.Session.ExpiresAt.Sub(start), wantExpires)
			}
			if wantMaxAge == 0 {
				if set := res.Header().Values("Set-Cookie"); len(set) != 0 {
					t.Errorf("%v after sign-in: Set-Cookie %v, want none", clock.Now().Sub(start), set)
				}
				return
			}
			if c := res.sessionCookie(t, app.srv.sessionCookieName); c.MaxAge != wantMaxAge {
				t.Errorf("%v after sign-in: Max-Age %d, want %d", clock.Now().Sub(start), c.MaxAge, wantMaxAge)
			}
		}
		step(10*time.Minute, 2*time.Hour, 0) // gains 10 minutes: under the update age
		step(50*time.Minute, 3*time.Hour, 7200)
		// The session nobody used: alive one second before its idle timeout, gone at it.
		clock.Advance(time.Hour - time.Second)
		if _, got := getSession(t, app, cookieHeader(idle), "?disableRefresh=true"); got == nil {
			t.Fatal("idle session gone before its idle timeout")
		}
		clock.Advance(time.Second)
		if _, got := getSession(t, app, cookieHeader(idle), ""); got != nil {
			t.Fatalf("idle for 2h: get-session = %+v, want null", got.Session)
		}
		step(0, 4*time.Hour, 7200)
		step(90*time.Minute, 5*time.Hour, 5400) // 3h30: capped at the 5h deadline
		step(90*time.Minute-time.Second, 5*time.Hour, 0)
		clock.Advance(time.Second)
		if _, got := getSession(t, app, busy, ""); got != nil {
			t.Fatalf("5h after sign-in: get-session = %+v, want null", got.Session)
		}
	})
}

// TestSessionHostCookie: under an https base URL the session cookie is
// __Host-gatehouse.session_token; the __Secure- name of earlier releases is still read, the
// __Host- one wins when both are sent, a refresh moves the session to the __Host- name, and
// sign-out deletes both.
func TestSessionHostCookie(t *testing.T) {
	const base = "https://gatehouse.test"
	const hostName, legacyName = "__Host-gatehouse.session_token", "__Secure-gatehouse.session_token"
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		start := time.Now().UTC().Truncate(time.Second)
		clock := storetest.NewClock(start)
		cfg := testConfig()
		cfg.BaseURL = base
		app, cookie := clockedApp(t, b, clock, cfg)
		if !strings.HasPrefix(cookie, hostName+"=") || app.srv.sessions.CookieName() != hostName {
			t.Fatalf("sign-in cookie %q, want the %s name", cookie, hostName)
		}
		do := func(method, path, cookie string, headers map[string]string) response {
			h := map[string]string{"Cookie": cookie}
			for k, v := range headers {
				h[k] = v
			}
			return app.do(request{method: method, path: path, headers: h})
		}
		sessionID := func(res response) string {
			t.Helper()
			var got sessionWithUserBody
			if strings.TrimSpace(res.Body.String()) == "null" {
				return ""
			}
			if err := json.Unmarshal(res.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			return got.Session.ID
		}
		// A session started before the upgrade, its cookie under the __Secure- name.
		signedIn, _, err := app.store.SessionByTokenHash(ctx, identity.HashToken(mustVerify(t, app, cookie)))
		if err != nil {
			t.Fatal(err)
		}
		token, _ := identity.NewSessionToken()
		old := store.Session{TokenHash: identity.HashToken(token), UserID: signedIn.UserID, RememberMe: true,
			ExpiresAt: start.Add(7 * 24 * time.Hour)}
		if err := app.store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateSession(ctx, &old) }); err != nil {
			t.Fatal(err)
		}
		value := identity.CookieValue(app.srv.cookieKey, token)
		legacy := legacyName + "=" + value

		if id := sessionID(do(http.MethodGet, "/api/auth/get-session", legacy, nil)); id != old.ID {
			t.Errorf("legacy cookie: session %q, want %q", id, old.ID)
		}
		if id := sessionID(do(http.MethodGet, "/api/auth/get-session", cookie+"; "+legacy, nil)); id != signedIn.ID {
			t.Errorf("both cookies: session %q, want the __Host- one's %q", id, signedIn.ID)
		}
		if id := sessionID(do(http.MethodGet, "/api/auth/get-session", hostName+"=junk; "+legacy, nil)); id != "" {
			t.Errorf("bad __Host- cookie beside a good legacy one: session %q, want none", id)
		}
		// The legacy cookie counts as a cookie for the CSRF check.
		res := do(http.MethodPost, "/api/auth/sign-out", legacy, nil)
		if res.Code != http.StatusForbidden || !strings.Contains(res.Body.String(), `"code":"MISSING_OR_NULL_ORIGIN"`) {
			t.Errorf("sign-out with the legacy cookie and no Origin: %d %s, want 403 MISSING_OR_NULL_ORIGIN", res.Code, res.Body)
		}

		// A day later get-session refreshes the legacy session and writes it under __Host-.
		clock.Advance(24 * time.Hour)
		res = do(http.MethodGet, "/api/auth/get-session", legacy, nil)
		if set := res.Header().Values("Set-Cookie"); !slices.Equal(set, []string{
			hostName + "=" + value + "; Path=/; Max-Age=604800; HttpOnly; Secure; SameSite=Lax",
		}) {
			t.Errorf("refresh of a legacy session: Set-Cookie %q", set)
		}

		res = do(http.MethodPost, "/api/auth/sign-out", hostName+"="+value+"; "+legacy, map[string]string{"Origin": base})
		if res.Code != http.StatusOK {
			t.Fatalf("sign-out: %d %s", res.Code, res.Body)
		}
		if set := res.Header().Values("Set-Cookie"); !slices.Equal(set, []string{
			hostName + "=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax",
			legacyName + "=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax",
		}) {
			t.Errorf("sign-out: Set-Cookie %q, want both names deleted", set)
		}
		if id := sessionID(do(http.MethodGet, "/api/auth/get-session", legacy, nil)); id != "" {
			t.Errorf("after sign-out: session %q", id)
		}
		if id := sessionID(do(http.MethodGet, "/api/auth/get-session", cookie, nil)); id != signedIn.ID {
			t.Errorf("the other session: %q, want %q", id, signedIn.ID)
		}
	})
}
