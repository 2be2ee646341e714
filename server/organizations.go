package server

import (
	"context"
	"errors"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse-dev/gatehouse/store"
)

// The organization core: one implementation behind both faces, /api/v1/organizations and
// /api/auth/organization/*. Every mutation writes its audit row in the same transaction.

// errOrgSlugTaken is the conflict both faces answer for a duplicate organization slug.
var errOrgSlugTaken = &Error{Status: 409, Kind: kindConflict, Title: "Organization slug already taken",
	Code: "ORGANIZATION_SLUG_ALREADY_TAKEN", Message: "Organization slug already taken"}

// createOrganization creates an organization whose owner is the calling user.
func (s *Server) createOrganization(ctx context.Context, o store.Organization) (store.Organization, store.Member, error) {
	p := PrincipalFrom(ctx)
	var owner store.Member
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if owner, err = tx.CreateOrganization(ctx, &o, p.ID()); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "organization.create", TargetType: "organization", TargetID: o.ID,
			OrganizationID: o.ID, Metadata: map[string]any{"name": o.Name, "slug": o.Slug}})
	})
	if errors.Is(err, store.ErrConflict) {
		return o, owner, errOrgSlugTaken
	}
	return o, owner, err
}

// updateOrganization changes an organization's name, slug, logo or metadata.
func (s *Server) updateOrganization(ctx context.Context, orgID string, u store.OrganizationUpdate) (store.Organization, error) {
	var org store.Organization
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if org, err = tx.UpdateOrganization(ctx, orgID, u); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "organization.update", TargetType: "organization", TargetID: orgID,
			OrganizationID: orgID, Metadata: changedFields(map[string]bool{
				"name": u.Name != nil, "slug": u.Slug != nil, "logo": u.Logo != nil, "metadata": u.Metadata != nil,
				"requireTwoFactor": u.RequireTwoFactor != nil})})
	})
	if errors.Is(err, store.ErrConflict) {
		return org, errOrgSlugTaken
	}
	return org, err
}

// setOrganizationArchived archives or restores an organization. Archiving clears it as the
// active organization of every session.
func (s *Server) setOrganizationArchived(ctx context.Context, orgID string, archived bool) (store.Organization, error) {
	var org store.Organization
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if org, err = tx.SetOrganizationArchived(ctx, orgID, archived); err != nil {
			return err
		}
		action := "organization.restore"
		if archived {
			action = "organization.archive"
			if err := tx.ClearActiveOrganization(ctx, orgID); err != nil {
				return err
			}
		}
		return audit(ctx, tx, auditEvent{Action: action, TargetType: "organization", TargetID: orgID, OrganizationID: orgID})
	})
	return org, err
}

// changedFields lists, as audit metadata, which fields an update touched (never their values).
func changedFields(touched map[string]bool) map[string]any {
	var fields []any
	for _, f := range []string{"name", "slug", "description", "logo", "metadata", "permissions", "requireTwoFactor"} {
		if touched[f] {
			fields = append(fields, f)
		}
	}
	return map[string]any{"fields": fields}
}

// slugify turns a name into a slug: lower-case ASCII letters and digits separated by single
// hyphens, at most 63 characters. It returns "" when nothing usable is left.
func slugify(name string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range norm.NFKD.String(name) {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(unicode.ToLower(r))
		case unicode.Is(unicode.Mn, r):
			// Combining marks left by NFKD (é → e + ´) are dropped.
		default:
			hyphen = true
		}
		if b.Len() >= 63 {
			break
		}
	}
	return strings.Trim(b.String()[:min(b.Len(), 63)], "-")
}
