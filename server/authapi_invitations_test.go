package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestAuthOrgInvitations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		grace := w.newUser(t, "Grace", "Grace@Example.com")
		eve := w.newUser(t, "Eve", "eve@example.com")
		admin := w.newUser(t, "Al", "al@example.com")
		viewer := w.newUser(t, "Vic", "vic@example.com")
		org := w.createOrg(t, ada, "acme")
		w.addMember(t, org.ID, admin, RoleAdmin)
		w.addMember(t, org.ID, viewer, RoleViewer)
		w.setActive(t, org.ID, admin, viewer)
		ctx := context.Background()

		// Invite: pending, 48 hours, the mailer gets the accept link.
		before := time.Now()
		res := w.post(ada, "invite-member", `{"email":"GRACE@example.com","role":"developer"}`)
		var inv baInvitation
		res.decode(t, http.StatusOK, &inv)
		if inv.Email != "grace@example.com" || inv.Role != RoleDeveloper || inv.Status != "pending" ||
			inv.InviterID != ada.ID || inv.OrganizationID != org.ID {
			t.Fatalf("invitation = %+v", inv)
		}
		if ttl := inv.ExpiresAt.Sub(before); ttl < 48*time.Hour-time.Minute || ttl > 48*time.Hour+time.Minute {
			t.Errorf("expiresAt is %v after the request, want 48h", ttl)
		}
		w.wantAudit(t, res, org.ID, "member.invite", ada.ID)
		// The invitation mail, delivered over SMTP: the accept link, who invited, to what.
		sent := w.mail.WaitFor(t, "grace@example.com", 20*time.Second)
		if link := sent.Link(t, testBaseURL); link != testBaseURL+"/accept-invitation/"+inv.ID {
			t.Errorf("accept link %q", link)
		}
		if sent.Subject != "Ada invited you to Org acme on Gatehouse" ||
			!strings.Contains(sent.Text, "Ada (ada@example.com) invited you to the organization Org acme on Gatehouse, as developer.") ||
			!strings.Contains(sent.HTML, `href="`+testBaseURL+"/accept-invitation/"+inv.ID+`"`) {
			t.Errorf("invitation mail: subject %q\n%s\n%s", sent.Subject, sent.Text, sent.HTML)
		}

		// resend refreshes the same invitation and mails it again.
		var resent baInvitation
		res = w.post(ada, "invite-member", `{"email":"grace@example.com","role":"developer","resend":true}`)
		res.decode(t, http.StatusOK, &resent)
		w.mail.Wait(t, 2, 20*time.Second)
		if resent.ID != inv.ID || resent.ExpiresAt.Before(inv.ExpiresAt) || len(w.mail.To("grace@example.com")) != 2 {
			t.Fatalf("resent = %+v (first %+v), %d mails", resent, inv, len(w.mail.To("grace@example.com")))
		}
		w.wantAudit(t, res, org.ID, "member.invite", ada.ID)

		// An expired invitation, written straight to the store.
		expired := store.Invitation{OrganizationID: org.ID, Email: "eve@example.com", Role: RoleViewer, InviterID: ada.ID,
			ExpiresAt: time.Now().Add(-time.Hour)}
		other := store.Invitation{OrganizationID: org.ID, Email: "other@example.com", Role: RoleViewer, InviterID: ada.ID,
			ExpiresAt: time.Now().Add(time.Hour)}
		if err := w.store.InTx(ctx, func(tx *store.Tx) error {
			if err := tx.CreateInvitation(ctx, &expired); err != nil {
				return err
			}
			return tx.CreateInvitation(ctx, &other)
		}); err != nil {
			t.Fatal(err)
		}

		w.run(t, []orgCase{
			{name: "already invited", as: ada, route: "invite-member", body: `{"email":"grace@example.com","role":"viewer"}`, status: 409, code: "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION"},
			{name: "already a member", as: ada, route: "invite-member", body: `{"email":"VIC@example.com","role":"viewer"}`, status: 400, code: "USER_IS_ALREADY_A_MEMBER_OF_THIS_ORGANIZATION"},
			{name: "unknown role", as: ada, route: "invite-member", body: `{"email":"x@example.com","role":"wizard"}`, status: 400, code: "ROLE_NOT_FOUND"},
			{name: "unknown role in a list", as: ada, route: "invite-member", body: `{"email":"x@example.com","role":["viewer","wizard"]}`, status: 400, code: "ROLE_NOT_FOUND"},
			{name: "viewer cannot invite", as: viewer, route: "invite-member", body: `{"email":"x@example.com","role":"viewer"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_INVITE_USERS_TO_THIS_ORGANIZATION"},
			{name: "admin cannot invite an owner", as: admin, route: "invite-member", body: `{"email":"x@example.com","role":"owner","organizationId":"` + org.ID + `"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_INVITE_USER_WITH_THIS_ROLE"},
			{name: "non-member cannot invite", as: eve, route: "invite-member", body: `{"email":"x@example.com","role":"viewer","organizationId":"` + org.ID + `"}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "wrong user cannot accept", as: eve, route: "accept-invitation", body: `{"invitationId":"` + inv.ID + `"}`, status: 403, code: "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION"},
			{name: "wrong user cannot reject", as: eve, route: "reject-invitation", body: `{"invitationId":"` + inv.ID + `"}`, status: 403, code: "YOU_ARE_NOT_THE_RECIPIENT_OF_THE_INVITATION"},
			{name: "expired invitation", as: eve, route: "accept-invitation", body: `{"invitationId":"` + expired.ID + `"}`, status: 400, code: "INVITATION_NOT_FOUND"},
			{name: "unknown invitation", as: grace, route: "accept-invitation", body: `{"invitationId":"inv_missing"}`, status: 400, code: "INVITATION_NOT_FOUND"},
			{name: "viewer cannot cancel", as: viewer, route: "cancel-invitation", body: `{"invitationId":"` + other.ID + `"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_CANCEL_THIS_INVITATION"},
			{name: "non-member cannot cancel", as: eve, route: "cancel-invitation", body: `{"invitationId":"` + other.ID + `"}`, status: 400, code: "INVITATION_NOT_FOUND"},
			{name: "non-member cannot list", as: eve, method: "GET", route: "list-invitations", query: url.Values{"organizationId": {org.ID}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
		})

		// A member lists every invitation, newest first.
		var listed []baInvitation
		w.get(viewer, "list-invitations", url.Values{"organizationId": {org.ID}}).decode(t, http.StatusOK, &listed)
		if len(listed) != 3 || listed[0].ID != other.ID || listed[2].ID != inv.ID {
			t.Fatalf("list-invitations = %+v", listed)
		}

		// Accept by the recipient (email matched case-insensitively): member, active organization.
		res = w.post(grace, "accept-invitation", `{"invitationId":"`+inv.ID+`"}`)
		var accepted struct {
			Invitation baInvitation `json:"invitation"`
			Member     baMember     `json:"member"`
		}
		res.decode(t, http.StatusOK, &accepted)
		if accepted.Invitation.Status != "accepted" || accepted.Member.UserID != grace.ID || accepted.Member.Role != RoleDeveloper ||
			accepted.Member.OrganizationID != org.ID {
			t.Fatalf("accepted = %+v", accepted)
		}
		w.wantAudit(t, res, org.ID, "invitation.accept", grace.ID)
		if got := w.activeOrg(t, grace); got != org.ID {
			t.Fatalf("grace's active organization = %q", got)
		}
		wantCode(t, w.post(grace, "accept-invitation", `{"invitationId":"`+inv.ID+`"}`), 400, "INVITATION_NOT_FOUND")

		// Pending invitations show in the full organization; accepted ones do not.
		var full baFullOrg
		w.get(grace, "get-full-organization", nil).decode(t, http.StatusOK, &full)
		if len(full.Members) != 4 || len(full.Invitations) != 1 || full.Invitations[0].ID != other.ID {
			t.Fatalf("full organization = %d members, invitations %+v", len(full.Members), full.Invitations)
		}

		// Several roles at once, stored comma-joined; the recipient rejects.
		var multi baInvitation
		res = w.post(admin, "invite-member", `{"email":"eve@example.com","role":["developer","billing"],"organizationId":"`+org.ID+`"}`)
		res.decode(t, http.StatusOK, &multi)
		if multi.Role != "developer,billing" {
			t.Fatalf("multi-role invitation = %+v", multi)
		}
		res = w.post(eve, "reject-invitation", `{"invitationId":"`+multi.ID+`"}`)
		var rejected map[string]json.RawMessage
		res.decode(t, http.StatusOK, &rejected)
		if string(rejected["member"]) != "null" || !strings.Contains(string(rejected["invitation"]), `"status":"rejected"`) {
			t.Fatalf("rejected = %s", res.Body)
		}
		w.wantAudit(t, res, org.ID, "invitation.reject", eve.ID)

		// Cancel needs member:manage.
		var canceled baInvitation
		res = w.post(admin, "cancel-invitation", `{"invitationId":"`+other.ID+`"}`)
		res.decode(t, http.StatusOK, &canceled)
		if canceled.Status != "canceled" {
			t.Fatalf("canceled = %+v", canceled)
		}
		w.wantAudit(t, res, org.ID, "invitation.cancel", admin.ID)
		wantCode(t, w.post(admin, "cancel-invitation", `{"invitationId":"`+other.ID+`"}`), 400, "INVITATION_NOT_FOUND")
	})
}

// Without GATEHOUSE_SMTP_URL (development mode) the worker logs each message with its link, so
// a developer can pass it on.
func TestAuthOrgInvitationLogMailer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestAppWith(t, b.Open(t), testConfig(), testDeps{logMail: true})
		w := orgWorld{testApp: app}
		ada := w.newUser(t, "Ada", "ada@example.com")
		w.createOrg(t, ada, "acme")
		var inv baInvitation
		w.post(ada, "invite-member", `{"email":"grace@example.com","role":"viewer"}`).decode(t, http.StatusOK, &inv)
		want := `msg="mail (not sent: GATEHOUSE_SMTP_URL is not set)" to=grace@example.com template=invitation ` +
			`subject="Ada invited you to Org acme on Gatehouse" link=` + testBaseURL + "/accept-invitation/" + inv.ID
		waitForLog(t, app, want)
	})
}

// waitForLog waits until the development-mode mail worker's log holds want.
func waitForLog(t *testing.T, app *testApp, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(app.mailLog.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("logs lack %q:\n%s", want, app.mailLog.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
