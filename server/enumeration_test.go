package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Enumeration: request-password-reset, sign-up with a taken address (when verification is
// required) and change-email answer an address that has an account exactly as one that has
// none — status, headers that matter and body — and in the same time (medians within 10%).

// enumApp is an app (messages stay in the outbox) that sends each request from its own client
// IP, so that the per-IP limits never tell the two kinds of request apart.
type enumApp struct {
	*testApp
	ip int
}

func newEnumApp(t *testing.T, b storetest.Backend) *enumApp {
	t.Helper()
	cfg := testConfig()
	cfg.RequireEmailVerification = true
	return &enumApp{testApp: newTestApp(t, b.Open(t), cfg)}
}

// send serves r from a new client IP and returns the answer and how long it took.
func (a *enumApp) send(r request) (*httptest.ResponseRecorder, time.Duration) {
	a.ip++
	req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:40000", a.ip/65536%256, a.ip/256%256, a.ip%256)
	rec := httptest.NewRecorder()
	start := time.Now()
	a.srv.Handler().ServeHTTP(rec, req)
	return rec, time.Since(start)
}

// fixtureUsers creates n users prefix0@example.com … (no usable password) and returns them
// with their sessions.
func (a *enumApp) fixtureUsers(t *testing.T, prefix string, n int) []testUser {
	t.Helper()
	out := make([]testUser, n)
	for i := range out {
		out[i] = a.newFixtureUser(t, prefix, fmt.Sprintf("%s%d@example.com", prefix, i))
	}
	return out
}

// sameAnswer checks that two answers have the same status, Content-Type, Cache-Control and
// Set-Cookie count, and bodies equal after normalize.
func sameAnswer(t *testing.T, name string, known, unknown *httptest.ResponseRecorder, normalize func(string) string) {
	t.Helper()
	k, u := normalize(known.Body.String()), normalize(unknown.Body.String())
	if known.Code != unknown.Code || k != u ||
		known.Header().Get("Content-Type") != unknown.Header().Get("Content-Type") ||
		known.Header().Get("Cache-Control") != unknown.Header().Get("Cache-Control") ||
		len(known.Header().Values("Set-Cookie")) != len(unknown.Header().Values("Set-Cookie")) {
		t.Errorf("%s: known %d %v %s\nunknown %d %v %s", name, known.Code, known.Header(), known.Body,
			unknown.Code, unknown.Header(), unknown.Body)
	}
}

// userIDAndTimes blanks what a sign-up answer must differ in: the new id and the timestamps.
var userIDAndTimes = regexp.MustCompile(`"(id|createdAt|updatedAt)":"[^"]*"`)

// sameTiming runs known(i) and unknown(i) in interleaved pairs — each pair in alternating
// order, after warm-up pairs — and fails unless the two medians are within 10% of each other.
// A loaded machine slows both sides of a pair alike; a measurement that misses is taken again
// with fresh samples, up to three times, so that one burst of load cannot fail the test while a
// real difference (which shows in every measurement) does.
func sameTiming(t *testing.T, name string, warmup, pairs int, known, unknown func(i int) time.Duration) {
	t.Helper()
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return (s[len(s)/2] + s[(len(s)-1)/2]) / 2
	}
	next := 0
	var last string
	for attempt := 1; attempt <= 3; attempt++ {
		for range warmup {
			known(next)
			unknown(next)
			next++
		}
		ks, us := make([]time.Duration, 0, pairs), make([]time.Duration, 0, pairs)
		for i := range pairs {
			if i%2 == 0 {
				ks = append(ks, known(next))
				us = append(us, unknown(next))
			} else {
				us = append(us, unknown(next))
				ks = append(ks, known(next))
			}
			next++
		}
		k, u := median(ks), median(us)
		diff := float64(k-u) / float64(min(k, u))
		last = fmt.Sprintf("%s: median known %v, unknown %v (%+.1f%%, %d pairs, attempt %d)", name, k, u, diff*100, pairs, attempt)
		t.Log(last)
		if diff <= 0.10 && diff >= -0.10 {
			return
		}
	}
	t.Errorf("%s: the medians differ by more than 10%% in three measurements", last)
}

