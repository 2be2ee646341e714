package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// changeEmail asks, as u, to move u's account to newEmail (with callbackURL when not "").
func (a mailApp) changeEmail(u testUser, newEmail, callbackURL string) response {
	body := `{"newEmail":` + jsonString(newEmail)
	if callbackURL != "" {
		body += `,"callbackURL":` + jsonString(callbackURL)
	}
	return a.do(u.as(request{method: http.MethodPost, path: "/api/auth/change-email", body: body + "}"}))
}

// wantStatusTrue checks change-email's one answer, byte for byte.
func wantStatusTrue(t *testing.T, res response) {
	t.Helper()
	if res.Code != http.StatusOK || res.Body.String() != `{"status":true}`+"\n" ||
		res.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("change-email = %d %q (%s), want 200 {\"status\":true}", res.Code, res.Body, res.Header().Get("Content-Type"))
	}
}

// userEmail is the address user id has in the store, and whether it is verified.
func userEmail(t *testing.T, st *store.Store, id string) (string, bool) {
	t.Helper()
	u, err := st.User(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u.Email, u.EmailVerified
}

// The link goes to the new address and a notice to the old one; the address changes only when
// the link is opened, which keeps the sessions, makes the new address the sign-in and verified,
// and is audited. Opened again it is still a success; the old address stops working.
func TestEmailChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		ada := a.verifiedUser(t, "Ada", "ada@example.com")

		wantStatusTrue(t, a.changeEmail(ada, "Ada.King@Example.com", "/settings"))
		notice := a.smtp.WaitFor(t, "ada@example.com", 20*time.Second)
		if notice.Subject != "Your Gatehouse email address is about to change" ||
			!strings.Contains(notice.Text, "from ada@example.com to ada.king@example.com") ||
			strings.Contains(notice.Text, "http") || !strings.Contains(notice.HTML, "ada.king@example.com") {
			t.Errorf("notice %q:\n%s", notice.Subject, notice.Text)
		}
		msg := a.smtp.WaitFor(t, "ada.king@example.com", 20*time.Second)
		if msg.Subject != "Confirm your new email address for Gatehouse" || !strings.Contains(msg.Text, "Hello Ada,") ||
			!strings.Contains(msg.HTML, ">Confirm my new email address</a>") {
			t.Errorf("link mail %q:\n%s", msg.Subject, msg.Text)
		}
		link := a.link(t, "ada.king@example.com", 1, "/api/auth/verify-email?")
		if !strings.Contains(link, "callbackURL=%2Fsettings") {
			t.Errorf("link %s", link)
		}

		// Nothing changes before the link is opened.
		if email, _ := userEmail(t, a.store, ada.ID); email != "ada@example.com" {
			t.Fatalf("address before the link = %s", email)
		}
		a.signIn(t, "ada@example.com", "password-ada@example.com")

		// Opened in a browser that is not signed in: moved, nobody signed in by the link.
		res := a.do(request{method: http.MethodGet, path: link})
		if res.Code != http.StatusFound || res.Header().Get("Location") != "/settings" || len(res.Header().Values("Set-Cookie")) != 0 {
			t.Fatalf("link = %d to %q, cookies %v; body %s", res.Code, res.Header().Get("Location"), res.Header().Values("Set-Cookie"), res.Body)
		}
		if email, verified := userEmail(t, a.store, ada.ID); email != "ada.king@example.com" || !verified {
			t.Errorf("after the link: %s verified %v", email, verified)
		}
		if got := a.getSession(t, ada.Cookie); got == nil || got.Email != "ada.king@example.com" || !got.EmailVerified {
			t.Errorf("the session after the change = %+v", got)
		}
		a.signIn(t, "ada.king@example.com", "password-ada@example.com")
		a.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email",
			body: `{"email":"ada@example.com","password":"password-ada@example.com"}`}).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_EMAIL_OR_PASSWORD")

		// Opened again (a scanner first): the same success, nothing more.
		res = a.do(request{method: http.MethodGet, path: link})
		if res.Code != http.StatusFound || res.Header().Get("Location") != "/settings" {
			t.Errorf("second opening = %d to %q", res.Code, res.Header().Get("Location"))
		}
		changes := auditEntries(t, a.store, identity.EmailChangeAction)
		if len(changes) != 1 || changes[0].ActorID != ada.ID || changes[0].TargetID != ada.ID ||
			changes[0].Metadata["from"] != "ada@example.com" || changes[0].Metadata["to"] != "ada.king@example.com" {
			t.Errorf("change audit rows = %+v", changes)
		}
		if reqs := auditEntries(t, a.store, identity.EmailChangeRequestAction); len(reqs) != 1 || reqs[0].ActorID != ada.ID ||
			reqs[0].Metadata["to"] != "ada.king@example.com" {
			t.Errorf("request audit rows = %+v", reqs)
		}
	})
}

