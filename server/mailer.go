package server

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Mail. Every message Gatehouse sends a person — an invitation, a verification link, a password
// reset — goes one way: admitMail counts it against the send limits (per recipient address and
// per client IP, identity.MailAddressLimit and its siblings) before the transaction of the
// change that causes it, and sendMail renders it and writes it to the outbox in that
// transaction, so it exists exactly when the change commits. The outbox worker that main runs
// delivers it (over SMTP, or to the log in development); a mail server outage never fails a
// request. A message over a limit is dropped without a trace in the answer.

// admitMail counts one message to address, caused by this request, against the send limits.
func (s *Server) admitMail(ctx context.Context, address string) (identity.MailAdmission, error) {
	a, err := s.mailer.Admit(ctx, address, requestMetaFrom(ctx).IP)
	if err == nil && !a.Allowed() {
		s.metrics.throttleRefused(throttleMail)
		s.log.InfoContext(ctx, "mail over the send limit: not sent", "request_id", RequestID(ctx))
	}
	return a, err
}

// sendMail writes msg (as rendered, with its rendering error) to the outbox in tx when a
// allows it.
func (s *Server) sendMail(ctx context.Context, tx *store.Tx, a identity.MailAdmission, msg mail.Message, err error) error {
	if err != nil {
		return err
	}
	_, err = s.mailer.Enqueue(ctx, tx, a, msg)
	return err
}

// undoMail gives an admission back when the change it was for did not commit.
func (s *Server) undoMail(ctx context.Context, a identity.MailAdmission) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.Undo(uctx); err != nil {
		s.log.WarnContext(ctx, "mail: undo send count", "err", err)
	}
}

// invitationMessage is the invitation mail of inv, sent by inviter on behalf of org.
func (s *Server) invitationMessage(inv store.Invitation, org store.Organization, inviter store.User) (mail.Message, error) {
	return s.mailer.Compose.Invitation(inv.Email, mail.Invitation{
		OrganizationName: org.Name, InviterName: inviter.Name, InviterEmail: inviter.Email,
		Role: inv.Role, ExpiresAt: inv.ExpiresAt,
	}, s.invitationAcceptURL(inv.ID))
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
