package server

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// passkeyOptions asks path (a generate-*-options route) for options with headers and returns
// them with the ceremony cookie's Cookie header, asserting the cookie's flags.
func (a tfApp) passkeyOptions(t *testing.T, path string, headers map[string]string) (map[string]any, string) {
	t.Helper()
	res := a.do(request{method: http.MethodGet, path: path, headers: headers})
	var opts map[string]any
	res.decode(t, http.StatusOK, &opts)
	if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	ck := res.sessionCookie(t, "gatehouse.passkey")
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.MaxAge != 300 {
		t.Fatalf("passkey cookie = %+v, want HttpOnly, SameSite=Lax, Path=/, Max-Age=300", ck)
	}
	return opts, cookieHeader(ck)
}

// registerPasskey registers auth for u through the routes and returns the stored passkey's body.
func (a tfApp) registerPasskey(t *testing.T, u testUser, auth *softAuthenticator, name string) map[string]any {
	t.Helper()
	opts, ck := a.passkeyOptions(t, "/api/auth/passkey/generate-register-options", map[string]string{"Cookie": u.Cookie})
	var pk map[string]any
	a.do(withCookie(u.Cookie+"; "+ck, jsonPost("/api/auth/passkey/verify-registration",
		mustJSON(map[string]any{"response": auth.register(t, opts), "name": name})))).decode(t, http.StatusOK, &pk)
	return pk
}

// signInOptions starts a passkey sign-in without a session.
func (a tfApp) signInOptions(t *testing.T) (map[string]any, string) {
	t.Helper()
	return a.passkeyOptions(t, "/api/auth/passkey/generate-authenticate-options", nil)
}

func verifyAuthentication(ck string, assertion map[string]any) request {
	return withCookie(ck, jsonPost("/api/auth/passkey/verify-authentication", mustJSON(map[string]any{"response": assertion})))
}

