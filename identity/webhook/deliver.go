package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Delivery limits.
const (
	// Timeout bounds one delivery: connecting, sending and reading the answer.
	Timeout = 10 * time.Second
	// MaxStoredBody is how much of a receiver's answer is kept with the attempt.
	MaxStoredBody = 4 << 10
)

// Outcomes of a delivery attempt, as Observe receives them.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeRefused   = "refused" // the address is not allowed (SSRF guard)
)

// DelivererConfig configures a Deliverer.
type DelivererConfig struct {
	Guard Guard
	// Transport replaces the guarded transport (tests that need a TLS root); its dialer must
	// apply Guard.Control.
	Transport http.RoundTripper
	// Observe, when set, receives each attempt's outcome and latency (metrics).
	Observe func(outcome string, latency time.Duration)
	Log     *slog.Logger
}

// Deliverer delivers the outbox's webhook messages.
type Deliverer struct {
	st      *store.Store
	ring    *seal.Keyring
	emitter *Emitter
	client  *http.Client
	cfg     DelivererConfig
}

// NewDeliverer returns a Deliverer over st, opening endpoint secrets with ring; emitter
// writes the audit entry (and its event) when an endpoint is disabled for failing.
func NewDeliverer(st *store.Store, ring *seal.Keyring, cfg DelivererConfig) *Deliverer {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	transport := cfg.Transport
	if transport == nil {
		dialer := &net.Dialer{Timeout: Timeout, Control: cfg.Guard.Control}
		transport = &http.Transport{
			Proxy:                 nil, // a proxy would connect on our behalf, past the guard
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   Timeout,
			ResponseHeaderTimeout: Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
		}
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   Timeout,
		// Redirects are not followed: a 3xx is a failed attempt.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Deliverer{st: st, ring: ring, emitter: NewEmitter(st, ring), client: client, cfg: cfg}
}

// History is how long events and delivery attempts are kept (redelivery and the deliveries
// list reach back this far).
const History = 30 * 24 * time.Hour

// Sweep deletes events and attempts older than History (outbox.WorkerConfig.OnSweep).
func (d *Deliverer) Sweep(ctx context.Context, now time.Time) {
	for range 10 {
		n, err := d.st.DeleteOldWebhookHistory(ctx, now.Add(-History), 500)
		if err != nil {
			d.cfg.Log.Warn("webhook: sweep history", "err", err)
			return
		}
		if n < 500 {
			return
		}
	}
}

// Handler is the outbox handler of Kind.
func (d *Deliverer) Handler() outbox.Handler { return d.deliver }

func (d *Deliverer) deliver(ctx context.Context, payload []byte) error {
	var p deliveryPayload
	if err := json.Unmarshal(payload, &p); err != nil || p.EndpointID == "" || p.EventID == "" {
		return outbox.Permanent(errors.New("webhook: the payload does not decode"))
	}
	attempt, _ := outbox.AttemptFrom(ctx)
	endpoint, err := d.st.WebhookEndpoint(ctx, "", p.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		return outbox.Permanent(errors.New("webhook: the endpoint was deleted"))
	}
	if err != nil {
		return err
	}
	record := store.WebhookDelivery{EndpointID: p.EndpointID, EventID: p.EventID, EventType: p.EventType,
		OutboxID: attempt.MessageID, Attempt: attempt.Number, Status: store.DeliveryFailed}
	if endpoint.DisabledAt != nil && p.EventType != TypePing {
		record.Error = "the endpoint is disabled"
		return outbox.Permanent(d.finish(ctx, endpoint, record, nil, errors.New(record.Error), false))
	}
	event, err := d.st.WebhookEvent(ctx, p.EventID)
	if errors.Is(err, store.ErrNotFound) {
		return outbox.Permanent(errors.New("webhook: the event is gone"))
	}
	if err != nil {
		return err
	}
	started := time.Now()
	code, body, sendErr := 0, "", error(nil)
	if !d.cfg.Guard.AllowPrivate && !strings.HasPrefix(endpoint.URL, "https://") {
		// Registered while private addresses were allowed: refused now, never sent.
		sendErr = fmt.Errorf("webhook: the receiver URL %w", ErrNotHTTPS)
	} else {
		code, body, sendErr = d.send(ctx, endpoint, event)
	}
	latency := time.Since(started)
	record.LatencyMs, record.ResponseCode, record.ResponseBody = latency.Milliseconds(), code, body
	outcome := OutcomeFailed
	switch {
	case sendErr == nil && code >= 200 && code < 300:
		record.Status, outcome = store.DeliverySucceeded, OutcomeSucceeded
	case sendErr == nil:
		sendErr = fmt.Errorf("webhook: the receiver answered %d", code)
	case errors.Is(sendErr, ErrPrivateAddress) || errors.Is(sendErr, ErrNotHTTPS):
		outcome = OutcomeRefused
	}
	if sendErr != nil {
		record.Error = errorText(sendErr)
	}
	if d.cfg.Observe != nil {
		d.cfg.Observe(outcome, latency)
	}
	var retryAt *time.Time
	if sendErr != nil && !attempt.RetryAt.IsZero() {
		retryAt = &attempt.RetryAt
	}
	return d.finish(ctx, endpoint, record, retryAt, sendErr, true)
}

// finish records the attempt and the endpoint's run of failures, disables an endpoint that
// has failed for DisableAfter, and returns sendErr (for the worker's retry).
func (d *Deliverer) finish(ctx context.Context, endpoint store.WebhookEndpoint, record store.WebhookDelivery,
	retryAt *time.Time, sendErr error, countOutcome bool) error {
	if err := d.st.RecordWebhookAttempt(ctx, record, retryAt); err != nil && !errors.Is(err, store.ErrNotFound) {
		d.cfg.Log.Warn("webhook: record attempt", "endpoint_id", endpoint.ID, "err", err)
	}
	if !countOutcome {
		return sendErr
	}
	now := d.st.Now()
	e, err := d.st.RecordWebhookEndpointOutcome(ctx, endpoint.ID, sendErr == nil, now)
	if err != nil {
		return sendErr
	}
	if sendErr != nil && e.DisabledAt == nil && e.FailingSince != nil && now.Sub(*e.FailingSince) >= DisableAfter {
		if err := d.disableFailing(ctx, e.ProjectID, e.ID); err != nil {
			d.cfg.Log.Warn("webhook: disable failing endpoint", "endpoint_id", endpoint.ID, "err", err)
		}
	}
	return sendErr
}

// disableFailing disables endpoint id of projectID for failing, with an audit entry by the
// system (webhook_endpoint.disable, reason failing), which is an event for the project's other
// endpoints.
func (d *Deliverer) disableFailing(ctx context.Context, projectID, id string) error {
	return d.st.InTx(ctx, func(tx *store.Tx) error {
		e, err := tx.WebhookEndpointForUpdate(ctx, projectID, id)
		if err != nil || e.DisabledAt != nil {
			return err
		}
		now := d.st.Now()
		e.DisabledAt, e.DisabledReason = &now, store.WebhookDisabledFailing
		if err := tx.UpdateWebhookEndpoint(ctx, &e); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, &store.AuditEntry{ActorType: store.ActorSystem, Action: "webhook_endpoint.disable",
			TargetType: "webhook_endpoint", TargetID: id, ProjectID: projectID, OrganizationID: organizationOf(ctx, d.st, projectID),
			Metadata: map[string]any{"reason": store.WebhookDisabledFailing, "failingSince": e.FailingSince.UTC().Format(time.RFC3339)}})
	})
}