// An address another account has gets the same answer, byte for byte, and the same notice to
// the caller's own address; nothing reaches the other account, and no link works.
func TestEmailChangeTakenAddress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		ada := a.verifiedUser(t, "Ada", "ada@example.com")
		grace := a.verifiedUser(t, "Grace", "grace@example.com")

		free, taken := a.changeEmail(ada, "free@example.com", ""), a.changeEmail(ada, "grace@example.com", "")
		wantStatusTrue(t, free)
		wantStatusTrue(t, taken)
		a.smtp.Wait(t, 3, 20*time.Second)
		outboxDrained(t, a.store)
		time.Sleep(50 * time.Millisecond)
		if n := len(a.smtp.To("grace@example.com")); n != 0 {
			t.Errorf("%d messages to the taken address", n)
		}
		notices := a.smtp.To("ada@example.com")
		if len(notices) != 2 {
			t.Fatalf("%d notices to ada, want 2", len(notices))
		}
		if f, g := strings.ReplaceAll(notices[0].Text, "free@", "X@"), strings.ReplaceAll(notices[1].Text, "grace@", "X@"); f != g ||
			notices[0].Subject != notices[1].Subject {
			t.Errorf("the notices differ:\n%s\n---\n%s", notices[0].Text, notices[1].Text)
		}
		if email, _ := userEmail(t, a.store, grace.ID); email != "grace@example.com" {
			t.Errorf("grace = %s", email)
		}
		if email, _ := userEmail(t, a.store, ada.ID); email != "ada@example.com" {
			t.Errorf("ada = %s", email)
		}
	})
}

// The link of an address someone else took meanwhile fails cleanly (409, or the callbackURL
// with the error; a page for a browser) and changes nothing; an address changed meanwhile
// voids the older link.
func TestEmailChangeLinkAfterAddressTaken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		ada := a.verifiedUser(t, "Ada", "ada@example.com")
		wantStatusTrue(t, a.changeEmail(ada, "new@example.com", "https://app.example.com/settings?tab=1"))
		wantStatusTrue(t, a.changeEmail(ada, "other@example.com", ""))
		link := a.link(t, "new@example.com", 1, "/api/auth/verify-email?")
		other := a.link(t, "other@example.com", 1, "/api/auth/verify-email?")
		a.newUser(t, "Mallory", "new@example.com")

		res := a.do(request{method: http.MethodGet, path: link})
		if want := "https://app.example.com/settings?error=USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL&tab=1"; res.Code != http.StatusFound ||
			res.Header().Get("Location") != want {
			t.Errorf("link = %d to %q, want 302 to %s", res.Code, res.Header().Get("Location"), want)
		}
		u, _ := url.Parse(link)
		noCallback := "/api/auth/verify-email?token=" + u.Query().Get("token")
		p := a.do(request{method: http.MethodGet, path: noCallback}).
			wantAuthProblem(t, http.StatusConflict, "conflict", "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL")
		if p.Title != "User already exists. Use another email." {
			t.Errorf("problem = %+v", p)
		}
		page := a.do(request{method: http.MethodGet, path: noCallback, headers: map[string]string{"Accept": "text/html"}})
		if page.Code != http.StatusConflict || !strings.Contains(page.Body.String(), "Another account has this email address now") {
			t.Errorf("page = %d %s", page.Code, page.Body)
		}
		if email, _ := userEmail(t, a.store, ada.ID); email != "ada@example.com" {
			t.Fatalf("ada = %s", email)
		}
		if n := len(auditEntries(t, a.store, identity.EmailChangeAction)); n != 0 {
			t.Errorf("%d change audit rows", n)
		}

		// The other link works; then the first one, even with its address free again, is void.
		if res := a.do(request{method: http.MethodGet, path: other}); res.Code != http.StatusOK {
			t.Fatalf("other link = %d %s", res.Code, res.Body)
		}
		a.do(request{method: http.MethodGet, path: noCallback}).wantAuthProblem(t, http.StatusUnauthorized, "http-401", "INVALID_TOKEN")
	})
}

