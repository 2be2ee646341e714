package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// ---- Processor events ----

// RecordProcessorEvent records that event eventID of environment envID is being applied, in
// the transaction that applies it. It returns false when the event was recorded before (a
// replay): the caller then applies nothing.
func (tx *Tx) RecordProcessorEvent(ctx context.Context, envID, eventID, eventType string, created time.Time) (bool, error) {
	const op = "record processor event"
	if envID == "" || eventID == "" {
		return false, fmt.Errorf("store: %s: %w: missing id", op, ErrInvalid)
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO processor_events
		(environment_id, event_id, type, event_created, received_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (environment_id, event_id) DO NOTHING`),
		envID, eventID, eventType, sqlTime(created), sqlTime(tx.store.Now()))
	if err != nil {
		return false, wrapWriteError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrapError(op, err)
	}
	return n == 1, nil
}

// ---- Subscriptions ----

// Subscription statuses (Stripe's). EntitledStatuses grant the plan's entitlements.
const (
	StatusIncomplete        = "incomplete"
	StatusIncompleteExpired = "incomplete_expired"
	StatusTrialing          = "trialing"
	StatusActive            = "active"
	StatusPastDue           = "past_due"
	StatusUnpaid            = "unpaid"
	StatusPaused            = "paused"
	StatusCanceled          = "canceled"
)

// EntitledStatuses are the subscription statuses whose plan entitlements count.
var EntitledStatuses = []string{StatusActive, StatusTrialing, StatusPastDue}

// statusRank orders statuses within one billing period, for events of the same second.
var statusRank = map[string]int{
	StatusIncomplete: 0, StatusTrialing: 1, StatusActive: 2, StatusPastDue: 3, StatusUnpaid: 4,
	StatusPaused: 4, StatusCanceled: 5, StatusIncompleteExpired: 5,
}

// terminal statuses end a subscription for good.
func terminal(status string) bool {
	return status == StatusCanceled || status == StatusIncompleteExpired
}

// Subscription is a subject's subscription in one environment (ProcessorID sub_…) or a
// one-time purchase (ProcessorID the Checkout Session's cs_…, no period). EventCreated is the
// created time of the processor event it was last updated from.
type Subscription struct {
	ID                 string
	ProjectID          string
	EnvironmentID      string
	ProcessorID        string
	SubjectID          string
	PlanKey            string
	CustomerID         string
	Status             string
	CurrentPeriodStart *time.Time
	CurrentPeriodEnd   *time.Time
	CancelAtPeriodEnd  bool
	EventCreated       time.Time
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Supersedes reports whether an update described by next may replace the stored state s.
// Nothing replaces a terminal status except nothing; a later billing period always wins and
// an earlier one never does; within one period (or without periods) a later event wins, and
// for events of the same second the status further along (incomplete < trialing < active <
// past_due < unpaid < canceled).
func (s Subscription) Supersedes(next Subscription) bool {
	if terminal(s.Status) {
		return false
	}
	if s.CurrentPeriodEnd != nil && next.CurrentPeriodEnd != nil {
		if next.CurrentPeriodEnd.Before(*s.CurrentPeriodEnd) {
			return false
		}
		if next.CurrentPeriodEnd.After(*s.CurrentPeriodEnd) {
			return true
		}
	}
	if !next.EventCreated.Equal(s.EventCreated) {
		return next.EventCreated.After(s.EventCreated)
	}
	return statusRank[next.Status] >= statusRank[s.Status]
}

const subscriptionColumns = `id, project_id, environment_id, processor_id, subject_id, plan_key, customer_id, status,
	current_period_start, current_period_end, cancel_at_period_end, event_created, created_at, updated_at`

type subscriptionRow struct {
	ID                 string   `db:"id"`
	ProjectID          string   `db:"project_id"`
	EnvironmentID      string   `db:"environment_id"`
	ProcessorID        string   `db:"processor_id"`
	SubjectID          string   `db:"subject_id"`
	PlanKey            string   `db:"plan_key"`
	CustomerID         string   `db:"customer_id"`
	Status             string   `db:"status"`
	CurrentPeriodStart *sqlTime `db:"current_period_start"`
	CurrentPeriodEnd   *sqlTime `db:"current_period_end"`
	CancelAtPeriodEnd  bool     `db:"cancel_at_period_end"`
	EventCreated       sqlTime  `db:"event_created"`
	CreatedAt          sqlTime  `db:"created_at"`
	UpdatedAt          sqlTime  `db:"updated_at"`
}

func (r subscriptionRow) subscription() Subscription {
	return Subscription{ID: r.ID, ProjectID: r.ProjectID, EnvironmentID: r.EnvironmentID, ProcessorID: r.ProcessorID,
		SubjectID: r.SubjectID, PlanKey: r.PlanKey, CustomerID: r.CustomerID, Status: r.Status,
		CurrentPeriodStart: timePtr(r.CurrentPeriodStart), CurrentPeriodEnd: timePtr(r.CurrentPeriodEnd),
		CancelAtPeriodEnd: r.CancelAtPeriodEnd, EventCreated: time.Time(r.EventCreated),
		CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt)}
}

func sqlTimePtr(t *time.Time) *sqlTime {
	if t == nil {
		return nil
	}
	v := sqlTime(t.UTC().Truncate(time.Microsecond))
	return &v
}

// SubscriptionByProcessorID returns the subscription processorID of environment envID, or
// ErrNotFound.
func (r reads) SubscriptionByProcessorID(ctx context.Context, envID, processorID string) (Subscription, error) {
	return r.getSubscription(ctx, "subscription", "environment_id = ? AND processor_id = ?", envID, processorID)
}

// SubscriptionByCustomer returns the most recently updated subscription of customer
// customerID in environment envID, or ErrNotFound.
func (r reads) SubscriptionByCustomer(ctx context.Context, envID, customerID string) (Subscription, error) {
	if customerID == "" {
		return Subscription{}, fmt.Errorf("store: subscription by customer: %w", ErrNotFound)
	}
	return r.getSubscription(ctx, "subscription by customer",
		"environment_id = ? AND customer_id = ? ORDER BY updated_at DESC, id DESC LIMIT 1", envID, customerID)
}

func (r reads) getSubscription(ctx context.Context, op, where string, args ...any) (Subscription, error) {
	var row subscriptionRow
	if err := r.q.GetContext(ctx, &row, r.q.Rebind("SELECT "+subscriptionColumns+" FROM billing_subscriptions WHERE "+where), args...); err != nil {
		return Subscription{}, wrapError(op, err)
	}
	return row.subscription(), nil
}

// ApplySubscription writes next over the stored subscription (next.EnvironmentID,
// next.ProcessorID) when Supersedes allows it, or inserts it when there is none. Empty
// SubjectID, PlanKey and CustomerID in next keep the stored values. It returns the row as it
// is afterwards and whether next was applied.
//
// It returns ErrInvalid when a required field (project, environment, processor id, status) is
// empty or a new row has no subject or plan.
func (tx *Tx) ApplySubscription(ctx context.Context, next Subscription) (Subscription, bool, error) {
	const op = "apply subscription"
	if next.ProjectID == "" || next.EnvironmentID == "" || next.ProcessorID == "" || next.Status == "" {
		return Subscription{}, false, fmt.Errorf("store: %s: %w: missing field", op, ErrInvalid)
	}
	var row subscriptionRow
	query := "SELECT " + subscriptionColumns + " FROM billing_subscriptions WHERE environment_id = ? AND processor_id = ?" +
		tx.store.dialect.lockClause(lockForUpdate)
	err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(query), next.EnvironmentID, next.ProcessorID)
	now := tx.store.Now()
	if errors.Is(err, sql.ErrNoRows) {
		if next.SubjectID == "" || next.PlanKey == "" {
			return Subscription{}, false, fmt.Errorf("store: %s: %w: a new subscription needs a subject and a plan", op, ErrInvalid)
		}
		next.ID, next.CreatedAt, next.UpdatedAt = NewID("sub"), now, now
		_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO billing_subscriptions (`+subscriptionColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			next.ID, next.ProjectID, next.EnvironmentID, next.ProcessorID, next.SubjectID, next.PlanKey, next.CustomerID,
			next.Status, sqlTimePtr(next.CurrentPeriodStart), sqlTimePtr(next.CurrentPeriodEnd), next.CancelAtPeriodEnd,
			sqlTime(next.EventCreated), sqlTime(now), sqlTime(now))
		if err != nil {
			return Subscription{}, false, wrapWriteError(op, err)
		}
		out, err := tx.SubscriptionByProcessorID(ctx, next.EnvironmentID, next.ProcessorID)
		return out, true, err
	}
	if err != nil {
		return Subscription{}, false, wrapError(op, err)
	}
	stored := row.subscription()
	if !stored.Supersedes(next) {
		return stored, false, nil
	}
	keep := func(v, old string) string {
		if v == "" {
			return old
		}
		return v
	}
	if next.CurrentPeriodEnd == nil {
		next.CurrentPeriodStart, next.CurrentPeriodEnd = stored.CurrentPeriodStart, stored.CurrentPeriodEnd
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE billing_subscriptions SET subject_id = ?, plan_key = ?,
		customer_id = ?, status = ?, current_period_start = ?, current_period_end = ?, cancel_at_period_end = ?,
		event_created = ?, updated_at = ? WHERE id = ?`),
		keep(next.SubjectID, stored.SubjectID), keep(next.PlanKey, stored.PlanKey), keep(next.CustomerID, stored.CustomerID),
		next.Status, sqlTimePtr(next.CurrentPeriodStart), sqlTimePtr(next.CurrentPeriodEnd), next.CancelAtPeriodEnd,
		sqlTime(next.EventCreated), sqlTime(now), stored.ID)
	if err != nil {
		return Subscription{}, false, wrapError(op, err)
	}
	out, err := tx.SubscriptionByProcessorID(ctx, next.EnvironmentID, next.ProcessorID)
	return out, true, err
}

// FillSubscription sets the subject, plan and customer of the stored subscription
// (envID, processorID) where they are empty, without touching its status; it reports whether
// the row exists.
func (tx *Tx) FillSubscription(ctx context.Context, envID, processorID, subjectID, planKey, customerID string) (bool, error) {
	n, err := tx.execCount(ctx, "fill subscription", `UPDATE billing_subscriptions SET
		subject_id = CASE WHEN subject_id = '' THEN ? ELSE subject_id END,
		plan_key = CASE WHEN plan_key = '' THEN ? ELSE plan_key END,
		customer_id = CASE WHEN customer_id = '' THEN ? ELSE customer_id END
		WHERE environment_id = ? AND processor_id = ?`, subjectID, planKey, customerID, envID, processorID)
	return n == 1, err
}

// ListSubjectSubscriptions returns the subscriptions of subjectID in project projectID (of
// environment envID only, when it is not ""), most recently updated first.
func (r reads) ListSubjectSubscriptions(ctx context.Context, projectID, subjectID, envID string) ([]Subscription, error) {
	query := "SELECT " + subscriptionColumns + " FROM billing_subscriptions WHERE project_id = ? AND subject_id = ?"
	args := []any{projectID, subjectID}
	if envID != "" {
		query += " AND environment_id = ?"
		args = append(args, envID)
	}
	var rows []subscriptionRow
	if err := r.q.SelectContext(ctx, &rows, r.q.Rebind(query+" ORDER BY updated_at DESC, id DESC"), args...); err != nil {
		return nil, wrapError("list subject subscriptions", err)
	}
	out := make([]Subscription, len(rows))
	for i, row := range rows {
		out[i] = row.subscription()
	}
	return out, nil
}

// BillingState is what a subject's billing looks like at a glance: the plan and status of its
// current subscription and when the period ends (nil for a one-time purchase).
type BillingState struct {
	PlanKey          string
	Status           string
	CurrentPeriodEnd *time.Time
	EnvironmentID    string
}

// SubjectBillingState returns the billing state of subjectID in project projectID (of
// environment envID only, when it is not ""): its entitled subscription updated last, else its
// subscription updated last. ok is false when the subject has no subscription.
func (r reads) SubjectBillingState(ctx context.Context, projectID, subjectID, envID string) (state BillingState, ok bool, err error) {
	subs, err := r.ListSubjectSubscriptions(ctx, projectID, subjectID, envID)
	if err != nil || len(subs) == 0 {
		return BillingState{}, false, err
	}
	pick := subs[0]
	for _, s := range subs {
		if entitled(s.Status) {
			pick = s
			break
		}
	}
	return BillingState{PlanKey: pick.PlanKey, Status: pick.Status, CurrentPeriodEnd: pick.CurrentPeriodEnd,
		EnvironmentID: pick.EnvironmentID}, true, nil
}

func entitled(status string) bool {
	for _, s := range EntitledStatuses {
		if s == status {
			return true
		}
	}
	return false
}

// ---- Invoices ----

// Invoice statuses.
const (
	InvoicePaid          = "paid"
	InvoicePaymentFailed = "payment_failed"
)

// Invoice is an invoice the processor reported paid or failed. SubjectID and SubscriptionID
// are "" when the invoice could not be tied to one.
type Invoice struct {
	ID             string
	ProjectID      string
	EnvironmentID  string
	ProcessorID    string
	SubjectID      string
	SubscriptionID string
	Status         string
	Amount         int64
	Currency       string
	PaidAt         *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// RecordInvoice records inv (keyed by environment and processor id). A paid invoice is final:
// a later payment_failed for it changes nothing. It returns newlyPaid true exactly when this
// call moved the invoice to paid for the first time — the one moment its revenue counts.
func (tx *Tx) RecordInvoice(ctx context.Context, inv Invoice) (newlyPaid bool, err error) {
	const op = "record invoice"
	if inv.ProjectID == "" || inv.EnvironmentID == "" || inv.ProcessorID == "" ||
		(inv.Status != InvoicePaid && inv.Status != InvoicePaymentFailed) {
		return false, fmt.Errorf("store: %s: %w: missing field or unknown status", op, ErrInvalid)
	}
	var stored struct {
		ID     string `db:"id"`
		Status string `db:"status"`
	}
	err = tx.tx.GetContext(ctx, &stored, tx.tx.Rebind(`SELECT id, status FROM billing_invoices
		WHERE environment_id = ? AND processor_id = ?`+tx.store.dialect.lockClause(lockForUpdate)), inv.EnvironmentID, inv.ProcessorID)
	now := sqlTime(tx.store.Now())
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO billing_invoices (id, project_id, environment_id,
			processor_id, subject_id, subscription_id, status, amount, currency, paid_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), NewID("inv"), inv.ProjectID, inv.EnvironmentID, inv.ProcessorID,
			inv.SubjectID, inv.SubscriptionID, inv.Status, inv.Amount, inv.Currency, sqlTimePtr(inv.PaidAt), now, now)
		if err != nil {
			return false, wrapWriteError(op, err)
		}
		return inv.Status == InvoicePaid, nil
	case err != nil:
		return false, wrapError(op, err)
	case stored.Status == InvoicePaid || inv.Status == InvoicePaymentFailed && stored.Status == InvoicePaymentFailed:
		return false, nil
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE billing_invoices SET status = ?, amount = ?, currency = ?,
		paid_at = ?, subject_id = ?, subscription_id = ?, updated_at = ? WHERE id = ?`),
		inv.Status, inv.Amount, inv.Currency, sqlTimePtr(inv.PaidAt), inv.SubjectID, inv.SubscriptionID, now, stored.ID)
	if err != nil {
		return false, wrapError(op, err)
	}
	return inv.Status == InvoicePaid, nil
}

