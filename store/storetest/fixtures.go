package storetest

import (
	"context"

	"github.com/gatehouse-dev/gatehouse/store"
)

// CreateOwnedProject creates owner (with passwordHash; "" for none), org with owner as its
// owner, and prj in org, inside tx, setting their ids: the tenancy most fixtures start from.
func CreateOwnedProject(ctx context.Context, tx *store.Tx, owner *store.User, passwordHash string, org *store.Organization, prj *store.Project) error {
	if err := tx.CreateUser(ctx, owner, passwordHash); err != nil {
		return err
	}
	if _, err := tx.CreateOrganization(ctx, org, owner.ID); err != nil {
		return err
	}
	prj.OrganizationID = org.ID
	return tx.CreateProject(ctx, prj)
}
