package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Processor connection providers and modes.
const (
	ProviderStripe = "stripe"
	ModeTest       = "test"
	ModeLive       = "live"
)

// ProcessorConnection is an environment's connection to the payment processor (Stripe).
// SecretKey and WebhookSecret are sealed by the caller (package store/seal) with
// ProcessorSecretKeyAAD and ProcessorWebhookSecretAAD; the store never sees their plaintext.
// KeyLast4 and Mode are what may be shown.
type ProcessorConnection struct {
	ID            string
	EnvironmentID string
	Provider      string
	Mode          string
	KeyLast4      string
	SecretKey     string
	WebhookSecret string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// ProcessorSecretKeyAAD binds a sealed processor secret key to its environment.
func ProcessorSecretKeyAAD(environmentID string) []byte {
	return []byte("processor-secret-key:" + environmentID)
}

// ProcessorWebhookSecretAAD binds a sealed webhook signing secret to its environment.
func ProcessorWebhookSecretAAD(environmentID string) []byte {
	return []byte("processor-webhook-secret:" + environmentID)
}

const processorColumns = "id, environment_id, provider, mode, key_last4, secret_key, webhook_secret, created_at, updated_at"

type processorRow struct {
	ID            string  `db:"id"`
	EnvironmentID string  `db:"environment_id"`
	Provider      string  `db:"provider"`
	Mode          string  `db:"mode"`
	KeyLast4      string  `db:"key_last4"`
	SecretKey     string  `db:"secret_key"`
	WebhookSecret string  `db:"webhook_secret"`
	CreatedAt     sqlTime `db:"created_at"`
	UpdatedAt     sqlTime `db:"updated_at"`
}

func (r processorRow) connection() ProcessorConnection {
	return ProcessorConnection{ID: r.ID, EnvironmentID: r.EnvironmentID, Provider: r.Provider, Mode: r.Mode,
		KeyLast4: r.KeyLast4, SecretKey: r.SecretKey, WebhookSecret: r.WebhookSecret,
		CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt)}
}

