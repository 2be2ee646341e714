package identity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestSessionLifetimesUpdateAge(t *testing.T) {
	for _, c := range []struct {
		life SessionLifetimes
		want time.Duration
	}{
		{SessionLifetimes{}, 24 * time.Hour},
		{SessionLifetimes{Idle: 30 * 24 * time.Hour}, 24 * time.Hour},
		{SessionLifetimes{Idle: 7 * time.Hour}, time.Hour},
		{SessionLifetimes{Idle: 70 * time.Minute, Absolute: time.Minute}, 10 * time.Minute},
	} {
		if got := c.life.UpdateAge(); got != c.want {
			t.Errorf("%+v: UpdateAge = %v, want %v", c.life, got, c.want)
		}
	}
	if got := NewSessions(nil, nil, false, SessionLifetimes{}).Lifetimes(); got != (SessionLifetimes{Idle: 7 * 24 * time.Hour, Absolute: 30 * 24 * time.Hour}) {
		t.Errorf("default Lifetimes = %+v", got)
	}
}

// TestSessionsRefresh drives Refresh on a session with idle 7h (update age 1h) and absolute
// 20h, created at start.
func TestSessionsRefresh(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			clock := storetest.NewClock(start)
			st, _, u := openSessions(t, b, clock)
			sessions := NewSessions(st, []byte("0123456789abcdef0123456789abcdef"), false,
				SessionLifetimes{Idle: 7 * time.Hour, Absolute: 20 * time.Hour})
			var sess store.Session
			var token string
			err := st.InTx(ctx, func(tx *store.Tx) error {
				var err error
				sess, token, err = sessions.Create(ctx, tx, store.Session{UserID: u.ID, RememberMe: true})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !sess.CreatedAt.Equal(start) || !sess.ExpiresAt.Equal(start.Add(7*time.Hour)) {
				t.Fatalf("Create: created %v, expires %v", sess.CreatedAt, sess.ExpiresAt)
			}
			if d := sessions.Deadline(sess); !d.Equal(start.Add(20 * time.Hour)) {
				t.Errorf("Deadline = %v", d)
			}
			cookie := "gatehouse.session_token=" + CookieValue([]byte("0123456789abcdef0123456789abcdef"), token)
			lookup := func() (store.Session, error) {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("Cookie", cookie)
				s, _, _, err := sessions.FromRequest(r)
				return s, err
			}
			// at moves the clock to start+at, refreshes, and checks the expiry (from start) and
			// the cookie's Max-Age in seconds (-1: no cookie, nothing written).
			at := func(at, wantExpires time.Duration, wantMaxAge int) {
				t.Helper()
				clock.Set(start.Add(at))
				cur, err := lookup()
				if err != nil {
					t.Fatalf("at %v: FromRequest: %v", at, err)
				}
				got, c, err := sessions.Refresh(ctx, cur, token)
				if err != nil {
					t.Fatalf("at %v: Refresh: %v", at, err)
				}
				stored, _ := lookup()
				if !got.ExpiresAt.Equal(start.Add(wantExpires)) || !stored.ExpiresAt.Equal(got.ExpiresAt) {
					t.Errorf("at %v: expires %v, stored %v; want %v after start", at,
						got.ExpiresAt.Sub(start), stored.ExpiresAt.Sub(start), wantExpires)
				}
				switch {
				case wantMaxAge < 0 && c != nil:
					t.Errorf("at %v: cookie %v, want none", at, c)
				case wantMaxAge < 0:
					if !stored.UpdatedAt.Equal(cur.UpdatedAt) {
						t.Errorf("at %v: UpdatedAt moved without an extension", at)
					}
				case c == nil:
					t.Errorf("at %v: no cookie, want Max-Age %d", at, wantMaxAge)
				case c.MaxAge != wantMaxAge || c.Value != CookieValue([]byte("0123456789abcdef0123456789abcdef"), token):
					t.Errorf("at %v: cookie %v, want Max-Age %d", at, c, wantMaxAge)
				default:
					if !got.UpdatedAt.Equal(clock.Now()) || !stored.UpdatedAt.Equal(clock.Now()) {
						t.Errorf("at %v: UpdatedAt %v, stored %v", at, got.UpdatedAt, stored.UpdatedAt)
					}
				}
			}
			at(59*time.Minute, 7*time.Hour, -1)   // gains 59 minutes: under the update age
			at(time.Hour, 8*time.Hour, 7*3600)    // gains the update age
			at(7*time.Hour, 14*time.Hour, 7*3600) // 1h before expiry: slides
			at(12*time.Hour+30*time.Minute, 19*time.Hour+30*time.Minute, 7*3600)
			at(13*time.Hour, 20*time.Hour, 7*3600) // gains 30 minutes, but reaches the deadline
			at(14*time.Hour, 20*time.Hour, -1)     // at the deadline already
			at(19*time.Hour+59*time.Minute+59*time.Second+time.Millisecond, 20*time.Hour, -1)
			clock.Set(start.Add(20 * time.Hour))
			if _, err := lookup(); !errors.Is(err, ErrNoSession) {
				t.Errorf("at the deadline: FromRequest error %v, want ErrNoSession", err)
			}

			// A stored expiry past the deadline (from before the limit, or a higher one) does not
			// keep the session alive; Refresh never extends it past the deadline either.
			err = st.InTx(ctx, func(tx *store.Tx) error { return tx.ExtendSession(ctx, sess.ID, start.Add(25*time.Hour)) })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lookup(); !errors.Is(err, ErrNoSession) {
				t.Errorf("past the deadline, stored expiry later: FromRequest error %v, want ErrNoSession", err)
			}
			clock.Set(start.Add(19 * time.Hour))
			cur, err := lookup()
			if err != nil {
				t.Fatal(err)
			}
			if got, c, err := sessions.Refresh(ctx, cur, token); err != nil || c != nil || !got.ExpiresAt.Equal(start.Add(25*time.Hour)) {
				t.Errorf("Refresh of a session expiring past its deadline = %v, %v, %v; want it untouched", got.ExpiresAt, c, err)
			}
			if c := sessions.CookieUntil(token, true, start.Add(20*time.Hour)); c.MaxAge != 3600 {
				t.Errorf("CookieUntil an hour ahead: Max-Age %d, want 3600", c.MaxAge)
			}
			if c := sessions.CookieUntil(token, true, start.Add(19*time.Hour+1500*time.Millisecond)); c.MaxAge != 2 {
				t.Errorf("CookieUntil 1.5 s ahead: Max-Age %d, want 2 (rounded up)", c.MaxAge)
			}
			if c := sessions.CookieUntil(token, true, start.Add(19*time.Hour)); c.String() != "gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax" {
				t.Errorf("CookieUntil now: %q, want the deleting cookie", c.String())
			}
			if c := sessions.CookieUntil(token, false, start.Add(20*time.Hour)); c.MaxAge != 0 {
				t.Errorf("CookieUntil, not remembered: Max-Age %d, want none", c.MaxAge)
			}

			// Deleted meanwhile: ErrNoSession.
			if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.DeleteSession(ctx, sess.ID) }); err != nil {
				t.Fatal(err)
			}
			cur.ExpiresAt = start.Add(19 * time.Hour)
			if _, _, err := sessions.Refresh(ctx, cur, token); !errors.Is(err, ErrNoSession) {
				t.Errorf("Refresh of a deleted session: %v, want ErrNoSession", err)
			}
		})
	}
}

