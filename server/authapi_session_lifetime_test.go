package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

const day = 24 * time.Hour

// clockedApp is a test app over a fresh store whose clock is clock, with a user Ada signed in
// through the API at the clock's start; it returns the app and Ada's Cookie header.
func clockedApp(t *testing.T, b storetest.Backend, clock *storetest.Clock, cfg Config) (*testApp, string) {
	t.Helper()
	app := newTestApp(t, openURL(t, b.URL(t), store.WithClock(clock.Now)), cfg)
	ada := app.newUser(t, "Ada", "ada@example.com")
	_, cookie := app.signIn(t, ada.Email, "password-"+ada.Email)
	return app, cookie
}

// getSession calls get-session with cookie and returns the response and the decoded session,
// nil when the answer is null.
func getSession(t *testing.T, app *testApp, cookie, query string) (response, *sessionWithUserBody) {
	t.Helper()
	res := app.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/get-session" + query}))
	if res.Code != http.StatusOK {
		t.Fatalf("get-session = %d %s", res.Code, res.Body)
	}
	if strings.TrimSpace(res.Body.String()) == "null" {
		return res, nil
	}
	var got sessionWithUserBody
	res.decode(t, http.StatusOK, &got)
	return res, &got
}

// TestSessionAbsoluteLifetime: with the defaults (7 days idle, 30 days absolute), a session
// used every day still ends 30 days after sign-in, and the refreshed cookie's Max-Age shrinks
// to the time left before that deadline.
func TestSessionAbsoluteLifetime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		start := time.Now().UTC().Truncate(time.Second)
		clock := storetest.NewClock(start)
		app, cookie := clockedApp(t, b, clock, testConfig())
		deadline := start.Add(30 * day)

		// Used every day: each get-session slides the expiry to 7 days from now, until that
		// would pass the deadline.
		for d := 1; d <= 22; d++ {
			clock.Advance(day)
			res, got := getSession(t, app, cookie, "")
			if got == nil {
				t.Fatalf("day %d: signed out", d)
			}
			if want := start.Add(time.Duration(d+7) * day); !got.Session.ExpiresAt.Equal(want) {
				t.Errorf("day %d: expiresAt %v, want %v", d, got.Session.ExpiresAt, want)
			}
			if c := res.sessionCookie(t, app.srv.sessionCookieName); c.MaxAge != 604800 {
				t.Errorf("day %d: Max-Age %d, want 604800", d, c.MaxAge)
			}
		}
		// Day 24.5: 7 days from now would be day 31.5; the expiry stops at day 30 and the cookie
		// lives the 5.5 days left.
		clock.Advance(day + day/2 + day)
		res, got := getSession(t, app, cookie, "")
		if got == nil {
			t.Fatal("day 24.5: signed out")
		}
		if !got.Session.ExpiresAt.Equal(deadline) {
			t.Errorf("day 24.5: expiresAt %v, want the deadline %v", got.Session.ExpiresAt, deadline)
		}
		if c := res.sessionCookie(t, app.srv.sessionCookieName); c.MaxAge != 475200 {
			t.Errorf("day 24.5: Max-Age %d, want 475200 (5.5 days)", c.MaxAge)
		}
		// Later calls have nothing to extend: no write, no cookie.
		for _, step := range []time.Duration{day, 4*day + day/2 - time.Second} {
			clock.Advance(step)
			res, got := getSession(t, app, cookie, "")
			if got == nil {
				t.Fatalf("%v before the deadline: signed out", deadline.Sub(clock.Now()))
			}
			if !got.Session.ExpiresAt.Equal(deadline) || len(res.Header().Values("Set-Cookie")) != 0 {
				t.Errorf("%v before the deadline: expiresAt %v, Set-Cookie %v", deadline.Sub(clock.Now()),
					got.Session.ExpiresAt, res.Header().Values("Set-Cookie"))
			}
		}
		// Day 30: gone, for get-session and for every other cookie-authenticated route.
		clock.Advance(time.Second)
		if _, got := getSession(t, app, cookie, ""); got != nil {
			t.Fatalf("day 30: get-session = %+v, want null", got.Session)
		}
		app.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
	})
}

// TestSessionPastDeadlineInStore: a session whose stored expiry is later than its absolute
// deadline (stored before the limit existed) is no session once the deadline has passed.
func TestSessionPastDeadlineInStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		start := time.Now().UTC().Truncate(time.Second)
		clock := storetest.NewClock(start)
		app, cookie := clockedApp(t, b, clock, testConfig())
		ctx := context.Background()
		_, got := getSession(t, app, cookie, "")
		if got == nil {
			t.Fatal("signed out at once")
		}
		// As the old sliding expiry left it after daily use: 30 days old, 6 days to go.
		clock.Advance(30 * day)
		err := app.store.InTx(ctx, func(tx *store.Tx) error {
			return tx.ExtendSession(ctx, got.Session.ID, clock.Now().Add(6*day))
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, got := getSession(t, app, cookie, "?disableRefresh=true"); got != nil {
			t.Fatalf("30 days old: get-session = %+v, want null", got.Session)
		}
		app.do(withCookie(cookie, request{method: http.MethodGet, path: "/api/auth/list-sessions"})).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
	})
}

// TestSessionIdleTimeout: with the default idle timeout of 7 days, a session unused for 7 days
// is gone; one used within them lives on.
func TestSessionIdleTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		start := time.Now().UTC().Truncate(time.Second)
		clock := storetest.NewClock(start)
		app, cookie := clockedApp(t, b, clock, testConfig())

		clock.Advance(7*day - time.Second)
		if _, got := getSession(t, app, cookie, "?disableRefresh=true"); got == nil {
			t.Fatal("signed out one second before the idle timeout")
		}
		clock.Advance(time.Second)
		if _, got := getSession(t, app, cookie, ""); got != nil {
			t.Fatalf("unused for 7 days: get-session = %+v, want null", got.Session)
		}
	})
}
