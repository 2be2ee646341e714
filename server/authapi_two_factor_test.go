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

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// tfApp is an app over a store whose clock the test moves (TOTP steps follow it).
type tfApp struct {
	*testApp
	clock *storetest.Clock
	url   string
}

func newTFApp(t *testing.T, b storetest.Backend) tfApp {
	t.Helper()
	clock := storetest.NewClock(time.Now())
	url := b.URL(t)
	st := openURL(t, url, store.WithClock(clock.Now))
	return tfApp{testApp: newTestApp(t, st, testConfig()), clock: clock, url: url}
}

// enrolment is enable's answer.
type enrolment struct {
	Method      string   `json:"method"`
	TotpURI     string   `json:"totpURI"`
	BackupCodes []string `json:"backupCodes"`
}

var backupCodeRE = regexp.MustCompile(`^[A-Za-z0-9]{5}-[A-Za-z0-9]{5}$`)

// totpSecret reads the secret out of an otpauth URI, failing unless the URI is the one
// RFC 6238 authenticator apps read: otpauth://totp/Gatehouse:<email>, SHA1, 6 digits, 30 s.
func totpSecret(t *testing.T, uri, email string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Scheme != "otpauth" || u.Host != "totp" || u.Path != "/Gatehouse:"+email || q.Get("issuer") != "Gatehouse" ||
		q.Get("algorithm") != "SHA1" || q.Get("digits") != "6" || q.Get("period") != "30" || len(q.Get("secret")) != 32 {
		t.Fatalf("totpURI = %s", uri)
	}
	return q.Get("secret")
}

// code is the TOTP code of secret at at (the test's own computation, with pquerna/otp).
func code(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonPost(path, body string) request {
	return request{method: http.MethodPost, path: path, body: body}
}

// enable enrols u (password "password-"+email) and turns the factor on with a code.
func (a tfApp) enable(t *testing.T, u testUser) (secret string, codes []string) {
	t.Helper()
	var e enrolment
	a.do(u.as(jsonPost("/api/auth/two-factor/enable", `{"password":`+jsonString("password-"+u.Email)+`}`))).decode(t, http.StatusOK, &e)
	secret = totpSecret(t, e.TotpURI, u.Email)
	a.do(u.as(jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+code(t, secret, a.clock.Now())+`"}`))).decode(t, http.StatusOK, &struct{}{})
	return secret, e.BackupCodes
}