// ListSubjectInvoices returns the invoices of subjectID in project projectID, newest first.
func (r reads) ListSubjectInvoices(ctx context.Context, projectID, subjectID string) ([]Invoice, error) {
	var rows []struct {
		ID             string   `db:"id"`
		ProjectID      string   `db:"project_id"`
		EnvironmentID  string   `db:"environment_id"`
		ProcessorID    string   `db:"processor_id"`
		SubjectID      string   `db:"subject_id"`
		SubscriptionID string   `db:"subscription_id"`
		Status         string   `db:"status"`
		Amount         int64    `db:"amount"`
		Currency       string   `db:"currency"`
		PaidAt         *sqlTime `db:"paid_at"`
		CreatedAt      sqlTime  `db:"created_at"`
		UpdatedAt      sqlTime  `db:"updated_at"`
	}
	err := r.q.SelectContext(ctx, &rows, r.q.Rebind(`SELECT id, project_id, environment_id, processor_id, subject_id,
		subscription_id, status, amount, currency, paid_at, created_at, updated_at FROM billing_invoices
		WHERE project_id = ? AND subject_id = ? ORDER BY created_at DESC, id DESC`), projectID, subjectID)
	if err != nil {
		return nil, wrapError("list subject invoices", err)
	}
	out := make([]Invoice, len(rows))
	for i, x := range rows {
		out[i] = Invoice{ID: x.ID, ProjectID: x.ProjectID, EnvironmentID: x.EnvironmentID, ProcessorID: x.ProcessorID,
			SubjectID: x.SubjectID, SubscriptionID: x.SubscriptionID, Status: x.Status, Amount: x.Amount,
			Currency: x.Currency, PaidAt: timePtr(x.PaidAt), CreatedAt: time.Time(x.CreatedAt), UpdatedAt: time.Time(x.UpdatedAt)}
	}
	return out, nil
}

