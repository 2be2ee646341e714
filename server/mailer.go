package server

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Mailer delivers the messages Gatehouse sends to people. Today that is organization
// invitations only. main passes one in Deps.Mailer (LogMailer by default); an SMTP (or
// transactional-mail API) implementation is a later option and needs no other change.
//
// Implementations must be safe for concurrent use. They are called after the mutation has
// committed; an error fails the request with a 500 but does not undo the mutation (the caller
// can resend the invitation).
type Mailer interface {
	// SendInvitation delivers inv to inv.Email with acceptURL, the page where the recipient
	// signs in and accepts.
	SendInvitation(ctx context.Context, inv Invitation, acceptURL string) error
}

// Invitation is what an invitation message tells its recipient.
type Invitation struct {
	ID               string
	Email            string
	Role             string
	OrganizationID   string
	OrganizationName string
	OrganizationSlug string
	InviterID        string
	InviterName      string
	InviterEmail     string
	ExpiresAt        time.Time
}

// LogMailer is the default Mailer: it sends nothing and logs each message, accept link
// included, at info level, so that a developer (or an operator without mail set up) can pass
// the link on by hand. The link is not a secret: only the invited user, signed in, can accept.
type LogMailer struct {
	Log *slog.Logger
}

// SendInvitation logs the invitation and its accept link.
func (m LogMailer) SendInvitation(ctx context.Context, inv Invitation, acceptURL string) error {
	m.Log.InfoContext(ctx, "invitation (not mailed: no mailer configured)",
		"invitation_id", inv.ID, "email", inv.Email, "organization_id", inv.OrganizationID,
		"organization", inv.OrganizationName, "role", inv.Role, "inviter_id", inv.InviterID,
		"expires_at", inv.ExpiresAt.UTC().Format(time.RFC3339), "accept_url", acceptURL,
		"request_id", RequestID(ctx))
	return nil
}

// invitationAcceptURL is the link an invitation message carries: cfg.InvitationURL with {id}
// replaced by the invitation id (default {base_url}/accept-invitation/{id}). The page there —
// the product's UI — signs the invitee in and calls
// POST /api/auth/organization/accept-invitation with the id.
func (s *Server) invitationAcceptURL(invitationID string) string {
	tmpl := s.cfg.InvitationURL
	if tmpl == "" {
		tmpl = s.cfg.BaseURL + "/accept-invitation/{id}"
	}
	return strings.ReplaceAll(tmpl, "{id}", url.PathEscape(invitationID))
}
