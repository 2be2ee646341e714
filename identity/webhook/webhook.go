// Package webhook is Gatehouse's outbound event stream: it turns changes into events, writes
// one outbox message per subscribed endpoint in the transaction of the change, and delivers
// them as Standard Webhooks (https://www.standardwebhooks.com): a POST of the event's JSON
// with the headers webhook-id (the event id), webhook-timestamp (Unix seconds) and
// webhook-signature ("v1," + base64 HMAC-SHA256 over "id.timestamp.body" under the endpoint's
// secret; during a rotation one signature per secret, space-separated).
//
// Delivery is at least once: receivers must dedupe on webhook-id. The outbox worker
// (identity/outbox, kind "webhook") retries on the configured schedule and orders each
// endpoint's deliveries (its partition) while the endpoint accepts them.
//
// It imports store/, store/seal and identity/outbox only.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Kind is the outbox kind of webhook deliveries.
const Kind = "webhook"

// Event types that are not audit actions.
const (
	TypePing                 = "ping"
	TypeSubscriptionCreated  = "subscription.created"
	TypeSubscriptionUpdated  = "subscription.updated"
	TypeSubscriptionCanceled = "subscription.canceled"
	TypeInvoicePaid          = "invoice.paid"
	TypeEntitlementsChanged  = "entitlements.changed"
)

// DefaultSchedule is the wait after each failed attempt: eight attempts over about 32 hours.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour}

// SecretRotationOverlap is how long a rotated-out secret keeps signing.
const SecretRotationOverlap = 24 * time.Hour

// DisableAfter is how long an endpoint may fail continuously before it is disabled.
const DisableAfter = 72 * time.Hour

// Event is one event as its receivers see it. Data never holds a secret, config value, key or
// token.
type Event struct {
	ID            string         `json:"id"`
	Type          string         `json:"type"`
	Timestamp     time.Time      `json:"timestamp"`
	ProjectID     string         `json:"projectId"`
	EnvironmentID string         `json:"environmentId,omitempty"`
	Data          map[string]any `json:"data"`
}

// NewSecret returns a new endpoint signing secret: "whsec_" and the base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("webhook: new secret: " + err.Error())
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// Sign returns the Standard Webhooks signature ("v1," + base64 HMAC-SHA256 of id.ts.body) of a
// message under secret (whsec_…).
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", errors.New("webhook: sign: the secret is not whsec_ and base64")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// Emitter writes events to the outbox for the endpoints that subscribe to them.
type Emitter struct {
	ring   *seal.Keyring
	outbox *outbox.Outbox
	now    func() time.Time
}

// NewEmitter returns an Emitter that seals outbox payloads with ring.
func NewEmitter(st *store.Store, ring *seal.Keyring) *Emitter {
	em := &Emitter{ring: ring, outbox: outbox.New(ring), now: time.Now}
	if st != nil {
		em.now = st.Now
	}
	return em
}

// deliveryPayload is the outbox payload of one delivery.
type deliveryPayload struct {
	EndpointID string `json:"endpointId"`
	EventID    string `json:"eventId"`
	EventType  string `json:"eventType"`
}

// AuditHook is the store.AuditHook that makes every audit entry of a project an event: type
// the action, id the entry's id (entries of no project reach no endpoint).
func (em *Emitter) AuditHook(ctx context.Context, tx *store.Tx, e store.AuditEntry) error {
	if e.ProjectID == "" {
		return nil
	}
	ev := Event{ID: e.ID, Type: e.Action, Timestamp: e.OccurredAt, ProjectID: e.ProjectID, Data: AuditData(e)}
	if env, ok := e.Metadata["environmentId"].(string); ok {
		ev.EnvironmentID = env
	}
	return em.Emit(ctx, tx, ev)
}

// AuditData is the data of an audit entry's event: actor, target, organization and metadata
// (audit metadata holds no secret: it is shown to every audit:read holder). A subject
// deletion's is only the subject's id.
func AuditData(e store.AuditEntry) map[string]any {
	if e.Action == "subject.delete" {
		return map[string]any{"subjectId": e.TargetID}
	}
	d := map[string]any{
		"actor":  map[string]any{"type": e.ActorType, "id": e.ActorID},
		"target": map[string]any{"type": e.TargetType, "id": e.TargetID},
	}
	if e.OrganizationID != "" {
		d["organizationId"] = e.OrganizationID
	}
	if len(e.Metadata) > 0 {
		d["metadata"] = e.Metadata
	}
	return d
}

// Emit writes ev (ID "evt_…" and Timestamp now when empty) for every enabled endpoint of its
// project that subscribes to its type and environment, in tx: the event once, and per
// endpoint an outbox message and its pending first attempt. Nothing is written when no
// endpoint subscribes.
func (em *Emitter) Emit(ctx context.Context, tx *store.Tx, ev Event) error {
	endpoints, err := tx.WebhookEndpoints(ctx, ev.ProjectID)
	if err != nil {
		return err
	}
	var to []store.WebhookEndpoint
	for _, e := range endpoints {
		if e.Subscribes(ev.Type, ev.EnvironmentID) {
			to = append(to, e)
		}
	}
	if len(to) == 0 {
		return nil
	}
	if err := em.insertEvent(ctx, tx, &ev); err != nil {
		return err
	}
	for _, e := range to {
		if err := em.enqueue(ctx, tx, e.ID, ev.ID, ev.Type); err != nil {
			return err
		}
	}
	return nil
}

// Ping writes a ping event for endpoint alone (enabled or not) and returns its id.
func (em *Emitter) Ping(ctx context.Context, tx *store.Tx, endpoint store.WebhookEndpoint) (string, error) {
	ev := Event{Type: TypePing, ProjectID: endpoint.ProjectID, EnvironmentID: endpoint.EnvironmentID,
		Data: map[string]any{"endpointId": endpoint.ID}}
	if err := em.insertEvent(ctx, tx, &ev); err != nil {
		return "", err
	}
	return ev.ID, em.enqueue(ctx, tx, endpoint.ID, ev.ID, ev.Type)
}

// Redeliver queues event eventID (of eventType) to endpointID again, as a new delivery.
func (em *Emitter) Redeliver(ctx context.Context, tx *store.Tx, endpointID, eventID, eventType string) error {
	return em.enqueue(ctx, tx, endpointID, eventID, eventType)
}

func (em *Emitter) insertEvent(ctx context.Context, tx *store.Tx, ev *Event) error {
	if ev.ID == "" {
		ev.ID = store.NewID("evt")
	}
	if ev.Timestamp.IsZero() {
		ev.Timestamp = em.now()
	}
	ev.Timestamp = ev.Timestamp.UTC()
	if ev.Data == nil {
		ev.Data = map[string]any{}
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("webhook: emit %s: %w", ev.Type, err)
	}
	return tx.InsertWebhookEvent(ctx, &store.WebhookEvent{ID: ev.ID, ProjectID: ev.ProjectID, Type: ev.Type, Body: string(body)})
}

func (em *Emitter) enqueue(ctx context.Context, tx *store.Tx, endpointID, eventID, eventType string) error {
	payload, err := json.Marshal(deliveryPayload{EndpointID: endpointID, EventID: eventID, EventType: eventType})
	if err != nil {
		return err
	}
	id, err := em.outbox.EnqueueOrdered(ctx, tx, Kind, endpointID, payload)
	if err != nil {
		return err
	}
	now := em.now()
	return tx.InsertWebhookDelivery(ctx, &store.WebhookDelivery{EndpointID: endpointID, EventID: eventID,
		EventType: eventType, OutboxID: id, Attempt: 1, NextAttemptAt: &now})
}