// ---- Entitlement grants ----

// EntitlementGrant gives a subject a feature (a bool or a json.Number) until ExpiresAt (nil:
// for good), whatever its plan.
type EntitlementGrant struct {
	ID         string
	ProjectID  string
	SubjectID  string
	FeatureKey string
	Value      any
	Reason     *string
	ExpiresAt  *time.Time
	ActorType  string
	ActorID    string
	CreatedAt  time.Time
}

// CreateEntitlementGrant inserts g, filling in ID (NewID("egr")) and CreatedAt. ErrInvalid
// for a missing field, a value that is neither a bool nor a number, or an unknown actor type;
// ErrNotFound when the project does not exist.
func (tx *Tx) CreateEntitlementGrant(ctx context.Context, g *EntitlementGrant) error {
	const op = "create entitlement grant"
	switch {
	case g.ProjectID == "" || g.SubjectID == "" || g.FeatureKey == "":
		return fmt.Errorf("store: %s: %w: missing field", op, ErrInvalid)
	case !IsEntitlementValue(g.Value):
		return fmt.Errorf("store: %s: %w: value", op, ErrInvalid)
	case g.ActorType != ActorUser && g.ActorType != ActorServiceAccount && g.ActorType != ActorSystem:
		return fmt.Errorf("store: %s: %w: actor type %q", op, ErrInvalid, g.ActorType)
	}
	value, err := json.Marshal(g.Value)
	if err != nil {
		return fmt.Errorf("store: %s: %w: %v", op, ErrInvalid, err)
	}
	g.ID, g.CreatedAt = NewID("egr"), tx.store.Now()
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO entitlement_grants (id, project_id, subject_id,
		feature_key, value, reason, expires_at, actor_type, actor_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		g.ID, g.ProjectID, g.SubjectID, g.FeatureKey, string(value), g.Reason, sqlTimePtr(g.ExpiresAt),
		g.ActorType, g.ActorID, sqlTime(g.CreatedAt))
	if err != nil {
		return wrapWriteError(op, err)
	}
	return nil
}

