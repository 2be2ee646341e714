package identity

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Mail send limits. Every message Gatehouse mails to a person (a verification link, a password
// reset, an invitation) is counted per recipient address — at most MailAddressLimit per
// MailAddressWindow, so that nobody can flood one mailbox through Gatehouse — and per client IP
// of the request that causes it — at most MailIPLimit per MailIPWindow, so that one client
// cannot make Gatehouse mail many people. A message over either limit is not written, and the
// request answers exactly as if it had been: the caller learns nothing (neither whether an
// account exists nor that a limit was reached). Counts live in the database like the sign-in
// throttles, shared by replicas; a refused message takes its counts back.
const (
	MailAddressLimit  = 5
	MailAddressWindow = 15 * time.Minute
	MailIPLimit       = 30
	MailIPWindow      = time.Hour
)

// Mailer writes the messages of the account flows to the outbox, within the mail send limits,
// in the transaction of the change that causes them; identity/outbox's worker delivers them.
type Mailer struct {
	// Compose renders the messages.
	Compose *mail.Composer
	outbox  *outbox.Outbox
	address *Throttle
	ip      *Throttle
}

// NewMailer returns a Mailer that counts sends in st (its clock now, nil meaning time.Now),
// renders with compose and writes to ob.
func NewMailer(st ThrottleStore, ob *outbox.Outbox, compose *mail.Composer, now func() time.Time) *Mailer {
	return &Mailer{
		Compose: compose,
		outbox:  ob,
		address: NewThrottle(prefixedThrottleStore{st, "mail-address:"}, MailAddressLimit, MailAddressWindow, now),
		ip:      NewThrottle(prefixedThrottleStore{st, "mail-ip:"}, MailIPLimit, MailIPWindow, now),
	}
}

// MailAdmission is the send limits' answer for one message: whether it may be written, and
// the counts it took, to be given back if the change it belongs to does not commit.
type MailAdmission struct {
	allowed  bool
	attempts []Attempt
}

// Allowed reports whether the message is within the limits.
func (a MailAdmission) Allowed() bool { return a.allowed }

// Undo gives the admission's counts back (the change it was for failed) and returns the first
// error; a count left standing expires with its window.
func (a MailAdmission) Undo(ctx context.Context) error {
	var first error
	for _, at := range a.attempts {
		if err := at.Undo(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Admit counts one message to address caused by a request from ip ("" when there is no client
// IP) against the send limits. Over either limit the counts are given back and the admission
// is refused; an error means the store failed (nothing counted).
func (m *Mailer) Admit(ctx context.Context, address, ip string) (MailAdmission, error) {
	type count struct {
		t   *Throttle
		key string
	}
	counts := []count{{m.address, store.NormalizeEmail(address)}}
	if ip != "" {
		counts = append(counts, count{m.ip, ip})
	}
	var a MailAdmission
	allowed := true
	for _, k := range counts {
		at, err := k.t.Hit(ctx, k.key)
		if err != nil {
			_ = a.Undo(context.WithoutCancel(ctx))
			return MailAdmission{}, err
		}
		a.attempts = append(a.attempts, at)
		allowed = allowed && at.Allowed()
	}
	if !allowed {
		_ = a.Undo(context.WithoutCancel(ctx))
		return MailAdmission{}, nil
	}
	a.allowed = true
	return a, nil
}

// Enqueue writes msg to the outbox in tx when a allows it, and reports whether it did. A
// refused message is dropped without an error: the caller answers as if it had been sent.
func (m *Mailer) Enqueue(ctx context.Context, tx *store.Tx, a MailAdmission, msg mail.Message) (bool, error) {
	if !a.allowed {
		return false, nil
	}
	payload, err := msg.Payload()
	if err != nil {
		return false, err
	}
	if _, err := m.outbox.Enqueue(ctx, tx, mail.Kind, payload); err != nil {
		return false, err
	}
	return true, nil
}
