package server

import (
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/mail"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// The mapping from the configuration to the other packages' settings: main (and the tests
// that start an app) build each dependency with these, then hand them to New.

// AccountsConfig is the identity.AccountsConfig that c describes, with the social providers
// built from c.Social (identity.NewSocialProviders).
func (c Config) AccountsConfig(social []*identity.SocialProvider) identity.AccountsConfig {
	return identity.AccountsConfig{
		SecretKey: c.SecretKey, Secure: c.Secure(),
		Lifetimes:       identity.SessionLifetimes{Idle: c.SessionIdleTimeout, Absolute: c.SessionAbsoluteLifetime},
		HashConcurrency: c.HashConcurrency(), HashWait: c.PasswordHashWait,
		SignUpLimit: c.SignUpLimit, Social: social,
	}
}

// ProviderConfig is the oauth.ProviderConfig that c describes over st, the signing keys and
// the accounts' sessions and social providers; the provider's entitlements and billing claims
// are ProductClaims over st, and its audit entries carry RequestInfo.
func (c Config) ProviderConfig(st *store.Store, keys *oauth.KeySet, acc *identity.Accounts) oauth.ProviderConfig {
	buttons := make([]oauth.SocialButton, len(acc.Social))
	for i, p := range acc.Social {
		buttons[i] = oauth.SocialButton{ID: p.ID, Name: p.Name}
	}
	return oauth.ProviderConfig{
		BaseURL: c.BaseURL, SecretKey: c.SecretKey, Store: st, Keys: keys,
		Sessions: acc.Sessions, TrustedOrigin: NewOrigins(c), Social: buttons,
		Claims: ProductClaims{Store: st}, RequestInfo: RequestInfo,
		ForgotPasswordURL: ForgotPasswordPagePath, SignUpURL: c.signUpPageURL(), Brand: c.Brand,
	}
}

// Mailer is the identity.Mailer that c describes over st: messages branded with c.Brand,
// counted against the send limits in st and written to its outbox sealed with ring.
func (c Config) Mailer(st *store.Store, ring *seal.Keyring) *identity.Mailer {
	return identity.NewMailer(st, outbox.New(ring), mail.NewComposer(c.Brand), nil)
}

// MailSender is where c's mail goes: SMTP to c.SMTP from c.MailFrom, or, in development mode
// (no SMTP), a log line per message with its link, in log.
func (c Config) MailSender(log *slog.Logger) mail.Sender {
	if c.SMTP == nil {
		return mail.LogSender{Log: log}
	}
	return mail.NewSMTPSender(*c.SMTP, c.MailFrom, c.SMTPTLSConfig)
}

// OutboxWorker is the worker that delivers st's outbox — mail with c.MailSender — opening
// payloads with ring. opts tune it (tests poll and retry faster); its handlers are set here.
func (c Config) OutboxWorker(st *store.Store, ring *seal.Keyring, log *slog.Logger, opts outbox.WorkerConfig) *outbox.Worker {
	opts.Handlers = map[string]outbox.Handler{mail.Kind: mail.Handler(c.MailSender(log))}
	if opts.Log == nil {
		opts.Log = log
	}
	return outbox.NewWorker(st, ring, opts)
}

// signUpPageURL is the hosted sign-up page the sign-in page links to: none unless
// self-registration is open (under invite-only, an invitation's page links to sign-up).
func (c Config) signUpPageURL() string {
	if c.SignUp != SignUpOpen && c.SignUp != "" {
		return ""
	}
	return SignUpPagePath
}

// Webhooks is the event emitter over st, sealing outbox payloads with ring, and registers it
// as st's audit hook (a nil st, in tests without a database, has none): from here on every audit entry of a project is also an event, written to
// the outbox in the entry's transaction. Call it once per store.
func (c Config) Webhooks(st *store.Store, ring *seal.Keyring) *webhook.Emitter {
	em := webhook.NewEmitter(st, ring)
	if st != nil {
		st.OnAudit(em.AuditHook)
	}
	return em
}

// WebhookWorker is the outbox worker that delivers st's webhook messages: the retry schedule
// c.WebhookRetrySchedule (webhook.DefaultSchedule when empty), attempts bounded by
// webhook.Timeout, eight endpoints at a time, each endpoint's deliveries in order, and the
// SSRF guard of c.WebhookAllowPrivate at every connection. m counts the outcomes. opts tune it
// (tests poll faster).
func (c Config) WebhookWorker(st *store.Store, ring *seal.Keyring, log *slog.Logger, m *Metrics, opts outbox.WorkerConfig) *outbox.Worker {
	d := webhook.NewDeliverer(st, ring, webhook.DelivererConfig{
		Guard: webhook.Guard{AllowPrivate: c.WebhookAllowPrivate}, Observe: m.webhookAttempt, Log: log})
	opts.Handlers = map[string]outbox.Handler{webhook.Kind: d.Handler()}
	opts.OnSweep = d.Sweep
	if len(opts.Schedule) == 0 {
		opts.Schedule = c.WebhookRetrySchedule
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = webhook.DefaultSchedule
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 8
	}
	opts.AttemptTimeout = webhook.Timeout + 5*time.Second
	// A replica killed mid-claim holds its messages for 45 s at most.
	opts.Lease = opts.AttemptTimeout + 30*time.Second
	if opts.Log == nil {
		opts.Log = log
	}
	return outbox.NewWorker(st, ring, opts)
}