func TestPasskeyRegistrationAndSignIn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		auth := newSoftAuthenticator(t)

		opts, ck := a.passkeyOptions(t, "/api/auth/passkey/generate-register-options", map[string]string{"Cookie": u.Cookie})
		rp, _ := opts["rp"].(map[string]any)
		sel, _ := opts["authenticatorSelection"].(map[string]any)
		user, _ := opts["user"].(map[string]any)
		if rp["id"] != "gatehouse.test" || rp["name"] != "Gatehouse" || opts["attestation"] != "none" ||
			sel["residentKey"] != "preferred" || sel["userVerification"] != "preferred" ||
			user["name"] != "ada@example.com" || user["displayName"] != "Ada" {
			t.Fatalf("registration options = %s", mustJSON(opts))
		}
		// Without a session there is nothing to register for.
		a.do(request{method: http.MethodGet, path: "/api/auth/passkey/generate-register-options"}).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")

		answer := auth.register(t, opts)
		var pk map[string]any
		a.do(withCookie(u.Cookie+"; "+ck, jsonPost("/api/auth/passkey/verify-registration",
			mustJSON(map[string]any{"response": answer, "name": "Laptop"})))).decode(t, http.StatusOK, &pk)
		if pk["name"] != "Laptop" || pk["userId"] != u.ID || pk["credentialID"] != b64url.EncodeToString(auth.credID) ||
			pk["counter"] != float64(0) || pk["deviceType"] != "singleDevice" || pk["backedUp"] != false ||
			pk["transports"] != "internal" || pk["aaguid"] != "00000000-0000-0000-0000-000000000000" {
			t.Fatalf("registered passkey = %s", mustJSON(pk))
		}
		// The challenge was taken: the same answer again is refused, and nothing more is stored.
		a.do(withCookie(u.Cookie+"; "+ck, jsonPost("/api/auth/passkey/verify-registration",
			mustJSON(map[string]any{"response": answer})))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")
		var list []map[string]any
		a.do(request{method: http.MethodGet, path: "/api/auth/passkey/list-user-passkeys", headers: map[string]string{"Cookie": u.Cookie}}).
			decode(t, http.StatusOK, &list)
		if len(list) != 1 || list[0]["id"] != pk["id"] {
			t.Fatalf("list = %s", mustJSON(list))
		}

		// Sign in with it, without a session: amr hwk and mfa (the authenticator verified the user).
		opts, ck = a.signInOptions(t)
		if opts["rpId"] != "gatehouse.test" || opts["userVerification"] != "preferred" || opts["allowCredentials"] != nil {
			t.Fatalf("authentication options = %s", mustJSON(opts))
		}
		assertion := auth.assert(t, opts)
		res := a.do(verifyAuthentication(ck, assertion))
		var signed sessionWithUserBody
		res.decode(t, http.StatusOK, &signed)
		if signed.User.ID != u.ID {
			t.Fatalf("signed in as %q, want %q", signed.User.ID, u.ID)
		}
		cookie := cookieHeader(res.sessionCookie(t, a.srv.sessionCookieName))
		if c := res.sessionCookie(t, "gatehouse.passkey"); c.MaxAge >= 0 {
			t.Errorf("passkey cookie not expired: %+v", c)
		}
		sessions, err := a.store.ListSessions(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		var amr []string
		for _, s := range sessions {
			if s.ID != u.Session.ID {
				amr = s.AMR
			}
		}
		if !slices.Equal(amr, []string{"hwk", "mfa"}) {
			t.Fatalf("passkey session amr = %v, want [hwk mfa]", amr)
		}
		var sess sessionWithUserBody
		a.do(request{method: http.MethodGet, path: "/api/auth/get-session", headers: map[string]string{"Cookie": cookie}}).decode(t, http.StatusOK, &sess)
		if sess.User.ID != u.ID {
			t.Fatalf("get-session user = %q", sess.User.ID)
		}
		stored, err := a.store.PasskeyByCredentialID(ctx, b64url.EncodeToString(auth.credID))
		if err != nil || stored.Counter != 1 {
			t.Fatalf("stored counter = %d (%v), want 1", stored.Counter, err)
		}

		// A replayed assertion with its spent challenge is refused.
		a.do(verifyAuthentication(ck, assertion)).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")
		// A counter that did not advance (a cloned authenticator) is refused, and not recorded.
		opts, ck = a.signInOptions(t)
		a.do(verifyAuthentication(ck, auth.assertWith(t, opts, 1))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "AUTHENTICATION_FAILED")
		opts, ck = a.signInOptions(t)
		a.do(verifyAuthentication(ck, auth.assertWith(t, opts, 0))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "AUTHENTICATION_FAILED")
		if stored, _ := a.store.PasskeyByCredentialID(ctx, b64url.EncodeToString(auth.credID)); stored.Counter != 1 {
			t.Fatalf("stored counter after refusals = %d, want 1", stored.Counter)
		}
		// The next counter works.
		opts, ck = a.signInOptions(t)
		a.do(verifyAuthentication(ck, auth.assert(t, opts))).decode(t, http.StatusOK, &signed)
		if len(sessionsOf(t, a, u.ID)) != 3 {
			t.Fatalf("sessions = %d, want 3 (fixture and two passkey sign-ins)", len(sessionsOf(t, a, u.ID)))
		}
	})
}

