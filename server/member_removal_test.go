package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestRemovedMemberLosesActiveOrganization: when a member is removed, none of their sessions
// keeps the organization active, and their cookie no longer reaches it.
func TestRemovedMemberLosesActiveOrganization(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ten := app.newTenancy(t)
	dev := ten.members[RoleDeveloper]
	ctx := context.Background()
	if err := app.store.InTx(ctx, func(tx *store.Tx) error {
		return tx.SetActiveOrganization(ctx, dev.Session.ID, &ten.org.ID)
	}); err != nil {
		t.Fatal(err)
	}
	res := app.do(ten.members[RoleOwner].as(request{method: http.MethodPost, path: "/api/auth/organization/remove-member",
		body: `{"memberIdOrEmail":"` + dev.Email + `","organizationId":"` + ten.org.ID + `"}`}))
	if res.Code != http.StatusOK {
		t.Fatalf("remove-member: %d %s", res.Code, res.Body)
	}
	sess, _, err := app.store.SessionByTokenHash(ctx, dev.Session.TokenHash)
	if err != nil || sess.ActiveOrganizationID != nil {
		t.Fatalf("removed member's session: active organization %v, %v", sess.ActiveOrganizationID, err)
	}
	app.do(dev.as(request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID})).
		wantProblem(t, http.StatusNotFound, "http-404", "Not found")
}
