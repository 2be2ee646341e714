package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/gatehouse-dev/gatehouse/store"
)

// WebhookTolerance is how far a webhook signature's timestamp may be from now, before or after.
const WebhookTolerance = 300 * time.Second

// errBadSignature answers every webhook whose signature does not verify: missing, malformed,
// wrong secret, stale timestamp, tampered body. The reason is never told.
var errBadSignature = ClientError(http.StatusBadRequest, "Invalid webhook signature")

// processorWebhook serves POST /api/v1/webhooks/processor/{environmentId} (routed by hand: it
// needs the raw body). The environment must exist and be connected (404 otherwise); the
// signature is verified by stripe-go against its webhook secret; the event is applied once,
// with its dedupe row, in one transaction.
func (s *Server) processorWebhook(c echo.Context) error {
	ctx := c.Request().Context()
	envID := routeOf(c).params["environmentId"]
	payload, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	env, err := s.store.Environment(ctx, envID)
	if err != nil {
		return err // ErrNotFound: 404
	}
	conn, err := s.store.ProcessorConnection(ctx, envID)
	if err != nil {
		return err
	}
	secret, err := s.keyring.Open(conn.WebhookSecret, store.ProcessorWebhookSecretAAD(envID))
	if err != nil {
		return err
	}
	header := c.Request().Header.Get("Stripe-Signature")
	event, err := webhook.ConstructEventWithOptions(payload, header, string(secret),
		webhook.ConstructEventOptions{Tolerance: WebhookTolerance, IgnoreAPIVersionMismatch: true})
	if err != nil || event.ID == "" || event.Data == nil {
		return errBadSignature
	}
	// stripe-go refuses only timestamps older than the tolerance; one further ahead is refused
	// alike (a signature made for later is not a fresh one).
	if at, ok := signedAt(header); !ok || time.Until(at) > WebhookTolerance {
		return errBadSignature
	}
	fresh := false
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if fresh, err = tx.RecordProcessorEvent(ctx, envID, event.ID, string(event.Type), time.Unix(event.Created, 0)); err != nil || !fresh {
			return err
		}
		return s.applyProcessorEvent(ctx, tx, env, event)
	})
	if err != nil {
		return err
	}
	s.log.DebugContext(ctx, "processor webhook", "event_id", event.ID, "type", event.Type, "duplicate", !fresh,
		"environment_id", envID, "request_id", RequestID(ctx))
	return c.JSON(http.StatusOK, webhookReceipt{Received: true, Duplicate: !fresh})
}

// signedAt is the t= timestamp of a Stripe-Signature header, read as stripe-go reads it (the
// last t wins); ok is false without one.
func signedAt(header string) (at time.Time, ok bool) {
	for _, pair := range strings.Split(header, ",") {
		if k, v, _ := strings.Cut(pair, "="); k == "t" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			at, ok = time.Unix(n, 0), true
		}
	}
	return at, ok
}

// webhookReceipt is the webhook's answer (the spec's WebhookReceipt), not wrapped in data.
type webhookReceipt struct {
	Received  bool `json:"received"`
	Duplicate bool `json:"duplicate"`
}

// applyProcessorEvent applies one verified event in tx; unhandled types change nothing.
func (s *Server) applyProcessorEvent(ctx context.Context, tx *store.Tx, env store.Environment, event stripe.Event) error {
	raw := []byte(event.Data.Raw)
	created := time.Unix(event.Created, 0).UTC()
	switch event.Type {
	case "checkout.session.completed":
		var cs whCheckoutSession
		if json.Unmarshal(raw, &cs) != nil {
			return nil
		}
		return s.applyCheckoutCompleted(ctx, tx, env, cs, created)
	case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted":
		var sub whSubscription
		if json.Unmarshal(raw, &sub) != nil || sub.ID == "" {
			return nil
		}
		if event.Type == "customer.subscription.deleted" {
			sub.Status = store.StatusCanceled
		}
		return s.applySubscription(ctx, tx, env, sub, created)
	case "invoice.paid", "invoice.payment_failed":
		var inv whInvoice
		if json.Unmarshal(raw, &inv) != nil || inv.ID == "" {
			return nil
		}
		return s.applyInvoice(ctx, tx, env, inv, event.Type == "invoice.paid")
	}
	return nil
}