func sessionsOf(t *testing.T, a tfApp, userID string) []string {
	t.Helper()
	ss, err := a.store.ListSessions(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestPasskeyCeremoniesRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		v := a.newUser(t, "Bob", "bob@example.com")
		auth := newSoftAuthenticator(t)
		a.registerPasskey(t, u, auth, "Laptop")
		before := len(sessionsOf(t, a, u.ID))

		// No ceremony cookie, or a forged one.
		opts, _ := a.signInOptions(t)
		a.do(verifyAuthentication("", auth.assert(t, opts))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")
		a.do(verifyAuthentication("gatehouse.passkey=forged.token", auth.assert(t, opts))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")

		// A challenge answered after its 5 minutes.
		opts, ck := a.signInOptions(t)
		a.clock.Advance(identity.PasskeyCeremonyLifetime + time.Second)
		a.do(verifyAuthentication(ck, auth.assert(t, opts))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")

		// An answer signed for another origin, or another relying party.
		opts, ck = a.signInOptions(t)
		auth.origin = "https://evil.example"
		a.do(verifyAuthentication(ck, auth.assert(t, opts))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "AUTHENTICATION_FAILED")
		auth.origin, auth.rpID = testBaseURL, "evil.example"
		opts, ck = a.signInOptions(t)
		a.do(verifyAuthentication(ck, auth.assert(t, opts))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "AUTHENTICATION_FAILED")
		auth.rpID = "gatehouse.test"

		// A registration ceremony is no sign-in ceremony.
		regOpts, regCk := a.passkeyOptions(t, "/api/auth/passkey/generate-register-options", map[string]string{"Cookie": u.Cookie})
		a.do(verifyAuthentication(regCk, auth.assert(t, regOpts))).wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")

		// An unknown credential.
		stranger := newSoftAuthenticator(t)
		stranger.userHandle = []byte(u.ID)
		opts, ck = a.signInOptions(t)
		a.do(verifyAuthentication(ck, stranger.assert(t, opts))).wantAuthProblem(t, http.StatusUnauthorized, "http-401", "PASSKEY_NOT_FOUND")

		// A sign-in post from an untrusted origin (the ceremony cookie makes it a cookie request).
		opts, ck = a.signInOptions(t)
		r := verifyAuthentication(ck, auth.assert(t, opts))
		r.headers["Origin"] = "https://evil.example"
		a.do(r).wantAuthProblem(t, http.StatusForbidden, "http-403", "INVALID_ORIGIN")

		if n := len(sessionsOf(t, a, u.ID)); n != before {
			t.Fatalf("refused sign-ins started sessions: %d, want %d", n, before)
		}

		// Registration: another origin, another user's ceremony, no session.
		second := newSoftAuthenticator(t)
		second.origin = "https://evil.example"
		regOpts, regCk = a.passkeyOptions(t, "/api/auth/passkey/generate-register-options", map[string]string{"Cookie": u.Cookie})
		a.do(withCookie(u.Cookie+"; "+regCk, jsonPost("/api/auth/passkey/verify-registration",
			mustJSON(map[string]any{"response": second.register(t, regOpts)})))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "FAILED_TO_VERIFY_REGISTRATION")
		second.origin = testBaseURL
		regOpts, regCk = a.passkeyOptions(t, "/api/auth/passkey/generate-register-options", map[string]string{"Cookie": u.Cookie})
		a.do(withCookie(v.Cookie+"; "+regCk, jsonPost("/api/auth/passkey/verify-registration",
			mustJSON(map[string]any{"response": second.register(t, regOpts)})))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "CHALLENGE_NOT_FOUND")
		// The same credential twice.
		regOpts, regCk = a.passkeyOptions(t, "/api/auth/passkey/generate-register-options", map[string]string{"Cookie": v.Cookie})
		a.do(withCookie(v.Cookie+"; "+regCk, jsonPost("/api/auth/passkey/verify-registration",
			mustJSON(map[string]any{"response": auth.register(t, regOpts)})))).
			wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "PREVIOUSLY_REGISTERED")
		for _, id := range []string{u.ID, v.ID} {
			if pks, err := a.store.PasskeysOf(ctx, id); err != nil || len(pks) != map[string]int{u.ID: 1, v.ID: 0}[id] {
				t.Fatalf("passkeys of %s = %d (%v) after refused registrations", id, len(pks), err)
			}
		}
		a.do(jsonPost("/api/auth/passkey/verify-registration", `{"response":{}}`)).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		a.do(withCookie(u.Cookie, jsonPost("/api/auth/passkey/verify-registration", `{}`))).
			wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")
	})
}

func TestPasskeyManagement(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		a := newTFApp(t, b)
		u := a.newUser(t, "Ada", "ada@example.com")
		v := a.newUser(t, "Bob", "bob@example.com")
		synced := newSoftAuthenticator(t)
		synced.backupEligible = true
		pk := a.registerPasskey(t, u, synced, "Phone")
		if pk["deviceType"] != "multiDevice" || pk["backedUp"] != true {
			t.Fatalf("synced passkey = %s", mustJSON(pk))
		}
		id, _ := pk["id"].(string)

		// A synced passkey signs in with amr swk.
		opts, ck := a.signInOptions(t)
		a.do(verifyAuthentication(ck, synced.assert(t, opts))).decode(t, http.StatusOK, &sessionWithUserBody{})
		ss, _ := a.store.ListSessions(ctx, u.ID)
		found := false
		for _, s := range ss {
			found = found || slices.Equal(s.AMR, []string{"swk", "mfa"})
		}
		if !found {
			t.Fatal("no session with amr [swk mfa]")
		}

		// Another user can neither rename nor remove it.
		a.do(v.as(jsonPost("/api/auth/passkey/update-passkey", mustJSON(map[string]any{"id": id, "name": "Mine"})))).
			wantAuthProblem(t, http.StatusNotFound, "http-404", "PASSKEY_NOT_FOUND")
		a.do(v.as(jsonPost("/api/auth/passkey/delete-passkey", mustJSON(map[string]any{"id": id})))).
			wantAuthProblem(t, http.StatusNotFound, "http-404", "PASSKEY_NOT_FOUND")
		var list []map[string]any
		a.do(request{method: http.MethodGet, path: "/api/auth/passkey/list-user-passkeys", headers: map[string]string{"Cookie": v.Cookie}}).decode(t, http.StatusOK, &list)
		if len(list) != 0 {
			t.Fatalf("another user's list = %s", mustJSON(list))
		}
		if got, err := a.store.PasskeysOf(ctx, u.ID); err != nil || len(got) != 1 || *got[0].Name != "Phone" {
			t.Fatalf("after another user's attempts: %+v (%v)", got, err)
		}
		a.do(u.as(jsonPost("/api/auth/passkey/update-passkey", `{"id":"pk_nope","name":"x"}`))).
			wantAuthProblem(t, http.StatusNotFound, "http-404", "PASSKEY_NOT_FOUND")
		a.do(u.as(jsonPost("/api/auth/passkey/update-passkey", mustJSON(map[string]any{"id": id, "name": ""})))).
			wantAuthProblem(t, http.StatusBadRequest, "validation", "VALIDATION_ERROR")

		// The owner renames and removes it.
		var renamed struct {
			Passkey map[string]any `json:"passkey"`
		}
		a.do(u.as(jsonPost("/api/auth/passkey/update-passkey", mustJSON(map[string]any{"id": id, "name": "Work phone"})))).decode(t, http.StatusOK, &renamed)
		if renamed.Passkey["name"] != "Work phone" || renamed.Passkey["id"] != id {
			t.Fatalf("renamed = %s", mustJSON(renamed))
		}
		var status map[string]any
		a.do(u.as(jsonPost("/api/auth/passkey/delete-passkey", mustJSON(map[string]any{"id": id})))).decode(t, http.StatusOK, &status)
		if status["status"] != true {
			t.Fatalf("delete = %v", status)
		}
		a.do(u.as(jsonPost("/api/auth/passkey/delete-passkey", mustJSON(map[string]any{"id": id})))).
			wantAuthProblem(t, http.StatusNotFound, "http-404", "PASSKEY_NOT_FOUND")
		// A removed passkey no longer signs in.
		opts, ck = a.signInOptions(t)
		a.do(verifyAuthentication(ck, synced.assert(t, opts))).wantAuthProblem(t, http.StatusUnauthorized, "http-401", "PASSKEY_NOT_FOUND")
	})
}
