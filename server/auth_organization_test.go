package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Wire shapes of the better-auth organization routes, as a client decodes them.
type (
	baOrg struct {
		ID        string         `json:"id"`
		Name      string         `json:"name"`
		Slug      string         `json:"slug"`
		Logo      *string        `json:"logo"`
		Metadata  map[string]any `json:"metadata"`
		CreatedAt time.Time      `json:"createdAt"`
	}
	baMember struct {
		ID             string `json:"id"`
		OrganizationID string `json:"organizationId"`
		UserID         string `json:"userId"`
		Role           string `json:"role"`
		User           *struct {
			ID, Name, Email string
			Image           *string
		} `json:"user"`
	}
	baInvitation struct {
		ID             string    `json:"id"`
		OrganizationID string    `json:"organizationId"`
		Email          string    `json:"email"`
		Role           string    `json:"role"`
		Status         string    `json:"status"`
		InviterID      string    `json:"inviterId"`
		ExpiresAt      time.Time `json:"expiresAt"`
	}
	baFullOrg struct {
		baOrg
		Members     []baMember     `json:"members"`
		Invitations []baInvitation `json:"invitations"`
	}
	baRole struct {
		ID             string              `json:"id"`
		OrganizationID string              `json:"organizationId"`
		Role           string              `json:"role"`
		Permission     map[string][]string `json:"permission"`
	}
	// baProblem is a problem with better-auth's code and message.
	baProblem struct {
		Status    int    `json:"status"`
		Type      string `json:"type"`
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"requestId"`
	}
)

// captureMailer records the invitations it is asked to send.
type captureMailer struct {
	mu   sync.Mutex
	sent []capturedInvitation
}

type capturedInvitation struct {
	inv       Invitation
	acceptURL string
}

func (m *captureMailer) SendInvitation(_ context.Context, inv Invitation, acceptURL string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, capturedInvitation{inv, acceptURL})
	return nil
}

func (m *captureMailer) all() []capturedInvitation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]capturedInvitation(nil), m.sent...)
}

// orgWorld is an app with a capturing mailer and helpers to call the organization routes.
type orgWorld struct {
	*testApp
	mail *captureMailer
}

func newOrgWorld(t *testing.T, b storetest.Backend) orgWorld {
	mail := &captureMailer{}
	cfg := testConfig()
	cfg.Mailer = mail
	return orgWorld{testApp: newTestApp(t, b.Open(t), cfg), mail: mail}
}

// post calls POST /api/auth/organization/<route> as u.
func (w orgWorld) post(u testUser, route, body string) response {
	w.t.Helper()
	return w.do(u.as(request{method: http.MethodPost, path: "/api/auth/organization/" + route, body: body}))
}

// get calls GET /api/auth/organization/<route>?<query> as u.
func (w orgWorld) get(u testUser, route string, query url.Values) response {
	w.t.Helper()
	path := "/api/auth/organization/" + route
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return w.do(u.as(request{method: http.MethodGet, path: path}))
}

// createOrg creates an organization as owner and returns it.
func (w orgWorld) createOrg(t *testing.T, owner testUser, slug string) baOrg {
	t.Helper()
	var org baOrg
	w.post(owner, "create", fmt.Sprintf(`{"name":"Org %s","slug":%q}`, slug, slug)).decode(t, http.StatusOK, &org)
	return org
}

// addMember makes u a member of orgID with role directly in the store.
func (w orgWorld) addMember(t *testing.T, orgID string, u testUser, role string) store.Member {
	t.Helper()
	var m store.Member
	err := w.store.InTx(context.Background(), func(tx *store.Tx) error {
		var err error
		m, err = tx.AddMember(context.Background(), orgID, u.ID, role)
		return err
	})
	if err != nil {
		t.Fatalf("add member: %v", err)
	}
	return m
}

// setActive makes orgID the active organization of u's session, directly in the store.
func (w orgWorld) setActive(t *testing.T, orgID string, users ...testUser) {
	t.Helper()
	ctx := context.Background()
	err := w.store.InTx(ctx, func(tx *store.Tx) error {
		for _, u := range users {
			if err := tx.SetActiveOrganization(ctx, u.Session.ID, &orgID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// activeOrg returns the active organization of u's session, "" when none.
func (w orgWorld) activeOrg(t *testing.T, u testUser) string {
	t.Helper()
	sess, _, err := w.store.SessionByTokenHash(context.Background(), oauth.HashToken(u.Token))
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	if sess.ActiveOrganizationID == nil {
		return ""
	}
	return *sess.ActiveOrganizationID
}

// wantAudit checks that the request answered by res wrote exactly one audit row, with action,
// the actor, organization orgID and the response's x-request-id.
func (w orgWorld) wantAudit(t *testing.T, res response, orgID, action, actorID string) store.AuditEntry {
	t.Helper()
	reqID := res.Header().Get("X-Request-Id")
	entries, err := w.store.ListAudit(context.Background(), store.AuditFilter{OrganizationID: orgID})
	if err != nil {
		t.Fatal(err)
	}
	var found []store.AuditEntry
	for _, e := range entries {
		if e.RequestID == reqID {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d audit rows with request id %q, want 1", action, len(found), reqID)
	}
	e := found[0]
	if e.Action != action || e.ActorType != store.ActorUser || e.ActorID != actorID || e.OrganizationID != orgID {
		t.Errorf("audit row = %+v, want action %s by user %s in %s", e, action, actorID, orgID)
	}
	return e
}

// wantCode asserts an /api/auth problem: status, content type, better-auth code and message,
// and requestId equal to the x-request-id header.
func wantCode(t *testing.T, res response, status int, code string) {
	t.Helper()
	if res.Code != status {
		t.Fatalf("status = %d, want %d (%s); body %s", res.Code, status, code, res.Body)
	}
	if ct := res.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content-type = %q", ct)
	}
	var p baProblem
	if err := json.Unmarshal(res.Body.Bytes(), &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, res.Body)
	}
	if p.Code != code || p.Message == "" || p.Status != status {
		t.Errorf("problem = %+v, want status %d code %s with a message", p, status, code)
	}
	if p.RequestID == "" || p.RequestID != res.Header().Get("X-Request-Id") {
		t.Errorf("requestId = %q, header %q", p.RequestID, res.Header().Get("X-Request-Id"))
	}
}

// orgCase is one request of a scenario table and the answer it must get.
type orgCase struct {
	name   string
	as     testUser
	method string // GET or POST
	route  string
	query  url.Values
	body   string
	status int
	code   string // the better-auth error code; empty for a success
}

func (w orgWorld) run(t *testing.T, cases []orgCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var res response
			if c.method == http.MethodGet {
				res = w.get(c.as, c.route, c.query)
			} else {
				res = w.post(c.as, c.route, c.body)
			}
			if c.code != "" {
				wantCode(t, res, c.status, c.code)
			} else if res.Code != c.status {
				t.Fatalf("status = %d, want %d; body %s", res.Code, c.status, res.Body)
			}
		})
	}
}

func TestAuthOrganizationLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		eve := w.newUser(t, "Eve", "eve@example.com")

		// Nothing active yet: get-full-organization answers null, set-active with nothing null.
		for _, res := range []response{
			w.get(ada, "get-full-organization", nil),
			w.post(ada, "set-active", `{}`),
		} {
			if res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != "null" {
				t.Fatalf("without an active organization: %d %s, want 200 null", res.Code, res.Body)
			}
		}

		// Create: owner membership in the answer, and it becomes the session's active one.
		res := w.post(ada, "create", `{"name":"Acme","slug":"acme","logo":"https://acme.test/logo.png","metadata":{"tier":"gold"}}`)
		var created struct {
			baOrg
			Members []baMember `json:"members"`
		}
		res.decode(t, http.StatusOK, &created)
		if created.Name != "Acme" || created.Slug != "acme" || created.Logo == nil || created.Metadata["tier"] != "gold" ||
			len(created.Members) != 1 || created.Members[0].UserID != ada.ID || created.Members[0].Role != RoleOwner ||
			created.Members[0].OrganizationID != created.ID {
			t.Fatalf("created = %+v", created)
		}
		w.wantAudit(t, res, created.ID, "organization.create", ada.ID)
		if got := w.activeOrg(t, ada); got != created.ID {
			t.Fatalf("active organization = %q, want %q", got, created.ID)
		}
		var full baFullOrg
		w.get(ada, "get-full-organization", nil).decode(t, http.StatusOK, &full)
		if full.ID != created.ID || len(full.Members) != 1 || full.Members[0].User == nil ||
			full.Members[0].User.Email != "ada@example.com" || full.Members[0].User.Name != "Ada" || full.Invitations == nil {
			t.Fatalf("get-full-organization = %+v", full)
		}

		// keepCurrentActiveOrganization leaves the active one alone.
		var second baOrg
		w.post(ada, "create", `{"name":"Beta","slug":"beta","keepCurrentActiveOrganization":true}`).decode(t, http.StatusOK, &second)
		if got := w.activeOrg(t, ada); got != created.ID {
			t.Fatalf("active organization after keepCurrent = %q, want %q", got, created.ID)
		}

		// list: active organizations only, with nulls for absent logo and metadata.
		if _, err := w.srv.setOrganizationArchived(ctxAs(ada), second.ID, true); err != nil {
			t.Fatal(err)
		}
		var listed []baOrg
		w.get(ada, "list", nil).decode(t, http.StatusOK, &listed)
		if len(listed) != 1 || listed[0].ID != created.ID {
			t.Fatalf("list = %+v, want only acme", listed)
		}
		var raw []map[string]any
		w.post(eve, "create", `{"name":"Eve Co","slug":"eve-co"}`).decode(t, http.StatusOK, new(baOrg))
		w.get(eve, "list", nil).decode(t, http.StatusOK, &raw)
		if v, ok := raw[0]["logo"]; !ok || v != nil {
			t.Errorf("logo of an organization without one = %v (present %v), want null", v, ok)
		}

		// set-active: null clears, an id sets and answers the full organization.
		if res := w.post(ada, "set-active", `{"organizationId":null}`); res.Code != http.StatusOK || strings.TrimSpace(res.Body.String()) != "null" {
			t.Fatalf("set-active null = %d %s", res.Code, res.Body)
		}
		if got := w.activeOrg(t, ada); got != "" {
			t.Fatalf("active after clearing = %q", got)
		}
		w.post(ada, "set-active", `{"organizationSlug":"acme"}`).decode(t, http.StatusOK, &full)
		if full.ID != created.ID || len(full.Members) != 1 || w.activeOrg(t, ada) != created.ID {
			t.Fatalf("set-active by slug = %+v, active %q", full, w.activeOrg(t, ada))
		}

		// update: organization:update; metadata null removes it.
		var updated baOrg
		res = w.post(ada, "update", `{"data":{"name":"Acme Corp","metadata":null}}`)
		res.decode(t, http.StatusOK, &updated)
		if updated.Name != "Acme Corp" || updated.Slug != "acme" || updated.Metadata != nil {
			t.Fatalf("updated = %+v", updated)
		}
		w.wantAudit(t, res, created.ID, "organization.update", ada.ID)

		viewer := w.newUser(t, "Vic", "vic@example.com")
		w.addMember(t, created.ID, viewer, RoleViewer)
		w.setActive(t, created.ID, viewer)

		id := url.Values{"organizationId": {created.ID}}
		w.run(t, []orgCase{
			{name: "slug taken", as: eve, route: "create", body: `{"name":"X","slug":"acme"}`, status: 409, code: "ORGANIZATION_SLUG_ALREADY_TAKEN"},
			{name: "archived slug taken", as: eve, route: "create", body: `{"name":"X","slug":"beta"}`, status: 409, code: "ORGANIZATION_SLUG_ALREADY_TAKEN"},
			{name: "check-slug taken", as: eve, route: "check-slug", body: `{"slug":"acme"}`, status: 409, code: "ORGANIZATION_SLUG_ALREADY_TAKEN"},
			{name: "check-slug free", as: eve, route: "check-slug", body: `{"slug":"free-slug"}`, status: 200},
			{name: "bad slug", as: eve, route: "create", body: `{"name":"X","slug":"Not A Slug"}`, status: 400, code: "VALIDATION_ERROR"},
			{name: "non-member full", as: eve, method: "GET", route: "get-full-organization", query: id, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "non-member by slug", as: eve, method: "GET", route: "get-full-organization", query: url.Values{"organizationSlug": {"acme"}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "unknown organization", as: ada, method: "GET", route: "get-full-organization", query: url.Values{"organizationId": {"org_missing"}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "archived organization", as: ada, method: "GET", route: "get-full-organization", query: url.Values{"organizationId": {second.ID}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "non-member update", as: eve, route: "update", body: `{"organizationId":"` + created.ID + `","data":{"name":"Mine"}}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "non-member set-active", as: eve, route: "set-active", body: `{"organizationId":"` + created.ID + `"}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "viewer update", as: viewer, route: "update", body: `{"data":{"name":"Mine"}}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_ORGANIZATION"},
			{name: "no active organization", as: w.newUser(t, "New", "new@example.com"), route: "update", body: `{"data":{"name":"Mine"}}`, status: 400, code: "NO_ACTIVE_ORGANIZATION"},
			{name: "update slug taken", as: ada, route: "update", body: `{"data":{"slug":"eve-co"}}`, status: 409, code: "ORGANIZATION_SLUG_ALREADY_TAKEN"},
		})
	})
}

