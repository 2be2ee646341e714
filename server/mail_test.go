package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// outboxDrained waits until no mail is due in st's outbox (the worker has attempted everything
// queued).
func outboxDrained(t *testing.T, st *store.Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		due, err := st.OutboxDue(context.Background(), time.Now().Add(time.Hour), []string{"mail"})
		if err != nil {
			t.Fatal(err)
		}
		if !due {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the outbox still has mail due after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The mail server is down when the invitation is made: the request succeeds, and the
// invitation mail arrives once after the server comes back.
func TestMailServerDownThenBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		smtp := mailtest.Start(t, mailtest.Options{STARTTLS: true, Username: "gatehouse", Password: "mail-pass"})
		smtp.Stop()
		w := orgWorld{testApp: newTestAppWith(t, b.Open(t), testConfig(), testDeps{smtp: smtp}), mail: smtp}
		ada := w.newUser(t, "Ada", "ada@example.com")
		org := w.createOrg(t, ada, "acme")
		var inv baInvitation
		w.post(ada, "invite-member", `{"email":"grace@example.com","role":"viewer"}`).decode(t, http.StatusOK, &inv)
		if inv.OrganizationID != org.ID || inv.Status != "pending" {
			t.Fatalf("invitation = %+v", inv)
		}
		time.Sleep(100 * time.Millisecond) // several failed attempts
		if n := len(smtp.Messages()); n != 0 {
			t.Fatalf("%d messages while the server is down", n)
		}
		smtp.Restart()
		got := smtp.WaitFor(t, "grace@example.com", 20*time.Second)
		if link := got.Link(t, testBaseURL); link != testBaseURL+"/accept-invitation/"+inv.ID {
			t.Errorf("accept link %q", link)
		}
		outboxDrained(t, w.store)
		time.Sleep(50 * time.Millisecond)
		if n := len(smtp.Messages()); n != 1 {
			t.Errorf("%d messages arrived, want exactly 1", n)
		}
	})
}

// At most 5 messages go to one address per 15 minutes and 30 per client IP per hour; the
// requests over the limits answer exactly as the others.
func TestMailSendLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		w.createOrg(t, ada, "acme")
		var first baInvitation
		w.post(ada, "invite-member", `{"email":"grace@example.com","role":"viewer"}`).decode(t, http.StatusOK, &first)
		for range 5 {
			var again baInvitation
			w.post(ada, "invite-member", `{"email":"grace@example.com","role":"viewer","resend":true}`).decode(t, http.StatusOK, &again)
			if again.ID != first.ID {
				t.Fatalf("resend answered %+v", again)
			}
		}
		outboxDrained(t, w.store)
		if n := len(w.mail.To("grace@example.com")); n != 5 {
			t.Errorf("%d mails to grace@example.com after 6 invitations, want 5", n)
		}

		// 25 more addresses from the same client IP: 30 in the hour, then nothing.
		for i := range 26 {
			w.post(ada, "invite-member", fmt.Sprintf(`{"email":"user%02d@example.com","role":"viewer"}`, i)).decode(t, http.StatusOK, &baInvitation{})
		}
		outboxDrained(t, w.store)
		if n := len(w.mail.Messages()); n != 30 {
			t.Errorf("%d mails from one client IP, want 30", n)
		}
		if n := len(w.mail.To("user25@example.com")); n != 0 {
			t.Errorf("the 31st message was sent")
		}
	})
}