// applyCheckoutCompleted ties a completed Checkout Session to its subject and plan: for a
// subscription, it creates the subscription row (or fills in the subject and plan of a row a
// subscription event created first, leaving its status alone); for a one-time plan, it records
// the purchase under the session id.
func (s *Server) applyCheckoutCompleted(ctx context.Context, tx *store.Tx, env store.Environment, cs whCheckoutSession, created time.Time) error {
	subject := cs.ClientReferenceID
	if subject == "" {
		subject = cs.Metadata[metaSubject]
	}
	plan := cs.Metadata[metaPlan]
	if subject == "" || plan == "" || cs.ID == "" {
		return nil // not a session Gatehouse created
	}
	customer := objectID(cs.Customer)
	status := store.StatusIncomplete
	if cs.PaymentStatus == "paid" || cs.PaymentStatus == "no_payment_required" {
		status = store.StatusActive
	}
	next := store.Subscription{ProjectID: env.ProjectID, EnvironmentID: env.ID, SubjectID: subject, PlanKey: plan,
		CustomerID: customer, Status: status}
	if cs.Mode == "subscription" {
		next.ProcessorID = objectID(cs.Subscription)
		if next.ProcessorID == "" {
			return nil
		}
		exists, err := tx.FillSubscription(ctx, env.ID, next.ProcessorID, subject, plan, customer)
		if err != nil {
			return err
		}
		if exists {
			// A subscription event came first: the row now has its subject and plan.
			return s.entitlementsChanged(ctx, tx, env.ProjectID, env.ID, subject, "subscription")
		}
		// The subscription's own events carry its state: this row yields to any of them
		// (EventCreated zero).
		return s.applySubscriptionWithEvents(ctx, tx, next, false)
	}
	next.ProcessorID, next.EventCreated = cs.ID, created
	return s.applySubscriptionWithEvents(ctx, tx, next, true)
}

// applySubscription applies a subscription object unless the stored row is newer
// (store.Subscription.Supersedes). The subject and plan come from the metadata Gatehouse set
// at checkout, else from the stored row; the plan also from the price of the first item.
func (s *Server) applySubscription(ctx context.Context, tx *store.Tx, env store.Environment, sub whSubscription, created time.Time) error {
	next := store.Subscription{ProjectID: env.ProjectID, EnvironmentID: env.ID, ProcessorID: sub.ID,
		SubjectID: sub.Metadata[metaSubject], PlanKey: sub.Metadata[metaPlan], CustomerID: objectID(sub.Customer),
		Status: sub.Status, CancelAtPeriodEnd: sub.CancelAtPeriodEnd, EventCreated: created}
	if next.Status == "" {
		return nil
	}
	start, end := sub.CurrentPeriodStart, sub.CurrentPeriodEnd
	for _, it := range sub.Items.Data {
		// Since API version 2025-03-31 the period lives on the items.
		if end == 0 && it.CurrentPeriodEnd > 0 {
			start, end = it.CurrentPeriodStart, it.CurrentPeriodEnd
		}
		if next.PlanKey == "" && it.Price.ID != "" {
			next.PlanKey = s.planForPrice(ctx, tx, env, it.Price.ID)
		}
	}
	if end > 0 {
		ps, pe := time.Unix(start, 0).UTC(), time.Unix(end, 0).UTC()
		next.CurrentPeriodStart, next.CurrentPeriodEnd = &ps, &pe
	}
	err := s.applySubscriptionWithEvents(ctx, tx, next, false)
	if errors.Is(err, store.ErrInvalid) {
		return nil // a subscription Gatehouse cannot tie to a subject and plan
	}
	return err
}

// planForPrice is the key of the project's plan whose price in env is priceID, or "".
func (s *Server) planForPrice(ctx context.Context, tx *store.Tx, env store.Environment, priceID string) string {
	plans, err := tx.ListPlans(ctx, env.ProjectID, store.StateAll)
	if err != nil {
		return ""
	}
	for _, p := range plans {
		if p.PriceIDs[env.ID] == priceID {
			return p.Key
		}
	}
	return ""
}