// signInPending signs in with the password and returns the pending sign-in's cookie header,
// asserting the twoFactorRedirect answer and that no session cookie was set (only, as
// better-auth does, the deletion of one).
func (a tfApp) signInPending(t *testing.T, email, extraCookie string) string {
	t.Helper()
	r := jsonPost("/api/auth/sign-in/email", `{"email":`+jsonString(email)+`,"password":`+jsonString("password-"+email)+`}`)
	if extraCookie != "" {
		r = withCookie(extraCookie, r)
	}
	res := a.do(r)
	var body map[string]any
	res.decode(t, http.StatusOK, &body)
	want := map[string]any{"twoFactorRedirect": true, "twoFactorMethods": []any{"totp"}}
	if b, w := mustJSON(body), mustJSON(want); b != w {
		t.Fatalf("sign-in body = %s, want %s", b, w)
	}
	for _, c := range res.Result().Cookies() {
		if c.Name == a.srv.sessionCookieName && c.MaxAge >= 0 {
			t.Fatalf("sign-in set a session cookie before the second factor: %v", c)
		}
	}
	ck := res.sessionCookie(t, "gatehouse.two_factor")
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.MaxAge != 600 {
		t.Fatalf("two_factor cookie = %+v, want HttpOnly, SameSite=Lax, Path=/, Max-Age=600", ck)
	}
	return cookieHeader(ck)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// verified asserts a 200 {token, user} that started a session for userID, and returns the
// session's Cookie header.
func (a tfApp) verified(t *testing.T, res response, userID string) string {
	t.Helper()
	var body struct {
		Token string       `json:"token"`
		User  authUserBody `json:"user"`
	}
	res.decode(t, http.StatusOK, &body)
	if !tokenRE.MatchString(body.Token) || body.User.ID != userID {
		t.Fatalf("verify body = %+v", body)
	}
	cookie := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
	if ck := res.sessionCookie(t, "gatehouse.two_factor"); ck.MaxAge >= 0 {
		t.Errorf("two_factor cookie not expired: %+v", ck)
	}
	var sess sessionWithUserBody
	a.do(request{method: http.MethodGet, path: "/api/auth/get-session", headers: map[string]string{"Cookie": cookie}}).decode(t, http.StatusOK, &sess)
	if sess.User.ID != userID {
		t.Fatalf("get-session user = %q, want %q", sess.User.ID, userID)
	}
	return cookie
}

func TestTwoFactorTOTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")

		// enable needs the password and writes nothing without it.
		a.do(u.as(jsonPost("/api/auth/two-factor/enable", `{"password":"wrong-password"}`))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		a.do(u.as(jsonPost("/api/auth/two-factor/enable", `{}`))).
			wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")
		if _, err := a.store.TwoFactorByUser(context.Background(), u.ID); err == nil {
			t.Fatal("a refused enable stored a factor")
		}

		var e enrolment
		a.do(u.as(jsonPost("/api/auth/two-factor/enable", `{"password":"password-ada@example.com"}`))).decode(t, http.StatusOK, &e)
		secret := totpSecret(t, e.TotpURI, u.Email)
		if e.Method != "totp" || len(e.BackupCodes) != 10 {
			t.Fatalf("enable = %+v", e)
		}
		for _, c := range e.BackupCodes {
			if !backupCodeRE.MatchString(c) {
				t.Fatalf("backup code %q, want xxxxx-xxxxx", c)
			}
		}
		// At rest: the secret sealed, the backup codes hashed.
		tf, err := a.store.TwoFactorByUser(context.Background(), u.ID)
		if err != nil || tf.Verified || !strings.HasPrefix(tf.Secret, "v1.") || strings.Contains(tf.Secret, secret) {
			t.Fatalf("stored factor = %+v, %v; want sealed and not verified", tf, err)
		}
		var hashes []string
		if err := rawDB(t, a.url).Select(&hashes, `SELECT code_hash FROM two_factor_backup_codes`); err != nil {
			t.Fatal(err)
		}
		if len(hashes) != 10 || strings.Contains(strings.Join(hashes, ","), e.BackupCodes[0]) {
			t.Fatalf("stored backup codes = %v", hashes)
		}

		// Not on until a code is accepted: the password alone still signs in.
		a.signIn(t, u.Email, "password-"+u.Email)

		a.do(u.as(jsonPost("/api/auth/two-factor/verify-totp", `{"code":"000000x"}`))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_CODE")
		first := code(t, secret, a.clock.Now())
		a.do(u.as(jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+first+`"}`))).decode(t, http.StatusOK, &struct{}{})
		// The accepted code is not accepted again within its window.
		a.do(u.as(jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+first+`"}`))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_CODE")

		// Now sign-in asks for the second factor.
		pending := a.signInPending(t, u.Email, "")
		// The code accepted at enrolment is a replay here too.
		a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+first+`"}`))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_CODE")
		a.clock.Advance(30 * time.Second)
		next := code(t, secret, a.clock.Now())
		a.verified(t, a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+next+`"}`))), u.ID)
		// The pending sign-in is used up.
		a.clock.Advance(30 * time.Second)
		a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+code(t, secret, a.clock.Now())+`"}`))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_TWO_FACTOR_COOKIE")
		// Without a pending sign-in or a session.
		a.do(jsonPost("/api/auth/two-factor/verify-totp", `{"code":"123456"}`)).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_TWO_FACTOR_COOKIE")
		// A pending sign-in that names no trusted origin is refused as a cross-site write.
		pending = a.signInPending(t, u.Email, "")
		a.do(request{method: http.MethodPost, path: "/api/auth/two-factor/verify-totp", body: `{"code":"123456"}`,
			headers: map[string]string{"Cookie": pending}}).
			wantAuthProblem(t, http.StatusForbidden, "http-403", "MISSING_OR_NULL_ORIGIN")

		// get-totp-uri shows the same secret, with the password.
		var uri struct {
			TotpURI string `json:"totpURI"`
		}
		a.do(u.as(jsonPost("/api/auth/two-factor/get-totp-uri", `{"password":"wrong"}`))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		a.do(u.as(jsonPost("/api/auth/two-factor/get-totp-uri", `{"password":"password-ada@example.com"}`))).decode(t, http.StatusOK, &uri)
		if got := totpSecret(t, uri.TotpURI, u.Email); got != secret {
			t.Fatalf("get-totp-uri secret = %s, want %s", got, secret)
		}
	})
}

func TestTwoFactorBackupCodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		_, codes := a.enable(t, u)

		pending := a.signInPending(t, u.Email, "")
		a.verified(t, a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-backup-code", `{"code":"`+codes[0]+`"}`))), u.ID)
		// A backup code works once.
		pending = a.signInPending(t, u.Email, "")
		a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-backup-code", `{"code":"`+codes[0]+`"}`))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_BACKUP_CODE")
		a.verified(t, a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-backup-code", `{"code":"`+codes[1]+`"}`))), u.ID)

		// New codes replace the old ones, with the password.
		a.do(u.as(jsonPost("/api/auth/two-factor/generate-backup-codes", `{"password":"nope"}`))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		var fresh struct {
			Status      bool     `json:"status"`
			BackupCodes []string `json:"backupCodes"`
		}
		a.do(u.as(jsonPost("/api/auth/two-factor/generate-backup-codes", `{"password":"password-ada@example.com"}`))).decode(t, http.StatusOK, &fresh)
		if !fresh.Status || len(fresh.BackupCodes) != 10 || fresh.BackupCodes[2] == codes[2] {
			t.Fatalf("generate-backup-codes = %+v", fresh)
		}
		pending = a.signInPending(t, u.Email, "")
		a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-backup-code", `{"code":"`+codes[2]+`"}`))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_BACKUP_CODE")
		a.verified(t, a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-backup-code", `{"code":"`+fresh.BackupCodes[2]+`"}`))), u.ID)
	})
}

func TestTwoFactorFailuresThrottled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		secret, _ := a.enable(t, u)
		a.clock.Advance(30 * time.Second)

		pending := a.signInPending(t, u.Email, "")
		for i := range 5 {
			a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", `{"code":"00000`+string(rune('0'+i))+`"}`))).
				wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_CODE")
		}
		// The pending sign-in took its five wrong codes: it ends, even with the right one.
		right := `{"code":"` + code(t, secret, a.clock.Now()) + `"}`
		a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", right))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE")
		a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", right))).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_TWO_FACTOR_COOKIE")
		// The account keeps the count: a new pending sign-in is throttled too.
		pending = a.signInPending(t, u.Email, "")
		res := a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", right)))
		res.wantAuthProblem(t, http.StatusTooManyRequests, "http-4xx", "TOO_MANY_REQUESTS")
		if res.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	})
}