// ctxAs is a context whose principal is u, for calling the organization core directly.
func ctxAs(u testUser) context.Context {
	return context.WithValue(context.Background(), principalKey{}, &Principal{Kind: PrincipalUser, User: u.User, Session: u.Session})
}

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
		sent := w.mail.all()
		if len(sent) != 1 || sent[0].inv.ID != inv.ID || sent[0].inv.Email != "grace@example.com" ||
			sent[0].inv.OrganizationName != "Org acme" || sent[0].inv.InviterEmail != "ada@example.com" ||
			sent[0].acceptURL != testBaseURL+"/accept-invitation/"+inv.ID {
			t.Fatalf("mailed %+v", sent)
		}

		// resend refreshes the same invitation and mails it again.
		var resent baInvitation
		res = w.post(ada, "invite-member", `{"email":"grace@example.com","role":"developer","resend":true}`)
		res.decode(t, http.StatusOK, &resent)
		if resent.ID != inv.ID || resent.ExpiresAt.Before(inv.ExpiresAt) || len(w.mail.all()) != 2 {
			t.Fatalf("resent = %+v (first %+v), %d mails", resent, inv, len(w.mail.all()))
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

func TestAuthOrgMembers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		org := w.createOrg(t, ada, "acme")
		users := map[string]testUser{}
		members := map[string]store.Member{}
		for _, c := range []struct{ name, role string }{
			{"Bob", RoleAdmin}, {"Cy", RoleDeveloper}, {"Di", RoleViewer}, {"Ed", RoleViewer},
		} {
			u := w.newUser(t, c.name, strings.ToLower(c.name)+"@example.com")
			users[c.name] = u
			members[c.name] = w.addMember(t, org.ID, u, c.role)
		}
		outsider := w.newUser(t, "Eve", "eve@example.com")
		id := org.ID

		// Paging, sorting and filtering map onto the store; total counts all matches.
		type page struct {
			Members []baMember `json:"members"`
			Total   int        `json:"total"`
		}
		for _, c := range []struct {
			name   string
			query  url.Values
			emails []string
			total  int
		}{
			{"first page", url.Values{"limit": {"2"}}, []string{"ada@example.com", "bob@example.com"}, 5},
			{"last page", url.Values{"limit": {"2"}, "offset": {"4"}}, []string{"ed@example.com"}, 5},
			{"by email desc", url.Values{"sortBy": {"email"}, "sortDirection": {"desc"}, "limit": {"2"}}, []string{"ed@example.com", "di@example.com"}, 5},
			{"viewers", url.Values{"filterField": {"role"}, "filterValue": {"viewer"}}, []string{"di@example.com", "ed@example.com"}, 2},
			{"name contains", url.Values{"filterField": {"name"}, "filterOperator": {"contains"}, "filterValue": {"D"}}, []string{"ada@example.com", "di@example.com", "ed@example.com"}, 3},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.query.Set("organizationId", id)
				var p page
				w.get(users["Di"], "list-members", c.query).decode(t, http.StatusOK, &p)
				var got []string
				for _, m := range p.Members {
					got = append(got, m.User.Email)
				}
				if strings.Join(got, " ") != strings.Join(c.emails, " ") || p.Total != c.total {
					t.Errorf("members %v total %d, want %v total %d", got, p.Total, c.emails, c.total)
				}
			})
		}

		body := func(memberID, role string) string {
			return fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":%s}`, id, memberID, role)
		}
		adaMember, err := w.store.Member(context.Background(), id, ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		w.run(t, []orgCase{
			{name: "outsider lists", as: outsider, method: "GET", route: "list-members", query: url.Values{"organizationId": {id}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "viewer updates a role", as: users["Di"], route: "update-member-role", body: body(members["Ed"].ID, `"admin"`), status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"},
			{name: "admin grants owner", as: users["Bob"], route: "update-member-role", body: body(members["Cy"].ID, `"owner"`), status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"},
			{name: "admin demotes the owner", as: users["Bob"], route: "update-member-role", body: body(adaMember.ID, `"viewer"`), status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_THIS_MEMBER"},
			{name: "unknown role", as: ada, route: "update-member-role", body: body(members["Cy"].ID, `"wizard"`), status: 400, code: "ROLE_NOT_FOUND"},
			{name: "unknown member", as: ada, route: "update-member-role", body: body("mem_missing", `"viewer"`), status: 404, code: "MEMBER_NOT_FOUND"},
			{name: "last owner demoted", as: ada, route: "update-member-role", body: body(adaMember.ID, `"admin"`), status: 400, code: "YOU_CANNOT_LEAVE_THE_ORGANIZATION_WITHOUT_AN_OWNER"},
			{name: "last owner removed", as: ada, route: "remove-member", body: `{"memberIdOrEmail":"ada@example.com","organizationId":"` + id + `"}`, status: 400, code: "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER"},
			{name: "last owner leaves", as: ada, route: "leave", body: `{"organizationId":"` + id + `"}`, status: 400, code: "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER"},
			{name: "developer removes", as: users["Cy"], route: "remove-member", body: `{"memberIdOrEmail":"ed@example.com","organizationId":"` + id + `"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER"},
			{name: "admin removes the owner", as: users["Bob"], route: "remove-member", body: `{"memberIdOrEmail":"ada@example.com","organizationId":"` + id + `"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_DELETE_THIS_MEMBER"},
			{name: "unknown member removed", as: ada, route: "remove-member", body: `{"memberIdOrEmail":"nobody@example.com","organizationId":"` + id + `"}`, status: 404, code: "MEMBER_NOT_FOUND"},
			{name: "outsider leaves", as: outsider, route: "leave", body: `{"organizationId":"` + id + `"}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
		})

		// update-member-role: one role or several.
		var m baMember
		res := w.post(users["Bob"], "update-member-role", body(members["Cy"].ID, `["developer","billing"]`))
		res.decode(t, http.StatusOK, &m)
		if m.ID != members["Cy"].ID || m.Role != "developer,billing" {
			t.Fatalf("updated member = %+v", m)
		}
		e := w.wantAudit(t, res, id, "member.update_role", users["Bob"].ID)
		if e.TargetID != members["Cy"].ID || e.Metadata["from"] != RoleDeveloper || e.Metadata["to"] != "developer,billing" {
			t.Errorf("audit = %+v", e)
		}

		// With a second owner the first may step down, and then leave.
		res = w.post(ada, "update-member-role", body(members["Bob"].ID, `"owner"`))
		res.decode(t, http.StatusOK, &m)
		w.wantAudit(t, res, id, "member.update_role", ada.ID)
		res = w.post(ada, "update-member-role", body(adaMember.ID, `"admin"`))
		res.decode(t, http.StatusOK, &m)
		if m.Role != RoleAdmin {
			t.Fatalf("ada after stepping down = %+v", m)
		}
		wantCode(t, w.post(users["Bob"], "leave", `{"organizationId":"`+id+`"}`), 400, "YOU_CANNOT_LEAVE_THE_ORGANIZATION_AS_THE_ONLY_OWNER")

		if w.activeOrg(t, ada) != id {
			t.Fatal("ada's active organization should be acme before leaving")
		}
		res = w.post(ada, "leave", `{"organizationId":"`+id+`"}`)
		res.decode(t, http.StatusOK, &m)
		if m.ID != adaMember.ID || m.UserID != ada.ID {
			t.Fatalf("left = %+v", m)
		}
		w.wantAudit(t, res, id, "member.leave", ada.ID)
		if got := w.activeOrg(t, ada); got != "" {
			t.Errorf("active organization after leaving = %q, want none", got)
		}

		// remove-member by id or email.
		var removed struct {
			Member baMember `json:"member"`
		}
		res = w.post(users["Bob"], "remove-member", `{"memberIdOrEmail":"ED@example.com","organizationId":"`+id+`"}`)
		res.decode(t, http.StatusOK, &removed)
		if removed.Member.ID != members["Ed"].ID {
			t.Fatalf("removed = %+v", removed)
		}
		w.wantAudit(t, res, id, "member.remove", users["Bob"].ID)
		res = w.post(users["Bob"], "remove-member", `{"memberIdOrEmail":"`+members["Di"].ID+`","organizationId":"`+id+`"}`)
		res.decode(t, http.StatusOK, &removed)
		if removed.Member.UserID != users["Di"].ID {
			t.Fatalf("removed by id = %+v", removed)
		}
		var p page
		w.get(users["Bob"], "list-members", url.Values{"organizationId": {id}}).decode(t, http.StatusOK, &p)
		if p.Total != 2 {
			t.Errorf("members left = %d, want 2 (Bob, Cy)", p.Total)
		}
	})
}

func TestAuthOrgHasPermissionAndRoles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		admin := w.newUser(t, "Al", "al@example.com")
		dev := w.newUser(t, "Dev", "dev@example.com")
		viewer := w.newUser(t, "Vic", "vic@example.com")
		support := w.newUser(t, "Sue", "sue@example.com")
		outsider := w.newUser(t, "Eve", "eve@example.com")
		org := w.createOrg(t, ada, "acme")
		id := org.ID
		w.addMember(t, id, admin, RoleAdmin)
		w.addMember(t, id, dev, RoleDeveloper)
		w.addMember(t, id, viewer, RoleViewer)
		w.setActive(t, id, admin, dev, viewer, support)

		// Dynamic role: support may read and update tickets.
		var createdRole struct {
			Success    bool                `json:"success"`
			RoleData   baRole              `json:"roleData"`
			Statements map[string][]string `json:"statements"`
		}
		res := w.post(admin, "create-role", `{"organizationId":"`+id+`","role":"support","permission":{"ticket":["read","update"]}}`)
		res.decode(t, http.StatusOK, &createdRole)
		if !createdRole.Success || createdRole.RoleData.Role != "support" || createdRole.RoleData.OrganizationID != id ||
			strings.Join(createdRole.Statements["ticket"], ",") != "read,update" {
			t.Fatalf("create-role = %+v", createdRole)
		}
		w.wantAudit(t, res, id, "org_role.create", admin.ID)
		supportMember := w.addMember(t, id, support, "support")

		check := func(u testUser, permissions string) bool {
			t.Helper()
			var out struct {
				Error   *string `json:"error"`
				Success bool    `json:"success"`
			}
			res := w.post(u, "has-permission", `{"organizationId":"`+id+`",`+permissions+`}`)
			res.decode(t, http.StatusOK, &out)
			if out.Error != nil || !strings.Contains(res.Body.String(), `"error":null`) {
				t.Errorf("has-permission error = %v", out.Error)
			}
			return out.Success
		}
		for _, c := range []struct {
			name  string
			as    testUser
			perms string
			want  bool
		}{
			{"owner deletes the organization", ada, `"permissions":{"organization":["delete"]}`, true},
			{"admin cannot delete it", admin, `"permissions":{"organization":["delete"]}`, false},
			{"admin manages members", admin, `"permissions":{"member":["create","update","delete"],"invitation":["create","cancel"]}`, true},
			{"developer creates projects", dev, `"permissions":{"project":["create","read"]}`, true},
			{"developer cannot invite", dev, `"permissions":{"invitation":["create"]}`, false},
			{"viewer reads", viewer, `"permissions":{"project":["read"],"config":["read"]}`, true},
			{"viewer cannot reveal", viewer, `"permissions":{"config":["reveal"]}`, false},
			{"viewer, one of two denied", viewer, `"permissions":{"project":["read","create"]}`, false},
			{"dynamic role grants its statements", support, `"permissions":{"ticket":["read","update"]}`, true},
			{"dynamic role grants nothing else", support, `"permissions":{"ticket":["delete"]}`, false},
			{"dynamic role grants no control-plane permission", support, `"permissions":{"project":["read"]}`, false},
			{"deprecated permission key", support, `"permission":{"ticket":["read"]}`, true},
			{"fixed role lacks dynamic statements", ada, `"permissions":{"ticket":["read"]}`, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := check(c.as, c.perms); got != c.want {
					t.Errorf("has-permission = %v, want %v", got, c.want)
				}
			})
		}
		// Roles combine: viewer,support gets both.
		res = w.post(ada, "update-member-role", fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":["viewer","support"]}`, id, supportMember.ID))
		res.decode(t, http.StatusOK, new(baMember))
		if !check(support, `"permissions":{"ticket":["update"],"project":["read"]}`) {
			t.Error("viewer,support should grant ticket:update and project:read")
		}

		// Dynamic roles never widen /api/v1: a member holding only a dynamic role gets 403.
		res = w.post(ada, "update-member-role", fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":"support"}`, id, supportMember.ID))
		res.decode(t, http.StatusOK, new(baMember))
		w.do(support.as(request{method: http.MethodGet, path: "/api/v1/organizations/" + id})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")

		// Roles: reserved names, duplicates, permissions, lookups.
		w.run(t, []orgCase{
			{name: "reserved name", as: ada, route: "create-role", body: `{"role":"admin","permission":{}}`, status: 400, code: "ROLE_NAME_IS_ALREADY_TAKEN"},
			{name: "duplicate name", as: ada, route: "create-role", body: `{"role":"support","permission":{}}`, status: 409, code: "ROLE_NAME_IS_ALREADY_TAKEN"},
			{name: "viewer creates", as: viewer, route: "create-role", body: `{"role":"x","permission":{}}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_CREATE_A_ROLE"},
			{name: "developer updates", as: dev, route: "update-role", body: `{"roleName":"support","data":{"permission":{}}}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_UPDATE_A_ROLE"},
			{name: "developer deletes", as: dev, route: "delete-role", body: `{"roleName":"support"}`, status: 403, code: "YOU_ARE_NOT_ALLOWED_TO_DELETE_A_ROLE"},
			{name: "outsider lists", as: outsider, method: "GET", route: "list-roles", query: url.Values{"organizationId": {id}}, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "outsider asks", as: outsider, route: "has-permission", body: `{"organizationId":"` + id + `","permissions":{"project":["read"]}}`, status: 404, code: "ORGANIZATION_NOT_FOUND"},
			{name: "nothing asked", as: ada, route: "has-permission", body: `{"permissions":{}}`, status: 400, code: "VALIDATION_ERROR"},
			{name: "unknown role", as: viewer, method: "GET", route: "get-role", query: url.Values{"roleName": {"nope"}}, status: 404, code: "ROLE_NOT_FOUND"},
			{name: "no role named", as: viewer, method: "GET", route: "get-role", status: 400, code: "VALIDATION_ERROR"},
			{name: "delete a fixed role", as: ada, route: "delete-role", body: `{"roleName":"viewer"}`, status: 400, code: "CANNOT_DELETE_A_PRE_DEFINED_ROLE"},
			{name: "rename to a fixed role", as: ada, route: "update-role", body: `{"roleName":"support","data":{"roleName":"owner"}}`, status: 400, code: "ROLE_NAME_IS_ALREADY_TAKEN"},
			{name: "delete while held", as: ada, route: "delete-role", body: `{"roleName":"support"}`, status: 400, code: "ROLE_IS_ASSIGNED_TO_MEMBERS"},
		})
		var got baRole
		w.get(viewer, "get-role", url.Values{"roleId": {createdRole.RoleData.ID}}).decode(t, http.StatusOK, &got)
		if got.Role != "support" || strings.Join(got.Permission["ticket"], ",") != "read,update" {
			t.Fatalf("get-role = %+v", got)
		}

		// Rename: the members holding the role follow, in the same transaction.
		var updated struct {
			Success  bool   `json:"success"`
			RoleData baRole `json:"roleData"`
		}
		res = w.post(admin, "update-role", `{"roleName":"support","data":{"roleName":"helpdesk","permission":{"ticket":["read"]}}}`)
		res.decode(t, http.StatusOK, &updated)
		if !updated.Success || updated.RoleData.Role != "helpdesk" || updated.RoleData.ID != createdRole.RoleData.ID {
			t.Fatalf("update-role = %+v", updated)
		}
		if e := w.wantAudit(t, res, id, "org_role.update", admin.ID); e.Metadata["renamedFrom"] != "support" {
			t.Errorf("audit metadata = %v", e.Metadata)
		}
		if m, err := w.store.Member(context.Background(), id, support.ID); err != nil || m.Role != "helpdesk" {
			t.Fatalf("member after rename = %q, %v", m.Role, err)
		}
		if !check(support, `"permissions":{"ticket":["read"]}`) || check(support, `"permissions":{"ticket":["update"]}`) {
			t.Error("renamed role should grant exactly its new statements")
		}

		// Delete once nobody holds it.
		res = w.post(ada, "update-member-role", fmt.Sprintf(`{"organizationId":%q,"memberId":%q,"role":"viewer"}`, id, supportMember.ID))
		res.decode(t, http.StatusOK, new(baMember))
		res = w.post(ada, "delete-role", `{"roleName":"helpdesk"}`)
		res.decode(t, http.StatusOK, new(map[string]any))
		w.wantAudit(t, res, id, "org_role.delete", ada.ID)
		wantCode(t, w.get(viewer, "get-role", url.Values{"roleName": {"helpdesk"}}), 404, "ROLE_NOT_FOUND")
	})
}

func TestAuthOrgRoleLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		w := newOrgWorld(t, b)
		ada := w.newUser(t, "Ada", "ada@example.com")
		org := w.createOrg(t, ada, "acme")
		for i := range store.MaxOrgRoles {
			res := w.post(ada, "create-role", fmt.Sprintf(`{"role":"role-%02d","permission":{"ticket":["read"]}}`, i))
			if res.Code != http.StatusOK {
				t.Fatalf("role %d: %d %s", i, res.Code, res.Body)
			}
		}
		res := w.post(ada, "create-role", `{"role":"one-too-many","permission":{}}`)
		wantCode(t, res, http.StatusBadRequest, "TOO_MANY_ROLES")
		var p baProblem
		_ = json.Unmarshal(res.Body.Bytes(), &p)
		if p.Message != "An organization may define at most 25 roles" {
			t.Errorf("message = %q", p.Message)
		}
		var roles []baRole
		w.get(ada, "list-roles", nil).decode(t, http.StatusOK, &roles)
		if len(roles) != store.MaxOrgRoles || roles[0].Role != "role-00" || roles[0].OrganizationID != org.ID {
			t.Fatalf("list-roles: %d roles, first %+v", len(roles), roles[0])
		}
	})
}

// Without a configured mailer the accept link is logged, so a developer can pass it on.
func TestAuthOrgInvitationLogMailer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		w := orgWorld{testApp: app}
		ada := w.newUser(t, "Ada", "ada@example.com")
		w.createOrg(t, ada, "acme")
		var inv baInvitation
		w.post(ada, "invite-member", `{"email":"grace@example.com","role":"viewer"}`).decode(t, http.StatusOK, &inv)
		if want := "accept_url=" + testBaseURL + "/accept-invitation/" + inv.ID; !strings.Contains(app.logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, app.logs.String())
		}
	})
}
