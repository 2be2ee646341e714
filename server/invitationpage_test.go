package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// invite invites email to orgID with role as inviter, through invite-member.
func (w orgWorld) invite(t *testing.T, orgID string, inviter testUser, email, role string) baInvitation {
	t.Helper()
	var inv baInvitation
	w.post(inviter, "invite-member", `{"organizationId":"`+orgID+`","email":"`+email+`","role":"`+role+`"}`).decode(t, http.StatusOK, &inv)
	return inv
}

// TestInvitationPage: the mailed accept link opens the hosted page. Signed out, it offers a
// sign-in with the invited address filled in and sign-up with it (not when sign-up is closed),
// both coming back to the page; signed in with another address, it says so and signs out on
// request; the invited user sees organization and role and accepts or declines. Unknown,
// expired, withdrawn and answered invitations get a sentence each, and answering one changes
// nothing.
func TestInvitationPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		grace := w.newUser(t, "Grace", "grace@example.com")
		eve := w.newUser(t, "Eve", "eve@example.com")
		org := w.createOrg(t, ada, "acme")
		inv := w.invite(t, org.ID, ada, "grace@example.com", RoleDeveloper)
		page := "/accept-invitation/" + inv.ID
		if link := w.mail.WaitFor(t, "grace@example.com", 20*time.Second).Link(t, testBaseURL); link != testBaseURL+page {
			t.Fatalf("mailed link %q, want %q", link, testBaseURL+page)
		}

		// Signed out.
		body := wantHostedPage(t, "signed out", w.do(getPage(page)), 200, "<h1>Join Org acme</h1>",
			"You have been invited to join Org acme. Sign in with the invited address to accept.",
			`<form method="post" action="/api/auth/sign-in/email">`, `value="grace@example.com"`)
		if strings.Contains(body, RoleDeveloper) {
			t.Errorf("the signed-out page shows the role:\n%s", body)
		}
		if hiddenOf(body, "callbackURL") != page {
			t.Errorf("sign-in callbackURL %q, want %q", hiddenOf(body, "callbackURL"), page)
		}
		if got, want := hrefOf(body, "sign-up"), "/api/auth/sign-up?callbackURL="+url.QueryEscape(page)+"&email=grace%40example.com"; got != want {
			t.Errorf("sign-up link %q, want %q", got, want)
		}
		if got, want := hrefOf(body, "forgot"), "/api/auth/forgot-password?callbackURL="+url.QueryEscape(page)+"&email=grace%40example.com"; got != want {
			t.Errorf("forgot link %q, want %q", got, want)
		}
		res := w.do(form("/api/auth/sign-in/email", url.Values{"email": {"grace@example.com"}, "password": {"wrong-password"}, "callbackURL": {page}}))
		if loc := res.Header().Get("Location"); loc != page+"?login_error=invalid_credentials" {
			t.Fatalf("failed sign-in goes to %q", loc)
		}
		wantHostedPage(t, "failed sign-in", w.do(getPage(page+"?login_error=invalid_credentials")), 200,
			`<p class="error" role="alert">The email or password is not correct.</p>`)
		// A signed-out post changes nothing and shows the page.
		wantHostedPage(t, "signed-out post", w.do(browserForm(page, url.Values{"decision": {"accept"}})), 200, "Sign in with the invited address")

		// Another account: said plainly; switching signs out and comes back.
		wantHostedPage(t, "other account", w.do(eve.as(getPage(page))), 200,
			"You are signed in as eve@example.com, but this invitation is for grace@example.com.",
			`name="decision" value="switch-account"`)
		wantHostedPage(t, "other account's accept", w.do(eve.as(browserForm(page, url.Values{"decision": {"accept"}}))), 200,
			"You are signed in as eve@example.com")
		res = w.do(eve.as(browserForm(page, url.Values{"decision": {"switch-account"}})))
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != page {
			t.Fatalf("switch account: %d to %q", res.Code, res.Header().Get("Location"))
		}
		if c := res.sessionCookie(t, w.srv.sessionCookieName); c.MaxAge >= 0 {
			t.Errorf("switch account keeps the cookie: %v", c)
		}
		wantHostedPage(t, "after switching", w.do(eve.as(getPage(page))), 200, "Sign in with the invited address")

		// The recipient: organization and role; accept makes a member.
		wantHostedPage(t, "recipient", w.do(grace.as(getPage(page))), 200,
			"<dt>Role</dt><dd>developer</dd>", "You have been invited to join Org acme as developer.",
			`name="decision" value="accept"`, `name="decision" value="decline"`)
		res = w.do(grace.as(browserForm(page, url.Values{"decision": {"accept"}})))
		wantHostedPage(t, "accepted", res, 200, "<h1>Welcome to Org acme</h1>", "You are now a member of Org acme as developer.")
		w.wantAudit(t, res, org.ID, "invitation.accept", grace.ID)
		if w.activeOrg(t, grace) != org.ID {
			t.Errorf("the organization is not active for grace")
		}
		wantHostedPage(t, "accepted again", w.do(grace.as(getPage(page))), 410, "This invitation has already been accepted.")
		wantHostedPage(t, "accept again", w.do(grace.as(browserForm(page, url.Values{"decision": {"accept"}}))), 410,
			"This invitation has already been accepted.")

		// Decline, withdrawn, expired, unknown.
		dee := w.newUser(t, "Dee", "dee@example.com") // eve's session ended with the switch
		declined := w.invite(t, org.ID, ada, "dee@example.com", RoleViewer)
		res = w.do(dee.as(browserForm("/accept-invitation/"+declined.ID, url.Values{"decision": {"decline"}})))
		wantHostedPage(t, "declined", res, 200, "You declined the invitation to join Org acme.")
		w.wantAudit(t, res, org.ID, "invitation.reject", dee.ID)
		wantHostedPage(t, "declined page", w.do(getPage("/accept-invitation/"+declined.ID)), 410, "This invitation has already been declined.")
		canceled := w.invite(t, org.ID, ada, "frank@example.com", RoleViewer)
		w.post(ada, "cancel-invitation", `{"invitationId":"`+canceled.ID+`"}`).decode(t, http.StatusOK, &struct{}{})
		wantHostedPage(t, "withdrawn", w.do(getPage("/accept-invitation/"+canceled.ID)), 410,
			"This invitation was withdrawn by the organization. Ask them to invite you again.")
		ctx := context.Background()
		expired := store.Invitation{OrganizationID: org.ID, Email: "hal@example.com", Role: RoleViewer, InviterID: ada.ID,
			ExpiresAt: time.Now().Add(-time.Hour)}
		if err := w.store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &expired) }); err != nil {
			t.Fatal(err)
		}
		wantHostedPage(t, "expired", w.do(getPage("/accept-invitation/"+expired.ID)), 410,
			"This invitation has expired. Ask the person who invited you to send a new one.")
		wantHostedPage(t, "unknown", w.do(getPage("/accept-invitation/inv_unknown")), 404,
			"There is no invitation at this address.")
	})
}