// request-password-reset: the same bytes, the same time.
func TestRequestPasswordResetEnumeration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newEnumApp(t, b)
		const warmup, pairs = 20, 300
		a.fixtureUsers(t, "known", 3*(warmup+pairs)+1)
		reset := func(email string) request {
			return request{method: http.MethodPost, path: "/api/auth/request-password-reset",
				body: `{"email":"` + email + `","redirectTo":"https://app.example.com/reset"}`}
		}
		known, _ := a.send(reset("known0@example.com"))
		unknown, _ := a.send(reset("unknown0@example.com"))
		sameAnswer(t, "request-password-reset", known, unknown, func(s string) string { return s })
		if known.Code != http.StatusOK || known.Body.String() != `{"message":"If this email exists in our system, check your email for the reset link","status":true}`+"\n" {
			t.Errorf("answer = %d %s", known.Code, known.Body)
		}
		sameTiming(t, "request-password-reset", warmup, pairs,
			func(i int) time.Duration { _, d := a.send(reset(fmt.Sprintf("known%d@example.com", i+1))); return d },
			func(i int) time.Duration { _, d := a.send(reset(fmt.Sprintf("unknown%d@example.com", i+1))); return d })
	})
}

// change-email: the same bytes, the same time, for an address another account has.
func TestChangeEmailEnumeration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newEnumApp(t, b)
		const warmup, pairs = 20, 300
		n := 3*(warmup+pairs) + 1
		// Each request comes from its own account (the send limits count the old address too).
		askers := a.fixtureUsers(t, "asker", 2*n)
		a.fixtureUsers(t, "taken", n)
		change := func(u testUser, email string) request {
			return u.as(request{method: http.MethodPost, path: "/api/auth/change-email",
				body: `{"newEmail":"` + email + `","callbackURL":"/settings"}`})
		}
		known, _ := a.send(change(askers[0], "taken0@example.com"))
		unknown, _ := a.send(change(askers[1], "free0@example.com"))
		sameAnswer(t, "change-email", known, unknown, func(s string) string { return s })
		if known.Code != http.StatusOK || known.Body.String() != `{"status":true}`+"\n" {
			t.Errorf("answer = %d %s", known.Code, known.Body)
		}
		sameTiming(t, "change-email", warmup, pairs,
			func(i int) time.Duration {
				_, d := a.send(change(askers[2*i+2], fmt.Sprintf("taken%d@example.com", i+1)))
				return d
			},
			func(i int) time.Duration {
				_, d := a.send(change(askers[2*i+3], fmt.Sprintf("free%d@example.com", i+1)))
				return d
			})
	})
}

// sign-up with a taken address, verification required: the same answer (but for the new id and
// the timestamps) and the same time — the password is hashed either way.
func TestSignUpEnumeration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newEnumApp(t, b)
		const warmup, pairs = 4, 40
		a.fixtureUsers(t, "taken", 3*(warmup+pairs)+1)
		signUp := func(email string) request {
			return request{method: http.MethodPost, path: "/api/auth/sign-up/email",
				body: `{"name":"Someone","email":"` + email + `","password":"correct-horse-battery","callbackURL":"/welcome"}`}
		}
		known, _ := a.send(signUp("taken0@example.com"))
		unknown, _ := a.send(signUp("new0@example.com"))
		sameAnswer(t, "sign-up", known, unknown, func(s string) string {
			return strings.ReplaceAll(userIDAndTimes.ReplaceAllString(s, `"$1":"…"`), "new0@", "taken0@")
		})
		var body struct {
			Token *string        `json:"token"`
			User  map[string]any `json:"user"`
		}
		if err := json.Unmarshal(known.Body.Bytes(), &body); err != nil || known.Code != http.StatusOK || body.Token != nil ||
			body.User["email"] != "taken0@example.com" || body.User["emailVerified"] != false ||
			!regexp.MustCompile(`^usr_[0-9a-z]{26}$`).MatchString(fmt.Sprint(body.User["id"])) {
			t.Errorf("taken sign-up = %d %s", known.Code, known.Body)
		}
		if _, _, err := a.store.UserByEmail(context.Background(), "new0@example.com"); err != nil {
			t.Errorf("the new address was not signed up: %v", err)
		}
		if u, _, err := a.store.UserByEmail(context.Background(), "taken0@example.com"); err != nil || u.Name != "taken" {
			t.Errorf("the taken address's account = %+v, %v", u, err)
		}
		sameTiming(t, "sign-up", warmup, pairs,
			func(i int) time.Duration { _, d := a.send(signUp(fmt.Sprintf("taken%d@example.com", i+1))); return d },
			func(i int) time.Duration { _, d := a.send(signUp(fmt.Sprintf("new%d@example.com", i+1))); return d })
	})
}
