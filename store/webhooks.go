package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Outbound webhooks: endpoints per project, the events delivered to them and one row per
// delivery attempt. Delivery itself runs through the outbox (identity/outbox, kind "webhook");
// identity/webhook builds events and delivers them.

// Reasons an endpoint is disabled.
const (
	WebhookDisabledManual  = "manual"
	WebhookDisabledFailing = "failing"
)

// Statuses of a delivery attempt.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// WebhookEndpoint is a receiver of a project's events.
type WebhookEndpoint struct {
	ID        string
	ProjectID string
	// EnvironmentID, when set, limits the endpoint to that environment's events.
	EnvironmentID string
	URL           string
	Description   string
	// EventTypes are the types it receives; ["*"] is every type.
	EventTypes []string
	// Secret is the sealed signing secret (AAD WebhookSecretAAD); PreviousSecret the sealed
	// secret a rotation replaced (AAD WebhookPreviousSecretAAD), which signs too until
	// PreviousSecretExpiresAt; "" when none.
	Secret                  string
	PreviousSecret          string
	PreviousSecretExpiresAt *time.Time
	// DisabledAt is set while the endpoint is disabled, for DisabledReason.
	DisabledAt     *time.Time
	DisabledReason string
	// FailingSince is the first failed attempt of the current run of failures.
	FailingSince *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Subscribes reports whether e receives events of type typ in environment env ("" for an
// event of no environment): e is enabled, subscribes to typ or "*", and has no environment or
// env's.
func (e WebhookEndpoint) Subscribes(typ, env string) bool {
	if e.DisabledAt != nil || (e.EnvironmentID != "" && e.EnvironmentID != env) {
		return false
	}
	return slices.Contains(e.EventTypes, "*") || slices.Contains(e.EventTypes, typ)
}

// WebhookSecretAAD binds a sealed endpoint secret to its endpoint.
func WebhookSecretAAD(id string) []byte { return []byte("webhook_endpoint:secret:" + id) }

// WebhookPreviousSecretAAD binds a sealed previous endpoint secret to its endpoint.
func WebhookPreviousSecretAAD(id string) []byte {
	return []byte("webhook_endpoint:previous_secret:" + id)
}

// NewWebhookEndpointID returns a new endpoint id ("whe_" + a ULID), for callers that seal the
// secret to the id before they create the endpoint.
func NewWebhookEndpointID() string { return NewID("whe") }

type webhookEndpointRow struct {
	ID                      string         `db:"id"`
	ProjectID               string         `db:"project_id"`
	EnvironmentID           sql.NullString `db:"environment_id"`
	URL                     string         `db:"url"`
	Description             string         `db:"description"`
	EventTypes              string         `db:"event_types"`
	Secret                  string         `db:"secret"`
	PreviousSecret          sql.NullString `db:"previous_secret"`
	PreviousSecretExpiresAt *sqlTime       `db:"previous_secret_expires_at"`
	DisabledAt              *sqlTime       `db:"disabled_at"`
	DisabledReason          sql.NullString `db:"disabled_reason"`
	FailingSince            *sqlTime       `db:"failing_since"`
	CreatedAt               sqlTime        `db:"created_at"`
	UpdatedAt               sqlTime        `db:"updated_at"`
}

const webhookEndpointColumns = `id, project_id, environment_id, url, description, event_types, secret,
	previous_secret, previous_secret_expires_at, disabled_at, disabled_reason, failing_since, created_at, updated_at`

func (r webhookEndpointRow) endpoint() (WebhookEndpoint, error) {
	e := WebhookEndpoint{ID: r.ID, ProjectID: r.ProjectID, EnvironmentID: r.EnvironmentID.String, URL: r.URL,
		Description: r.Description, Secret: r.Secret, PreviousSecret: r.PreviousSecret.String,
		PreviousSecretExpiresAt: timePtr(r.PreviousSecretExpiresAt), DisabledAt: timePtr(r.DisabledAt),
		DisabledReason: r.DisabledReason.String, FailingSince: timePtr(r.FailingSince),
		CreatedAt: time.Time(r.CreatedAt), UpdatedAt: time.Time(r.UpdatedAt)}
	if err := json.Unmarshal([]byte(r.EventTypes), &e.EventTypes); err != nil {
		return WebhookEndpoint{}, fmt.Errorf("webhook endpoint %s: event types: %w", r.ID, err)
	}
	return e, nil
}

// CreateWebhookEndpoint writes e (ID, ProjectID, URL, EventTypes and Secret required, else
// ErrInvalid) and sets its timestamps.
func (tx *Tx) CreateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) error {
	const op = "create webhook endpoint"
	if e.ID == "" || e.ProjectID == "" || e.URL == "" || len(e.EventTypes) == 0 || e.Secret == "" {
		return fmt.Errorf("store: %s: %w: id, project, url, event types and secret are required", op, ErrInvalid)
	}
	types, err := json.Marshal(e.EventTypes)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	now := tx.store.Now()
	e.CreatedAt, e.UpdatedAt = now, now
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO webhook_endpoints (id, project_id, environment_id,
		url, description, event_types, secret, disabled_at, disabled_reason, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.ID, e.ProjectID, nullString(e.EnvironmentID), e.URL, e.Description, string(types), e.Secret,
		sqlTimePtr(e.DisabledAt), nullString(e.DisabledReason), sqlTime(now), sqlTime(now))
	return wrapErrorOrNil(op, err)
}

// UpdateWebhookEndpoint writes e's URL, description, event types, environment, secrets,
// disabled state and failing run over the stored endpoint of e.ProjectID, and sets
// UpdatedAt. ErrNotFound when there is none.
func (tx *Tx) UpdateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) error {
	const op = "update webhook endpoint"
	types, err := json.Marshal(e.EventTypes)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	e.UpdatedAt = tx.store.Now()
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE webhook_endpoints SET environment_id = ?, url = ?,
		description = ?, event_types = ?, secret = ?, previous_secret = ?, previous_secret_expires_at = ?,
		disabled_at = ?, disabled_reason = ?, failing_since = ?, updated_at = ? WHERE id = ? AND project_id = ?`),
		nullString(e.EnvironmentID), e.URL, e.Description, string(types), e.Secret, nullString(e.PreviousSecret),
		sqlTimePtr(e.PreviousSecretExpiresAt), sqlTimePtr(e.DisabledAt), nullString(e.DisabledReason),
		sqlTimePtr(e.FailingSince), sqlTime(e.UpdatedAt), e.ID, e.ProjectID)
	return oneRowAffected(op, res, err)
}

// DeleteWebhookEndpoint deletes endpoint id of projectID with its delivery history.
// ErrNotFound when there is none.
func (tx *Tx) DeleteWebhookEndpoint(ctx context.Context, projectID, id string) error {
	res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`DELETE FROM webhook_endpoints WHERE id = ? AND project_id = ?`), id, projectID)
	return oneRowAffected("delete webhook endpoint", res, err)
}

// WebhookEndpoint returns endpoint id of projectID ("" projectID: of any project), or
// ErrNotFound.
func (s *Store) WebhookEndpoint(ctx context.Context, projectID, id string) (WebhookEndpoint, error) {
	var r webhookEndpointRow
	err := s.reader.GetContext(ctx, &r, s.reader.Rebind(`SELECT `+webhookEndpointColumns+` FROM webhook_endpoints
		WHERE id = ? AND (project_id = ? OR ? = '')`), id, projectID, projectID)
	if err != nil {
		return WebhookEndpoint{}, wrapError("webhook endpoint", err)
	}
	return r.endpoint()
}

// WebhookEndpointForUpdate is WebhookEndpoint read within tx.
func (tx *Tx) WebhookEndpointForUpdate(ctx context.Context, projectID, id string) (WebhookEndpoint, error) {
	var r webhookEndpointRow
	err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(`SELECT `+webhookEndpointColumns+` FROM webhook_endpoints
		WHERE id = ? AND project_id = ?`+tx.store.dialect.lockClause(lockForUpdate)), id, projectID)
	if err != nil {
		return WebhookEndpoint{}, wrapError("webhook endpoint", err)
	}
	return r.endpoint()
}

// WebhookEndpoints returns projectID's endpoints, oldest first.
func (s *Store) WebhookEndpoints(ctx context.Context, projectID string) ([]WebhookEndpoint, error) {
	return selectEndpoints(ctx, s.reader, projectID)
}

// WebhookEndpoints is Store.WebhookEndpoints within tx (the event fan-out reads them in the
// transaction of the change).
func (tx *Tx) WebhookEndpoints(ctx context.Context, projectID string) ([]WebhookEndpoint, error) {
	return selectEndpoints(ctx, tx.tx, projectID)
}

type selecter interface {
	SelectContext(ctx context.Context, dest any, query string, args ...any) error
	Rebind(string) string
}

func selectEndpoints(ctx context.Context, q selecter, projectID string) ([]WebhookEndpoint, error) {
	var rows []webhookEndpointRow
	if err := q.SelectContext(ctx, &rows, q.Rebind(`SELECT `+webhookEndpointColumns+` FROM webhook_endpoints
		WHERE project_id = ? ORDER BY created_at, id`), projectID); err != nil {
		return nil, wrapError("webhook endpoints", err)
	}
	out := make([]WebhookEndpoint, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = r.endpoint(); err != nil {
			return nil, fmt.Errorf("store: webhook endpoints: %w", err)
		}
	}
	return out, nil
}

// RecordWebhookEndpointOutcome notes an attempt's outcome on endpoint id at now: a success
// ends the run of failures; a failure starts one (when none runs). It returns the endpoint as
// it is after the update, or ErrNotFound.
func (s *Store) RecordWebhookEndpointOutcome(ctx context.Context, id string, ok bool, now time.Time) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := s.InTx(ctx, func(tx *Tx) error {
		set := `failing_since = NULL`
		args := []any{id}
		if !ok {
			set = `failing_since = COALESCE(failing_since, ?)`
			args = []any{sqlTime(now), id}
		}
		res, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`UPDATE webhook_endpoints SET `+set+` WHERE id = ?`), args...)
		if err := oneRowAffected("record webhook endpoint outcome", res, err); err != nil {
			return err
		}
		var r webhookEndpointRow
		if err := tx.tx.GetContext(ctx, &r, tx.tx.Rebind(`SELECT `+webhookEndpointColumns+` FROM webhook_endpoints WHERE id = ?`), id); err != nil {
			return wrapError("record webhook endpoint outcome", err)
		}
		e, err = r.endpoint()
		return err
	})
	return e, err
}

// wrapErrorOrNil is wrapError for a non-nil err, else nil.
func wrapErrorOrNil(op string, err error) error {
	if err != nil {
		return wrapError(op, err)
	}
	return nil
}