// TestSessionsLegacyCookie: under https the __Host- cookie is read, and the __Secure- one of
// earlier releases when there is no __Host- one.
func TestSessionsLegacyCookie(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			st, _, u := openSessions(t, b, clock)
			key := []byte("0123456789abcdef0123456789abcdef")
			sessions := NewSessions(st, key, true, SessionLifetimes{})
			var a, b store.Session
			var ta, tb string
			err := st.InTx(ctx, func(tx *store.Tx) error {
				var err error
				if a, ta, err = sessions.Create(ctx, tx, store.Session{UserID: u.ID}); err != nil {
					return err
				}
				b, tb, err = sessions.Create(ctx, tx, store.Session{UserID: u.ID})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			host := "__Host-gatehouse.session_token="
			legacy := "__Secure-gatehouse.session_token="
			for _, c := range []struct {
				name, cookie, want string
				has                bool
			}{
				{"__Host-", host + CookieValue(key, ta), a.ID, true},
				{"legacy __Secure-", legacy + CookieValue(key, tb), b.ID, true},
				{"both", legacy + CookieValue(key, tb) + "; " + host + CookieValue(key, ta), a.ID, true},
				{"empty __Host-, good legacy", host + "; " + legacy + CookieValue(key, tb), b.ID, true},
				{"bad __Host-, good legacy", host + "junk; " + legacy + CookieValue(key, tb), "", true},
				{"unprefixed name", "gatehouse.session_token=" + CookieValue(key, ta), "", false},
				{"empty legacy", legacy, "", true},
			} {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("Cookie", c.cookie)
				got, _, _, err := sessions.FromRequest(r)
				if c.want == "" && !errors.Is(err, ErrNoSession) || c.want != "" && (err != nil || got.ID != c.want) {
					t.Errorf("%s: FromRequest = %q, %v; want %q", c.name, got.ID, err, c.want)
				}
				if has := sessions.HasCookie(r); has != c.has {
					t.Errorf("%s: HasCookie = %v, want %v", c.name, has, c.has)
				}
			}
		})
	}
}