func TestTwoFactorTrustDeviceAndDisable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		secret, _ := a.enable(t, u)
		a.clock.Advance(30 * time.Second)

		pending := a.signInPending(t, u.Email, "")
		res := a.do(withCookie(pending, jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+code(t, secret, a.clock.Now())+`","trustDevice":true}`)))
		a.verified(t, res, u.ID)
		trust := res.sessionCookie(t, "gatehouse.trust_device")
		if !trust.HttpOnly || trust.SameSite != http.SameSiteLaxMode || trust.MaxAge != 30*24*3600 {
			t.Fatalf("trust_device cookie = %+v", trust)
		}
		// The trusted browser signs in with the password alone, and its trust is renewed.
		res = a.do(withCookie(cookieHeader(trust), jsonPost("/api/auth/sign-in/email", `{"email":"ada@example.com","password":"password-ada@example.com"}`)))
		var body signInBody
		res.decode(t, http.StatusOK, &body)
		if !tokenRE.MatchString(body.Token) || body.User.ID != u.ID {
			t.Fatalf("trusted sign-in = %+v", body)
		}
		renewed := res.sessionCookie(t, "gatehouse.trust_device")
		if renewed.Value == trust.Value {
			t.Fatal("trust_device cookie not renewed")
		}
		// The old trust token is spent.
		a.signInPending(t, u.Email, cookieHeader(trust))

		// disable needs the password; then the password alone signs in again.
		a.do(u.as(jsonPost("/api/auth/two-factor/disable", `{"password":"nope"}`))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "INVALID_PASSWORD")
		var st struct {
			Status bool `json:"status"`
		}
		a.do(u.as(jsonPost("/api/auth/two-factor/disable", `{"password":"password-ada@example.com"}`))).decode(t, http.StatusOK, &st)
		if !st.Status {
			t.Fatal("disable status false")
		}
		a.signIn(t, u.Email, "password-"+u.Email)
		a.do(u.as(jsonPost("/api/auth/two-factor/get-totp-uri", `{"password":"password-ada@example.com"}`))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "TOTP_NOT_ENABLED")
		a.do(u.as(jsonPost("/api/auth/two-factor/generate-backup-codes", `{"password":"password-ada@example.com"}`))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "TWO_FACTOR_NOT_ENABLED")
		// The renewed trust token went with the factor.
		var n int
		if err := rawDB(t, a.url).Get(&n, `SELECT COUNT(*) FROM two_factor_tokens`); err != nil || n != 0 {
			t.Fatalf("two_factor_tokens left: %d, %v", n, err)
		}
	})
}

// TestPasswordResetClaimRemovesSecondFactor: an account signed up with someone else's address
// and given a second factor by the squatter is claimed by the address's owner through a reset:
// the squatter's factor goes with the squatter's password, so the owner signs in with the new
// password alone.
func TestPasswordResetClaimRemovesSecondFactor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		res := a.signUp("Mallory", "victim@example.com", "mallory-password-1", "")
		res.decode(t, http.StatusOK, &struct{}{})
		squatter := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
		var e enrolment
		a.do(withCookie(squatter, jsonPost("/api/auth/two-factor/enable", `{"password":"mallory-password-1"}`))).decode(t, http.StatusOK, &e)
		secret := totpSecret(t, e.TotpURI, "victim@example.com")
		a.do(withCookie(squatter, jsonPost("/api/auth/two-factor/verify-totp", `{"code":"`+code(t, secret, a.clock.Now())+`"}`))).
			decode(t, http.StatusOK, &struct{}{})

		a.requestReset(t, "victim@example.com", "")
		token := strings.TrimPrefix(a.link(t, "victim@example.com", 2, "/api/auth/reset-password/"), "/api/auth/reset-password/")
		a.do(request{method: http.MethodPost, path: "/api/auth/reset-password",
			body: `{"newPassword":"victims-own-password","token":"` + token + `"}`}).decode(t, http.StatusOK, &struct{}{})
		if in, _ := a.signIn(t, "victim@example.com", "victims-own-password"); !in.User.EmailVerified {
			t.Errorf("after the reset: %+v", in.User)
		}
		claims := auditEntries(t, a.store, identity.EmailClaimAction)
		if len(claims) != 1 || claims[0].Metadata["twoFactorRemoved"] != true {
			t.Errorf("claims = %+v", claims)
		}
	})
}
