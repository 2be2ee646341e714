package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
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

// orgWorld is an app whose mail arrives at a real SMTP server, with helpers to call the
// organization routes.
type orgWorld struct {
	*testApp
	mail *mailtest.Server
}

func newOrgWorld(t *testing.T, b storetest.Backend) orgWorld {
	smtp := mailtest.Start(t, mailtest.Options{})
	return orgWorld{testApp: newTestAppWith(t, b.Open(t), testConfig(), testDeps{smtp: smtp}), mail: smtp}
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
	sess, _, err := w.store.SessionByTokenHash(context.Background(), identity.HashToken(u.Token))
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