// TestInvitationPageSignUpClosed: with sign-up closed the signed-out page offers sign-in only.
func TestInvitationPageSignUpClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.SignUp = SignUpClosed
		app := newTestApp(t, b.Open(t), cfg)
		owner, org := app.NewOrganization(t)
		inv := store.Invitation{OrganizationID: org.ID, Email: "grace@example.com", Role: RoleViewer, InviterID: owner.ID,
			ExpiresAt: time.Now().Add(time.Hour)}
		ctx := context.Background()
		if err := app.store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &inv) }); err != nil {
			t.Fatal(err)
		}
		body := wantHostedPage(t, "closed", app.do(getPage("/accept-invitation/"+inv.ID)), 200, `action="/api/auth/sign-in/email"`)
		if hrefOf(body, "sign-up") != "" {
			t.Errorf("sign-up link while sign-up is closed:\n%s", body)
		}
	})
}

// TestInvitationPageInviteOnlySignUp: under invite-only the invitation's page is the way to
// sign up: its sign-up link, filled with the invited address, creates the account and comes
// back to the page signed in, where the invitation is accepted; an address without an
// invitation is sent back to the sign-up page with the reason.
func TestInvitationPageInviteOnlySignUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		cfg := testConfig()
		cfg.SignUp = SignUpInviteOnly
		app := newTestApp(t, b.Open(t), cfg)
		owner, org := app.NewOrganization(t)
		inv := store.Invitation{OrganizationID: org.ID, Email: "grace@example.com", Role: RoleDeveloper, InviterID: owner.ID,
			ExpiresAt: time.Now().Add(time.Hour)}
		ctx := context.Background()
		if err := app.store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateInvitation(ctx, &inv) }); err != nil {
			t.Fatal(err)
		}
		page := "/accept-invitation/" + inv.ID
		signUp := hrefOf(wantHostedPage(t, "signed out", app.do(getPage(page)), 200), "sign-up")
		form := wantHostedPage(t, "sign-up", app.do(getPage(signUp)), 200,
			"Sign-up is by invitation: use the email address your invitation was sent to.", `value="grace@example.com"`)
		res := app.do(browserForm("/api/auth/sign-up/email", url.Values{"name": {"Grace"}, "email": {"grace@example.com"},
			"password": {"grace-password-1"}, "callbackURL": {hiddenOf(form, "callbackURL")}}))
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != page {
			t.Fatalf("sign-up: %d to %q, want 303 to %q", res.Code, res.Header().Get("Location"), page)
		}
		cookie := res.sessionCookie(t, app.srv.sessionCookieName)
		wantHostedPage(t, "back, signed in", app.do(withCookie(cookie.Name+"="+cookie.Value, getPage(page))), 200,
			"You have been invited to join "+org.Name+" as developer.")
		res = app.do(withCookie(cookie.Name+"="+cookie.Value, browserForm(page, url.Values{"decision": {"accept"}})))
		wantHostedPage(t, "accepted", res, 200, "You are now a member of "+org.Name+" as developer.")

		res = app.do(browserForm("/api/auth/sign-up/email", url.Values{"name": {"Mallory"}, "email": {"mallory@example.com"},
			"password": {"mallory-password-1"}, "callbackURL": {page}}))
		back := "/api/auth/sign-up?callbackURL=" + url.QueryEscape(page) + "&email=mallory%40example.com&error=EMAIL_PASSWORD_SIGN_UP_DISABLED&name=Mallory"
		if res.Code != http.StatusSeeOther || res.Header().Get("Location") != back {
			t.Fatalf("uninvited sign-up: %d to %q, want 303 to %q", res.Code, res.Header().Get("Location"), back)
		}
		wantHostedPage(t, "uninvited", app.do(getPage(back)), 200,
			`<p class="error" role="alert">This email address cannot sign up here. Sign-up needs an invitation sent to the address.</p>`)
		if _, _, err := app.store.UserByEmail(ctx, "mallory@example.com"); err == nil {
			t.Error("the uninvited address has an account")
		}
	})
}