// PutProcessorConnection creates or replaces the connection of c.EnvironmentID and returns it
// with whether it was created. A replace keeps ID and CreatedAt.
//
// It returns ErrInvalid when a field is empty, Provider or Mode is unknown or a secret looks
// unsealed (JSON text or a plain key prefix), and ErrNotFound when the environment does not
// exist.
func (tx *Tx) PutProcessorConnection(ctx context.Context, c ProcessorConnection) (ProcessorConnection, bool, error) {
	const op = "put processor connection"
	switch {
	case c.EnvironmentID == "" || c.KeyLast4 == "" || c.SecretKey == "" || c.WebhookSecret == "":
		return ProcessorConnection{}, false, fmt.Errorf("store: %s: %w: missing field", op, ErrInvalid)
	case c.Provider != ProviderStripe || (c.Mode != ModeTest && c.Mode != ModeLive):
		return ProcessorConnection{}, false, fmt.Errorf("store: %s: %w: provider or mode", op, ErrInvalid)
	case !looksSealed(c.SecretKey) || !looksSealed(c.WebhookSecret):
		return ProcessorConnection{}, false, fmt.Errorf("store: %s: %w: secrets must be sealed", op, ErrInvalid)
	}
	_, err := tx.ProcessorConnection(ctx, c.EnvironmentID)
	created := errors.Is(err, ErrNotFound)
	if err != nil && !created {
		return ProcessorConnection{}, false, err
	}
	now := sqlTime(tx.store.Now())
	const upsert = `INSERT INTO processor_connections (` + processorColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (environment_id) DO UPDATE SET provider = excluded.provider, mode = excluded.mode,
			key_last4 = excluded.key_last4, secret_key = excluded.secret_key,
			webhook_secret = excluded.webhook_secret, updated_at = excluded.updated_at
		RETURNING ` + processorColumns
	var r processorRow
	err = tx.tx.GetContext(ctx, &r, tx.tx.Rebind(upsert), NewID("pcn"), c.EnvironmentID, c.Provider, c.Mode,
		c.KeyLast4, c.SecretKey, c.WebhookSecret, now, now)
	if err != nil {
		return ProcessorConnection{}, false, wrapWriteError(op, err)
	}
	return r.connection(), created, nil
}

// looksSealed refuses the obvious plaintexts: JSON text and Stripe key prefixes. Sealed
// values are "v1.<keyID>.<base64url>" (package store/seal).
func looksSealed(v string) bool {
	return len(v) > 3 && v[:3] == "v1." && !json.Valid([]byte(v))
}

// ProcessorConnection returns the connection of environment envID, or ErrNotFound.
func (r reads) ProcessorConnection(ctx context.Context, envID string) (ProcessorConnection, error) {
	var row processorRow
	query := "SELECT " + processorColumns + " FROM processor_connections WHERE environment_id = ?"
	if err := r.q.GetContext(ctx, &row, r.q.Rebind(query), envID); err != nil {
		return ProcessorConnection{}, wrapError("processor connection", err)
	}
	return row.connection(), nil
}

// DeleteProcessorConnection deletes the connection of environment envID and returns it as it
// was; ErrNotFound when there is none.
func (tx *Tx) DeleteProcessorConnection(ctx context.Context, envID string) (ProcessorConnection, error) {
	const op = "delete processor connection"
	c, err := tx.ProcessorConnection(ctx, envID)
	if err != nil {
		return ProcessorConnection{}, err
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind("DELETE FROM processor_connections WHERE environment_id = ?"), envID)
	if err := oneRowAffected(op, res, err); err != nil {
		return ProcessorConnection{}, err
	}
	return c, nil
}

// Environment returns the environment id, or ErrNotFound.
func (r reads) Environment(ctx context.Context, id string) (Environment, error) {
	var row struct {
		ID        string  `db:"id"`
		ProjectID string  `db:"project_id"`
		Name      string  `db:"name"`
		CreatedAt sqlTime `db:"created_at"`
	}
	query := "SELECT id, project_id, name, created_at FROM environments WHERE id = ?"
	if err := r.q.GetContext(ctx, &row, r.q.Rebind(query), id); err != nil {
		return Environment{}, wrapError("environment", err)
	}
	return Environment{ID: row.ID, ProjectID: row.ProjectID, Name: row.Name, CreatedAt: time.Time(row.CreatedAt)}, nil
}

// ---- Plans ----

// Plan intervals.
const (
	IntervalMonth   = "month"
	IntervalYear    = "year"
	IntervalOneTime = "one_time"
)

// Plan is a billing plan of a project; Key is unique within the project, archived plans
// included. Amount is in the currency's minor units. PriceIDs maps environment ids to Stripe
// price ids. Entitlements maps feature keys to a bool or a json.Number.
type Plan struct {
	ID           string
	ProjectID    string
	Key          string
	Name         string
	Description  *string
	Amount       int64
	Currency     string
	Interval     string
	PriceIDs     map[string]string
	Entitlements map[string]any
	CreatedAt    time.Time
	UpdatedAt    time.Time
	ArchivedAt   *time.Time
}

const planColumns = "id, project_id, key, name, description, amount, currency, billing_interval, price_ids, entitlements, created_at, updated_at, archived_at"

type planRow struct {
	ID           string         `db:"id"`
	ProjectID    string         `db:"project_id"`
	Key          string         `db:"key"`
	Name         string         `db:"name"`
	Description  sql.NullString `db:"description"`
	Amount       int64          `db:"amount"`
	Currency     string         `db:"currency"`
	Interval     string         `db:"billing_interval"`
	PriceIDs     string         `db:"price_ids"`
	Entitlements string         `db:"entitlements"`
	CreatedAt    sqlTime        `db:"created_at"`
	UpdatedAt    sqlTime        `db:"updated_at"`
	ArchivedAt   *sqlTime       `db:"archived_at"`
}

func (r planRow) plan() (Plan, error) {
	p := Plan{ID: r.ID, ProjectID: r.ProjectID, Key: r.Key, Name: r.Name, Description: nullStringPtr(r.Description),
		Amount: r.Amount, Currency: r.Currency, Interval: r.Interval,
		CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt), ArchivedAt: timePtr(r.ArchivedAt)}
	if err := json.Unmarshal([]byte(r.PriceIDs), &p.PriceIDs); err != nil {
		return Plan{}, fmt.Errorf("plan %s price ids: %w", r.ID, err)
	}
	var err error
	if p.Entitlements, err = decodeEntitlements(r.Entitlements); err != nil {
		return Plan{}, fmt.Errorf("plan %s entitlements: %w", r.ID, err)
	}
	return p, nil
}

// decodeEntitlements reads a JSON object of booleans and numbers (json.Number).
func decodeEntitlements(text string) (map[string]any, error) {
	var m map[string]any
	if err := decodeJSONNumbers(text, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// encodePlan checks p and returns its JSON columns.
func encodePlan(p *Plan) (priceIDs, entitlements string, err error) {
	switch {
	case p.ProjectID == "" || p.Key == "" || p.Name == "" || p.Currency == "":
		return "", "", fmt.Errorf("%w: missing field", ErrInvalid)
	case p.Amount < 0:
		return "", "", fmt.Errorf("%w: negative amount", ErrInvalid)
	case p.Interval != IntervalMonth && p.Interval != IntervalYear && p.Interval != IntervalOneTime:
		return "", "", fmt.Errorf("%w: interval %q", ErrInvalid, p.Interval)
	}
	if p.PriceIDs == nil {
		p.PriceIDs = map[string]string{}
	}
	if p.Entitlements == nil {
		p.Entitlements = map[string]any{}
	}
	for k, v := range p.Entitlements {
		if !IsEntitlementValue(v) {
			return "", "", fmt.Errorf("%w: entitlement %q is neither a boolean nor a number", ErrInvalid, k)
		}
	}
	a, err := json.Marshal(p.PriceIDs)
	if err != nil {
		return "", "", err
	}
	b, err := json.Marshal(p.Entitlements)
	if err != nil {
		return "", "", fmt.Errorf("%w: entitlements: %v", ErrInvalid, err)
	}
	return string(a), string(b), nil
}

// IsEntitlementValue reports whether v is a bool or a number (json.Number, float64, int or
// int64).
func IsEntitlementValue(v any) bool {
	switch v.(type) {
	case bool, json.Number, float64, int, int64:
		return true
	}
	return false
}

// CreatePlan inserts p, filling in ID (NewID("pln")), CreatedAt and UpdatedAt; ArchivedAt is
// ignored. It returns ErrInvalid for a malformed plan, ErrConflict when the project has a plan
// with p.Key, and ErrNotFound when the project does not exist.
func (tx *Tx) CreatePlan(ctx context.Context, p *Plan) error {
	const op = "create plan"
	prices, ents, err := encodePlan(p)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if p.ID == "" {
		p.ID = NewID("pln")
	}
	p.CreatedAt, p.UpdatedAt = tx.stamps(time.Time{}, time.Time{})
	p.ArchivedAt = nil
	query := `INSERT INTO billing_plans (` + planColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(query), p.ID, p.ProjectID, p.Key, p.Name, p.Description, p.Amount,
		p.Currency, p.Interval, prices, ents, sqlTime(p.CreatedAt), sqlTime(p.UpdatedAt))
	if err != nil {
		return wrapWriteError(op, err)
	}
	return nil
}

// UpdatePlan writes p's name, description, amount, currency, interval, price ids and
// entitlements over the active plan p.ID of p.ProjectID and sets UpdatedAt. It returns
// ErrNotFound when there is no such plan, ErrArchived when it is archived, ErrInvalid for a
// malformed plan.
func (tx *Tx) UpdatePlan(ctx context.Context, p *Plan) error {
	const op = "update plan"
	prices, ents, err := encodePlan(p)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	current, err := tx.Plan(ctx, p.ProjectID, p.ID)
	if err != nil {
		return err
	}
	if current.ArchivedAt != nil {
		return fmt.Errorf("store: %s: %w", op, ErrArchived)
	}
	p.UpdatedAt = tx.store.Now()
	query := `UPDATE billing_plans SET name = ?, description = ?, amount = ?, currency = ?, billing_interval = ?,
		price_ids = ?, entitlements = ?, updated_at = ? WHERE project_id = ? AND id = ? AND archived_at IS NULL`
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(query), p.Name, p.Description, p.Amount, p.Currency, p.Interval,
		prices, ents, sqlTime(p.UpdatedAt), p.ProjectID, p.ID)
	if err := oneRowAffected(op, res, err); err != nil {
		return err
	}
	p.Key, p.CreatedAt, p.ArchivedAt = current.Key, current.CreatedAt, nil
	return nil
}

// SetPlanArchived archives or restores plan id of project projectID and returns it; a plan
// already in that state is returned unchanged (changed false). ErrNotFound when there is no
// such plan.
func (tx *Tx) SetPlanArchived(ctx context.Context, projectID, id string, archived bool) (Plan, bool, error) {
	const op = "set plan archived"
	query := `UPDATE billing_plans SET archived_at = NULL, updated_at = ? WHERE project_id = ? AND id = ? AND archived_at IS NOT NULL`
	now := sqlTime(tx.store.Now())
	args := []any{now, projectID, id}
	if archived {
		query = `UPDATE billing_plans SET archived_at = ?, updated_at = ? WHERE project_id = ? AND id = ? AND archived_at IS NULL`
		args = []any{now, now, projectID, id}
	}
	n, err := tx.execCount(ctx, op, query, args...)
	if err != nil {
		return Plan{}, false, err
	}
	p, err := tx.Plan(ctx, projectID, id)
	return p, n == 1, err
}

// Plan returns plan id of project projectID, archived or not; ErrNotFound when there is none.
func (r reads) Plan(ctx context.Context, projectID, id string) (Plan, error) {
	return r.getPlan(ctx, "plan", "project_id = ? AND id = ?", projectID, id)
}

// PlanByKey returns the plan key of project projectID, archived or not; ErrNotFound when
// there is none.
func (r reads) PlanByKey(ctx context.Context, projectID, key string) (Plan, error) {
	return r.getPlan(ctx, "plan by key", "project_id = ? AND key = ?", projectID, key)
}

func (r reads) getPlan(ctx context.Context, op, where string, args ...any) (Plan, error) {
	var row planRow
	if err := r.q.GetContext(ctx, &row, r.q.Rebind("SELECT "+planColumns+" FROM billing_plans WHERE "+where), args...); err != nil {
		return Plan{}, wrapError(op, err)
	}
	p, err := row.plan()
	if err != nil {
		return Plan{}, fmt.Errorf("store: %s: %w", op, err)
	}
	return p, nil
}

// ListPlans returns the plans of project projectID selected by state, by key. ErrInvalid for
// an unknown state.
func (r reads) ListPlans(ctx context.Context, projectID string, state State) ([]Plan, error) {
	const op = "list plans"
	archived, err := state.condition("archived_at")
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	var rows []planRow
	query := "SELECT " + planColumns + " FROM billing_plans WHERE project_id = ? AND " + archived + " ORDER BY key"
	if err := r.q.SelectContext(ctx, &rows, r.q.Rebind(query), projectID); err != nil {
		return nil, wrapError(op, err)
	}
	out := make([]Plan, len(rows))
	for i, row := range rows {
		if out[i], err = row.plan(); err != nil {
			return nil, fmt.Errorf("store: %s: %w", op, err)
		}
	}
	return out, nil
}

// ---- Checkout idempotency ----

// CheckoutReservationTimeout is how long a reserved, never completed checkout key blocks its
// retries (the process that reserved it died during the processor call); after it a retry
// takes the reservation over. The processor call is bounded well below it.
const CheckoutReservationTimeout = 2 * time.Minute

// CheckoutRequest is a checkout idempotency record: the request hash and, once the processor
// answered, the response body (JSON text). Response is nil while the request is in progress.
type CheckoutRequest struct {
	ProjectID      string
	IdempotencyKey string
	RequestHash    string
	Response       *string
	ReservedAt     time.Time
	CompletedAt    *time.Time
}

// ReserveCheckout reserves (projectID, key) for a request with hash in tx and returns
// reserved true, or returns the existing record with reserved false. A record reserved more
// than CheckoutReservationTimeout ago and never completed is taken over (reserved true, with
// the new hash). On PostgreSQL a concurrent reservation of the same key waits for the first
// transaction and then sees its row.
func (tx *Tx) ReserveCheckout(ctx context.Context, projectID, key, hash string) (CheckoutRequest, bool, error) {
	const op = "reserve checkout"
	now := tx.store.Now()
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO checkout_requests
		(project_id, idempotency_key, request_hash, response, reserved_at, completed_at)
		VALUES (?, ?, ?, NULL, ?, NULL) ON CONFLICT (project_id, idempotency_key) DO NOTHING`),
		projectID, key, hash, sqlTime(now))
	if err != nil {
		return CheckoutRequest{}, false, wrapWriteError(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return CheckoutRequest{}, false, wrapError(op, err)
	} else if n == 1 {
		return CheckoutRequest{ProjectID: projectID, IdempotencyKey: key, RequestHash: hash, ReservedAt: now}, true, nil
	}
	var row struct {
		Hash        string         `db:"request_hash"`
		Response    sql.NullString `db:"response"`
		ReservedAt  sqlTime        `db:"reserved_at"`
		CompletedAt *sqlTime       `db:"completed_at"`
	}
	query := `SELECT request_hash, response, reserved_at, completed_at FROM checkout_requests
		WHERE project_id = ? AND idempotency_key = ?` + tx.store.dialect.lockClause(lockForUpdate)
	if err := tx.tx.GetContext(ctx, &row, tx.tx.Rebind(query), projectID, key); err != nil {
		return CheckoutRequest{}, false, wrapError(op, err)
	}
	existing := CheckoutRequest{ProjectID: projectID, IdempotencyKey: key, RequestHash: row.Hash,
		Response: nullStringPtr(row.Response), ReservedAt: time.Time(row.ReservedAt), CompletedAt: timePtr(row.CompletedAt)}
	if existing.Response == nil && now.Sub(existing.ReservedAt) > CheckoutReservationTimeout {
		_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE checkout_requests SET request_hash = ?, reserved_at = ?
			WHERE project_id = ? AND idempotency_key = ? AND response IS NULL`), hash, sqlTime(now), projectID, key)
		if err != nil {
			return CheckoutRequest{}, false, wrapError(op, err)
		}
		return CheckoutRequest{ProjectID: projectID, IdempotencyKey: key, RequestHash: hash, ReservedAt: now}, true, nil
	}
	return existing, false, nil
}

// CompleteCheckout stores the response of the reserved request (projectID, key). ErrNotFound
// when there is no reservation in progress.
func (tx *Tx) CompleteCheckout(ctx context.Context, projectID, key, response string) error {
	const op = "complete checkout"
	if !json.Valid([]byte(response)) {
		return fmt.Errorf("store: %s: %w: response is not JSON", op, ErrInvalid)
	}
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE checkout_requests SET response = ?, completed_at = ?
		WHERE project_id = ? AND idempotency_key = ? AND response IS NULL`), response, sqlTime(tx.store.Now()), projectID, key)
	return oneRowAffected(op, res, err)
}

// ReleaseCheckout deletes the reservation (projectID, key) when it is still in progress, so
// that a retry calls the processor again. Releasing a completed or missing record does nothing.
func (tx *Tx) ReleaseCheckout(ctx context.Context, projectID, key string) error {
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM checkout_requests
		WHERE project_id = ? AND idempotency_key = ? AND response IS NULL`), projectID, key)
	if err != nil {
		return wrapError("release checkout", err)
	}
	return nil
}

// decodeJSONNumbers decodes JSON text into v keeping numbers as json.Number.
func decodeJSONNumbers(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	return dec.Decode(v)
}
