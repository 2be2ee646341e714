package identity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// openSessions opens a migrated store on b with clock and returns its Sessions (cookie
// "gatehouse.session_token", not secure) and a user.
func openSessions(t *testing.T, b storetest.Backend, clock *storetest.Clock) (*store.Store, Sessions, store.User) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, b.URL(t), store.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	u := store.User{Name: "Ada", Email: "ada@example.com"}
	if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateUser(ctx, &u, "") }); err != nil {
		t.Fatal(err)
	}
	return st, NewSessions(st, []byte("0123456789abcdef0123456789abcdef"), false, SessionLifetimes{}), u
}

func TestSessions(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			clock := storetest.NewClock(start)
			st, sessions, u := openSessions(t, b, clock)
			org := "org_01jd8x3q0f5m6z1v2c4k7r9t0w"

			var sess store.Session
			var token string
			err := st.InTx(ctx, func(tx *store.Tx) error {
				var err error
				sess, token, err = sessions.Create(ctx, tx, store.Session{
					UserID: u.ID, RememberMe: true, IPAddress: "192.0.2.10", UserAgent: "test/1",
					ActiveOrganizationID: &org,
					// Ignored: Create sets the token hash and expiry itself.
					TokenHash: "chosen", ExpiresAt: start.Add(time.Hour),
				})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(token) != 32 || sess.TokenHash != HashToken(token) || !strings.HasPrefix(sess.ID, "ses_") {
				t.Fatalf("Create = %+v, token %q", sess, token)
			}
			if want := time.Date(2030, 1, 9, 3, 4, 5, 0, time.UTC); !sess.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v (7 days)", sess.ExpiresAt, want)
			}
			if !sess.RememberMe || sess.IPAddress != "192.0.2.10" || sess.UserAgent != "test/1" ||
				sess.ActiveOrganizationID == nil || *sess.ActiveOrganizationID != org {
				t.Errorf("Create dropped a field: %+v", sess)
			}

			request := func(cookie string) *http.Request {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				if cookie != "" {
					r.Header.Set("Cookie", cookie)
				}
				return r
			}
			good := "gatehouse.session_token=" + CookieValue([]byte("0123456789abcdef0123456789abcdef"), token)
			got, user, gotToken, err := sessions.FromRequest(request(good))
			if err != nil || got.ID != sess.ID || user.ID != u.ID || user.Email != "ada@example.com" || gotToken != token {
				t.Fatalf("FromRequest = %+v, %+v, %q, %v", got, user, gotToken, err)
			}

			for name, cookie := range map[string]string{
				"no cookie":       "",
				"empty value":     "gatehouse.session_token=",
				"unsigned token":  "gatehouse.session_token=" + token,
				"other key":       "gatehouse.session_token=" + CookieValue([]byte("another key"), token),
				"unknown token":   "gatehouse.session_token=" + CookieValue([]byte("0123456789abcdef0123456789abcdef"), strings.Repeat("b", 32)),
				"other name":      "__Secure-gatehouse.session_token=" + CookieValue([]byte("0123456789abcdef0123456789abcdef"), token),
				"truncated value": good[:len(good)-3],
			} {
				if _, _, _, err := sessions.FromRequest(request(cookie)); !errors.Is(err, ErrNoSession) {
					t.Errorf("%s: FromRequest error = %v, want ErrNoSession", name, err)
				}
			}

			clock.Advance(7*24*time.Hour + time.Second)
			if _, _, _, err := sessions.FromRequest(request(good)); !errors.Is(err, ErrNoSession) {
				t.Errorf("expired session: FromRequest error = %v, want ErrNoSession", err)
			}
		})
	}
}

func TestSessionsCookies(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	token := "Ab3dEfGhIjKlMnOpQrStUvWxYz012345"
	for _, c := range []struct {
		name string
		got  *http.Cookie
		want string
	}{
		{"remembered", NewSessions(nil, key, false, SessionLifetimes{}).Cookie(token, true),
			"gatehouse.session_token=" + CookieValue(key, token) + "; Path=/; Max-Age=604800; HttpOnly; SameSite=Lax"},
		{"browser session", NewSessions(nil, key, false, SessionLifetimes{}).Cookie(token, false),
			"gatehouse.session_token=" + CookieValue(key, token) + "; Path=/; HttpOnly; SameSite=Lax"},
		{"secure", NewSessions(nil, key, true, SessionLifetimes{}).Cookie(token, true),
			"__Host-gatehouse.session_token=" + CookieValue(key, token) + "; Path=/; Max-Age=604800; HttpOnly; Secure; SameSite=Lax"},
		{"idle timeout", NewSessions(nil, key, false, SessionLifetimes{Idle: 2 * time.Hour}).Cookie(token, true),
			"gatehouse.session_token=" + CookieValue(key, token) + "; Path=/; Max-Age=7200; HttpOnly; SameSite=Lax"},
		{"absolute shorter than idle", NewSessions(nil, key, false, SessionLifetimes{Absolute: 90 * time.Minute}).Cookie(token, true),
			"gatehouse.session_token=" + CookieValue(key, token) + "; Path=/; Max-Age=5400; HttpOnly; SameSite=Lax"},
		{"expired", NewSessions(nil, key, false, SessionLifetimes{}).ExpiredCookie(),
			"gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"},
		{"expired secure", NewSessions(nil, key, true, SessionLifetimes{}).ExpiredCookie(),
			"__Host-gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax"},
	} {
		if got := c.got.String(); got != c.want {
			t.Errorf("%s: Set-Cookie %q, want %q", c.name, got, c.want)
		}
	}
	if got := NewSessions(nil, key, false, SessionLifetimes{}).CookieName(); got != "gatehouse.session_token" {
		t.Errorf("CookieName = %q", got)
	}
	if got := NewSessions(nil, key, true, SessionLifetimes{}).CookieName(); got != "__Host-gatehouse.session_token" {
		t.Errorf("secure CookieName = %q", got)
	}
	var expired []string
	for _, c := range NewSessions(nil, key, true, SessionLifetimes{}).ExpiredCookies() {
		expired = append(expired, c.String())
	}
	if want := []string{
		"__Host-gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax",
		"__Secure-gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax",
	}; !slices.Equal(expired, want) {
		t.Errorf("secure ExpiredCookies = %q, want %q", expired, want)
	}
	if got := len(NewSessions(nil, key, false, SessionLifetimes{}).ExpiredCookies()); got != 1 {
		t.Errorf("ExpiredCookies over http: %d cookies, want 1", got)
	}
}
