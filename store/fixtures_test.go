package store

import "context"

// ownedProject creates in tx the user with email email, an organization it owns and a project
// in that organization (both named and slugged after slug), and returns the user and the
// project: the fixture the store's own tests build their rows on.
func ownedProject(ctx context.Context, tx *Tx, email, slug string) (User, Project, error) {
	u := User{Name: "Owner", Email: email}
	if err := tx.CreateUser(ctx, &u, ""); err != nil {
		return User{}, Project{}, err
	}
	p, err := projectOwnedBy(ctx, tx, u.ID, slug)
	return u, p, err
}

// projectOwnedBy creates in tx an organization owned by user ownerID and a project in it, both
// named and slugged after slug, and returns the project.
func projectOwnedBy(ctx context.Context, tx *Tx, ownerID, slug string) (Project, error) {
	o := Organization{Name: slug, Slug: slug}
	if _, err := tx.CreateOrganization(ctx, &o, ownerID); err != nil {
		return Project{}, err
	}
	p := Project{OrganizationID: o.ID, Name: slug, Slug: slug}
	err := tx.CreateProject(ctx, &p)
	return p, err
}