// Bad requests are refused and write nothing: signed out 401, the same address 400, an invalid
// address 400 with the field, an untrusted callbackURL 403, a cross-site Origin 403.
func TestEmailChangeRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		ada := a.verifiedUser(t, "Ada", "ada@example.com")

		a.do(request{method: http.MethodPost, path: "/api/auth/change-email", body: `{"newEmail":"new@example.com"}`}).
			wantAuthProblem(t, http.StatusUnauthorized, "http-401", "UNAUTHORIZED")
		p := a.changeEmail(ada, "ADA@example.com", "").wantAuthProblem(t, http.StatusBadRequest, "http-4xx", "EMAIL_IS_THE_SAME")
		if p.Title != "Email is the same" {
			t.Errorf("problem = %+v", p)
		}
		v := a.changeEmail(ada, "not-an-address", "").wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		if len(v.Errors) != 1 || v.Errors[0].Path[len(v.Errors[0].Path)-1] != "newEmail" {
			t.Errorf("validation errors = %+v", v.Errors)
		}
		a.changeEmail(ada, "new@example.com", "https://evil.example/x").
			wantAuthProblem(t, http.StatusForbidden, "http-403", "INVALID_CALLBACK_URL")
		a.do(ada.as(request{method: http.MethodPost, path: "/api/auth/change-email", body: `{"newEmail":"new@example.com"}`,
			headers: map[string]string{"Origin": "https://evil.example"}})).
			wantAuthProblem(t, http.StatusForbidden, "http-403", "INVALID_ORIGIN")

		if n := len(auditEntries(t, a.store, identity.EmailChangeRequestAction)); n != 0 {
			t.Errorf("%d request audit rows", n)
		}
		if due, err := a.store.OutboxDue(context.Background(), time.Now().Add(time.Hour), []string{"mail"}); err != nil || due {
			t.Errorf("mail queued by refused requests: %v %v", due, err)
		}
		if n := len(a.smtp.Messages()); n != 0 {
			t.Errorf("%d messages sent", n)
		}
	})
}

// The send limits count both messages of a change: past 5 per address per 15 minutes the old
// address gets no more notices, while every answer stays the same and each new address still
// gets its link.
func TestEmailChangeSendLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newMailApp(t, b, testConfig())
		ada := a.verifiedUser(t, "Ada", "ada@example.com")
		for i := range 6 {
			wantStatusTrue(t, a.changeEmail(ada, fmt.Sprintf("new%d@example.com", i), ""))
		}
		a.smtp.Wait(t, 11, 20*time.Second)
		outboxDrained(t, a.store)
		time.Sleep(50 * time.Millisecond)
		if n := len(a.smtp.To("ada@example.com")); n != 5 {
			t.Errorf("%d notices to the old address, want 5", n)
		}
		for i := range 6 {
			if n := len(a.smtp.To(fmt.Sprintf("new%d@example.com", i))); n != 1 {
				t.Errorf("%d links to new%d@example.com, want 1", n, i)
			}
		}
		if n := len(a.smtp.Messages()); n != 11 {
			t.Errorf("%d messages, want 11", n)
		}
	})
}
