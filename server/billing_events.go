package server

import (
	"context"
	"errors"

	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The outbound events the processor webhook causes (beside the audit entries that are events
// by themselves): subscription.created, .updated and .canceled, invoice.paid, and
// entitlements.changed for the subject whose plan changed. They are written in the webhook's
// transaction, so they exist exactly when the change does.

// applySubscriptionWithEvents applies next (store.Tx.ApplySubscription) and, when it applied,
// emits the subscription event (created for a new row, canceled when the status becomes
// canceled, else updated) and entitlements.changed when the row is new or its plan or status
// changed. oneTime marks a one-time purchase: only entitlements.changed is emitted. It returns
// the store's error as is (ErrInvalid included).
func (s *Server) applySubscriptionWithEvents(ctx context.Context, tx *store.Tx, next store.Subscription, oneTime bool) error {
	prev, err := tx.SubscriptionByProcessorID(ctx, next.EnvironmentID, next.ProcessorID)
	existed := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	row, applied, err := tx.ApplySubscription(ctx, next)
	if err != nil || !applied {
		return err
	}
	if !oneTime {
		typ := webhook.TypeSubscriptionUpdated
		switch {
		case !existed:
			typ = webhook.TypeSubscriptionCreated
		case row.Status == store.StatusCanceled && prev.Status != store.StatusCanceled:
			typ = webhook.TypeSubscriptionCanceled
		}
		data := map[string]any{"subscriptionId": row.ProcessorID, "subjectId": row.SubjectID, "planKey": row.PlanKey,
			"status": row.Status, "cancelAtPeriodEnd": row.CancelAtPeriodEnd}
		if row.CurrentPeriodEnd != nil {
			data["currentPeriodEnd"] = row.CurrentPeriodEnd.UTC()
		}
		if err := s.emit(ctx, tx, row.ProjectID, row.EnvironmentID, typ, data); err != nil {
			return err
		}
	}
	if !existed || prev.PlanKey != row.PlanKey || prev.Status != row.Status || prev.SubjectID != row.SubjectID {
		return s.entitlementsChanged(ctx, tx, row.ProjectID, row.EnvironmentID, row.SubjectID, "subscription")
	}
	return nil
}

// entitlementsChanged emits entitlements.changed for subjectID ("" emits nothing): the
// receiver reads the subject's entitlements afresh. reason is subscription or grant.
func (s *Server) entitlementsChanged(ctx context.Context, tx *store.Tx, projectID, environmentID, subjectID, reason string) error {
	if subjectID == "" {
		return nil
	}
	return s.emit(ctx, tx, projectID, environmentID, webhook.TypeEntitlementsChanged,
		map[string]any{"subjectId": subjectID, "reason": reason})
}

// invoicePaid emits invoice.paid for inv, first paid now.
func (s *Server) invoicePaid(ctx context.Context, tx *store.Tx, inv store.Invoice) error {
	data := map[string]any{"invoiceId": inv.ProcessorID, "subjectId": inv.SubjectID, "subscriptionId": inv.SubscriptionID,
		"amount": inv.Amount, "currency": inv.Currency}
	if inv.PaidAt != nil {
		data["paidAt"] = inv.PaidAt.UTC()
	}
	return s.emit(ctx, tx, inv.ProjectID, inv.EnvironmentID, webhook.TypeInvoicePaid, data)
}

// emit writes one event of the project for its subscribed endpoints, in tx.
func (s *Server) emit(ctx context.Context, tx *store.Tx, projectID, environmentID, typ string, data map[string]any) error {
	return s.webhooks.Emit(ctx, tx, webhook.Event{Type: typ, ProjectID: projectID, EnvironmentID: environmentID, Data: data})
}