// applyInvoice records a paid or failed invoice under its subject (from the subscription's
// metadata, the stored subscription, or the customer's). A paid invoice is final.
func (s *Server) applyInvoice(ctx context.Context, tx *store.Tx, env store.Environment, inv whInvoice, paid bool) error {
	subID := objectID(inv.Subscription)
	subject := inv.Metadata[metaSubject]
	if p := inv.Parent; p != nil && p.SubscriptionDetails != nil {
		if subID == "" {
			subID = objectID(p.SubscriptionDetails.Subscription)
		}
		if subject == "" {
			subject = p.SubscriptionDetails.Metadata[metaSubject]
		}
	}
	if subject == "" && subID != "" {
		if sub, err := tx.SubscriptionByProcessorID(ctx, env.ID, subID); err == nil {
			subject = sub.SubjectID
		}
	}
	if subject == "" {
		if sub, err := tx.SubscriptionByCustomer(ctx, env.ID, objectID(inv.Customer)); err == nil {
			subject = sub.SubjectID
		}
	}
	rec := store.Invoice{ProjectID: env.ProjectID, EnvironmentID: env.ID, ProcessorID: inv.ID, SubjectID: subject,
		SubscriptionID: subID, Status: store.InvoicePaymentFailed, Amount: inv.AmountDue, Currency: inv.Currency}
	if paid {
		rec.Status, rec.Amount = store.InvoicePaid, inv.AmountPaid
		at := time.Unix(inv.StatusTransitions.PaidAt, 0).UTC()
		if inv.StatusTransitions.PaidAt == 0 {
			at = time.Unix(inv.Created, 0).UTC()
		}
		rec.PaidAt = &at
	}
	newlyPaid, err := tx.RecordInvoice(ctx, rec)
	if err != nil || !newlyPaid {
		return err
	}
	if err := s.invoicePaid(ctx, tx, rec); err != nil {
		return err
	}
	// Revenue enters the analytics rollups once, when the invoice first becomes paid (then
	// PaidAt is set); an invoice no subscription or metadata ties to a subject counts nowhere.
	if rec.SubjectID == "" {
		return nil
	}
	return tx.AddRevenue(ctx, store.RevenueEntry{ProjectID: env.ProjectID, EnvironmentID: env.ID,
		SubjectID: rec.SubjectID, At: *rec.PaidAt, Currency: rec.Currency, Amount: rec.Amount})
}

// objectID reads a Stripe reference that is either an id string or an expanded object.
func objectID(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.ID
	}
	return ""
}

// The parts of Stripe objects the webhook reads, decoded from the event's raw object so that
// events of any API version decode (fields that moved are read from both places).
type whCheckoutSession struct {
	ID                string            `json:"id"`
	Mode              string            `json:"mode"`
	ClientReferenceID string            `json:"client_reference_id"`
	Customer          json.RawMessage   `json:"customer"`
	Subscription      json.RawMessage   `json:"subscription"`
	PaymentStatus     string            `json:"payment_status"`
	Metadata          map[string]string `json:"metadata"`
}

type whSubscription struct {
	ID                 string            `json:"id"`
	Customer           json.RawMessage   `json:"customer"`
	Status             string            `json:"status"`
	Metadata           map[string]string `json:"metadata"`
	CancelAtPeriodEnd  bool              `json:"cancel_at_period_end"`
	CurrentPeriodStart int64             `json:"current_period_start"`
	CurrentPeriodEnd   int64             `json:"current_period_end"`
	Items              struct {
		Data []struct {
			Price struct {
				ID string `json:"id"`
			} `json:"price"`
			CurrentPeriodStart int64 `json:"current_period_start"`
			CurrentPeriodEnd   int64 `json:"current_period_end"`
		} `json:"data"`
	} `json:"items"`
}

type whInvoice struct {
	ID                string            `json:"id"`
	Customer          json.RawMessage   `json:"customer"`
	Subscription      json.RawMessage   `json:"subscription"`
	AmountPaid        int64             `json:"amount_paid"`
	AmountDue         int64             `json:"amount_due"`
	Currency          string            `json:"currency"`
	Created           int64             `json:"created"`
	Metadata          map[string]string `json:"metadata"`
	StatusTransitions struct {
		PaidAt int64 `json:"paid_at"`
	} `json:"status_transitions"`
	Parent *struct {
		SubscriptionDetails *struct {
			Subscription json.RawMessage   `json:"subscription"`
			Metadata     map[string]string `json:"metadata"`
		} `json:"subscription_details"`
	} `json:"parent"`
}
