package server

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestAuthOrgConcurrentInvitations: concurrent invite-member calls for one email leave exactly
// one pending invitation. Without resend one call answers 200 and every other one the 409 a
// sequential duplicate gets; with resend every call answers 200 (the losers refresh the
// winner's invitation). None answers 500.
func TestAuthOrgConcurrentInvitations(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		org := w.createOrg(t, ada, "acme")
		const n = 8

		for _, tc := range []struct {
			email  string
			resend bool
		}{{"grace@example.com", false}, {"eve@example.com", true}} {
			body := `{"email":"` + tc.email + `","role":"developer"}`
			if tc.resend {
				body = `{"email":"` + tc.email + `","role":"developer","resend":true}`
			}
			responses := make([]response, n)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range n {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					responses[i] = w.post(ada, "invite-member", body)
				}()
			}
			start.Done()
			done.Wait()

			ok := 0
			for _, res := range responses {
				switch {
				case res.Code == http.StatusOK:
					ok++
				case !tc.resend && res.Code == http.StatusConflict:
					wantCode(t, res, http.StatusConflict, "USER_IS_ALREADY_INVITED_TO_THIS_ORGANIZATION")
				default:
					t.Errorf("%s (resend %v): status %d, body %s", tc.email, tc.resend, res.Code, res.Body)
				}
			}
			if want := map[bool]int{false: 1, true: n}[tc.resend]; ok != want {
				t.Errorf("%s (resend %v): %d answers 200, want %d", tc.email, tc.resend, ok, want)
			}
			list, err := w.srv.store.ListInvitations(context.Background(), org.ID)
			if err != nil {
				t.Fatal(err)
			}
			pending := 0
			for _, inv := range list {
				if inv.Email == tc.email && inv.Status == store.InvitationPending {
					pending++
				}
			}
			if pending != 1 {
				t.Errorf("%s (resend %v): %d pending invitations, want 1", tc.email, tc.resend, pending)
			}
		}
	})
}