// Entitlement sources.
const (
	SourcePlan  = "plan"
	SourceGrant = "grant"
)

// Entitlement is one feature a subject holds and where from: SourceType SourcePlan with
// SourceID the plan key, or SourceGrant with the grant id (and the grant's ExpiresAt).
type Entitlement struct {
	FeatureKey string
	Value      any
	SourceType string
	SourceID   string
	ExpiresAt  *time.Time
}

// SubjectEntitlements returns the union of the entitlements of the plans of subjectID's
// entitled subscriptions (EntitledStatuses) in project projectID — of environment envID only,
// when it is not "" — and of its grants unexpired at now: plan items first (by plan key, then
// feature), then grants (by creation). A plan counts once however many subscriptions name it;
// archived plans count.
func (r reads) SubjectEntitlements(ctx context.Context, projectID, subjectID, envID string, now time.Time) ([]Entitlement, error) {
	const op = "subject entitlements"
	subs, err := r.ListSubjectSubscriptions(ctx, projectID, subjectID, envID)
	if err != nil {
		return nil, err
	}
	var planKeys []string
	seen := map[string]bool{}
	for _, s := range subs {
		if entitled(s.Status) && !seen[s.PlanKey] {
			seen[s.PlanKey] = true
			planKeys = append(planKeys, s.PlanKey)
		}
	}
	sort.Strings(planKeys)
	out := []Entitlement{}
	for _, key := range planKeys {
		p, err := r.PlanByKey(ctx, projectID, key)
		if errors.Is(err, ErrNotFound) {
			continue // a subscription to a plan this project does not define grants nothing
		}
		if err != nil {
			return nil, err
		}
		features := make([]string, 0, len(p.Entitlements))
		for f := range p.Entitlements {
			features = append(features, f)
		}
		sort.Strings(features)
		for _, f := range features {
			out = append(out, Entitlement{FeatureKey: f, Value: p.Entitlements[f], SourceType: SourcePlan, SourceID: p.Key})
		}
	}
	var grants []struct {
		ID         string   `db:"id"`
		FeatureKey string   `db:"feature_key"`
		Value      string   `db:"value"`
		ExpiresAt  *sqlTime `db:"expires_at"`
	}
	err = r.q.SelectContext(ctx, &grants, r.q.Rebind(`SELECT id, feature_key, value, expires_at FROM entitlement_grants
		WHERE project_id = ? AND subject_id = ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at, id`),
		projectID, subjectID, sqlTime(now.UTC()))
	if err != nil {
		return nil, wrapError(op, err)
	}
	for _, g := range grants {
		var v any
		if err := decodeJSONNumbers(g.Value, &v); err != nil {
			return nil, fmt.Errorf("store: %s: grant %s: %w", op, g.ID, err)
		}
		out = append(out, Entitlement{FeatureKey: g.FeatureKey, Value: v, SourceType: SourceGrant, SourceID: g.ID,
			ExpiresAt: timePtr(g.ExpiresAt)})
	}
	return out, nil
}