// organizationOf is the organization of projectID, "" when it cannot be read.
func organizationOf(ctx context.Context, st *store.Store, projectID string) string {
	p, err := st.Project(ctx, projectID)
	if err != nil {
		return ""
	}
	return p.OrganizationID
}

// send POSTs event to endpoint, signed, and returns the status code and the first
// MaxStoredBody bytes of the answer.
func (d *Deliverer) send(ctx context.Context, endpoint store.WebhookEndpoint, event store.WebhookEvent) (int, string, error) {
	secrets, err := d.secrets(endpoint)
	if err != nil {
		return 0, "", err
	}
	ts := time.Now()
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, event.ID, ts, []byte(event.Body))
		if err != nil {
			return 0, "", err
		}
		sigs = append(sigs, sig)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint.URL, bytes.NewReader([]byte(event.Body)))
	if err != nil {
		return 0, "", errors.New("webhook: the endpoint URL is not usable")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Gatehouse-Webhooks/1")
	req.Header.Set("webhook-id", event.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", strings.Join(sigs, " "))
	res, err := d.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrPrivateAddress) {
			return 0, "", fmt.Errorf("webhook: the receiver %w", ErrPrivateAddress)
		}
		return 0, "", fmt.Errorf("webhook: post: %w", redactURL(err))
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, MaxStoredBody))
	return res.StatusCode, strings.ToValidUTF8(string(b), ""), nil
}

// secrets opens endpoint's signing secrets: the current one, and the previous one while its
// overlap lasts.
func (d *Deliverer) secrets(endpoint store.WebhookEndpoint) ([]string, error) {
	cur, err := d.ring.Open(endpoint.Secret, store.WebhookSecretAAD(endpoint.ID))
	if err != nil {
		return nil, errors.New("webhook: the endpoint secret does not open with GATEHOUSE_SECRET_KEY or GATEHOUSE_SECRET_KEYS_OLD")
	}
	out := []string{string(cur)}
	if endpoint.PreviousSecret != "" && endpoint.PreviousSecretExpiresAt != nil && d.st.Now().Before(*endpoint.PreviousSecretExpiresAt) {
		prev, err := d.ring.Open(endpoint.PreviousSecret, store.WebhookPreviousSecretAAD(endpoint.ID))
		if err == nil {
			out = append(out, string(prev))
		}
	}
	return out, nil
}

// redactURL drops the URL from a client error (it may carry a query the operator considers
// secret); the cause stays.
func redactURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// errorText is err's message as stored with an attempt, at most 500 bytes.
func errorText(err error) string {
	s := err.Error()
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:500], "")
	}
	return s
}
