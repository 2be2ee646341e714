package server

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The webhook endpoints of a project (identity/webhook delivers to them). Listing and reading
// need credential:read; every change credential:manage, by a user (the spec says so). Each
// change is audited, so each is also an event for the project's endpoints.

var errWebhookEndpointDisabled = Conflict("The webhook endpoint is disabled")

// ListWebhookEndpoints lists the project's endpoints, oldest first, without secrets.
func (s *Server) ListWebhookEndpoints(ctx context.Context, req gen.ListWebhookEndpointsRequestObject) (gen.ListWebhookEndpointsResponseObject, error) {
	es, err := s.store.WebhookEndpoints(ctx, req.ProjectId)
	if err != nil {
		return nil, err
	}
	out := make([]gen.WebhookEndpoint, len(es))
	for i, e := range es {
		out[i] = webhookEndpointJSON(e)
	}
	return gen.ListWebhookEndpoints200JSONResponse{Data: out}, nil
}

// CreateWebhookEndpoint registers an endpoint with a new secret, sealed at rest and returned
// this once. The URL is checked by the SSRF guard (400 on body.url).
func (s *Server) CreateWebhookEndpoint(ctx context.Context, req gen.CreateWebhookEndpointRequestObject) (gen.CreateWebhookEndpointResponseObject, error) {
	b := req.Body
	e := store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), ProjectID: req.ProjectId, URL: b.Url,
		EventTypes: b.EventTypes, Description: deref(b.Description), EnvironmentID: deref(b.EnvironmentId)}
	if err := s.checkWebhookEndpoint(ctx, e, true, b.EnvironmentId != nil); err != nil {
		return nil, err
	}
	secret := webhook.NewSecret()
	sealed, err := s.keyring.Seal([]byte(secret), store.WebhookSecretAAD(e.ID))
	if err != nil {
		return nil, err
	}
	e.Secret = sealed
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateWebhookEndpoint(ctx, &e); err != nil {
			return err
		}
		return s.auditWebhook(ctx, tx, "webhook_endpoint.create", e, map[string]any{"eventTypes": e.EventTypes})
	})
	if err != nil {
		return nil, err
	}
	return gen.CreateWebhookEndpoint201JSONResponse(webhookWithSecret(e, secret)), nil
}

// GetWebhookEndpoint returns one endpoint, without its secret.
func (s *Server) GetWebhookEndpoint(ctx context.Context, req gen.GetWebhookEndpointRequestObject) (gen.GetWebhookEndpointResponseObject, error) {
	e, err := s.store.WebhookEndpoint(ctx, req.ProjectId, req.EndpointId)
	if err != nil {
		return nil, err
	}
	return gen.GetWebhookEndpoint200JSONResponse{Data: webhookEndpointJSON(e)}, nil
}

// UpdateWebhookEndpoint changes the given fields; a new URL is checked as at creation.
func (s *Server) UpdateWebhookEndpoint(ctx context.Context, req gen.UpdateWebhookEndpointRequestObject) (gen.UpdateWebhookEndpointResponseObject, error) {
	b := req.Body
	e, err := s.changeWebhookEndpoint(ctx, req.ProjectId, req.EndpointId, "webhook_endpoint.update", func(e *store.WebhookEndpoint) error {
		if b.Url != nil {
			e.URL = *b.Url
		}
		if b.EventTypes != nil {
			e.EventTypes = *b.EventTypes
		}
		if b.Description != nil {
			e.Description = *b.Description
		}
		envGiven := b.EnvironmentId.IsSpecified()
		if envGiven {
			e.EnvironmentID = ""
			if !b.EnvironmentId.IsNull() {
				e.EnvironmentID = b.EnvironmentId.MustGet()
			}
		}
		return s.checkWebhookEndpoint(ctx, *e, b.Url != nil, envGiven && e.EnvironmentID != "")
	})
	if err != nil {
		return nil, err
	}
	return gen.UpdateWebhookEndpoint200JSONResponse{Data: webhookEndpointJSON(e)}, nil
}

// DeleteWebhookEndpoint deletes the endpoint and its attempts.
func (s *Server) DeleteWebhookEndpoint(ctx context.Context, req gen.DeleteWebhookEndpointRequestObject) (gen.DeleteWebhookEndpointResponseObject, error) {
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		e, err := tx.WebhookEndpointForUpdate(ctx, req.ProjectId, req.EndpointId)
		if err != nil {
			return err
		}
		if err := tx.DeleteWebhookEndpoint(ctx, req.ProjectId, req.EndpointId); err != nil {
			return err
		}
		return s.auditWebhook(ctx, tx, "webhook_endpoint.delete", e, nil)
	})
	if err != nil {
		return nil, err
	}
	return gen.DeleteWebhookEndpoint204Response{}, nil
}

// RotateWebhookEndpointSecret draws a new secret; the current one keeps signing for
// webhook.SecretRotationOverlap.
func (s *Server) RotateWebhookEndpointSecret(ctx context.Context, req gen.RotateWebhookEndpointSecretRequestObject) (gen.RotateWebhookEndpointSecretResponseObject, error) {
	secret := webhook.NewSecret()
	e, err := s.changeWebhookEndpoint(ctx, req.ProjectId, req.EndpointId, "webhook_endpoint.rotate_secret", func(e *store.WebhookEndpoint) error {
		current, err := s.keyring.Open(e.Secret, store.WebhookSecretAAD(e.ID))
		if err != nil {
			return err
		}
		if e.PreviousSecret, err = s.keyring.Seal(current, store.WebhookPreviousSecretAAD(e.ID)); err != nil {
			return err
		}
		until := s.store.Now().Add(webhook.SecretRotationOverlap)
		e.PreviousSecretExpiresAt = &until
		e.Secret, err = s.keyring.Seal([]byte(secret), store.WebhookSecretAAD(e.ID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return gen.RotateWebhookEndpointSecret200JSONResponse(webhookWithSecret(e, secret)), nil
}

// DisableWebhookEndpoint disables the endpoint (keeping the first disabledAt).
func (s *Server) DisableWebhookEndpoint(ctx context.Context, req gen.DisableWebhookEndpointRequestObject) (gen.DisableWebhookEndpointResponseObject, error) {
	e, err := s.changeWebhookEndpoint(ctx, req.ProjectId, req.EndpointId, "webhook_endpoint.disable", func(e *store.WebhookEndpoint) error {
		if e.DisabledAt == nil {
			now := s.store.Now()
			e.DisabledAt, e.DisabledReason = &now, store.WebhookDisabledManual
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gen.DisableWebhookEndpoint200JSONResponse{Data: webhookEndpointJSON(e)}, nil
}

// EnableWebhookEndpoint enables the endpoint; its run of failures starts over.
func (s *Server) EnableWebhookEndpoint(ctx context.Context, req gen.EnableWebhookEndpointRequestObject) (gen.EnableWebhookEndpointResponseObject, error) {
	e, err := s.changeWebhookEndpoint(ctx, req.ProjectId, req.EndpointId, "webhook_endpoint.enable", func(e *store.WebhookEndpoint) error {
		e.DisabledAt, e.DisabledReason, e.FailingSince = nil, "", nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gen.EnableWebhookEndpoint200JSONResponse{Data: webhookEndpointJSON(e)}, nil
}

// TestWebhookEndpoint queues a ping to the endpoint alone.
func (s *Server) TestWebhookEndpoint(ctx context.Context, req gen.TestWebhookEndpointRequestObject) (gen.TestWebhookEndpointResponseObject, error) {
	var id string
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		e, err := tx.WebhookEndpointForUpdate(ctx, req.ProjectId, req.EndpointId)
		if err != nil {
			return err
		}
		id, err = s.webhooks.Ping(ctx, tx, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.pokeWebhooks()
	res := gen.TestWebhookEndpoint202JSONResponse{}
	res.Data.EventId = id
	return res, nil
}

// ListWebhookDeliveries lists one page of the endpoint's attempts, newest first.
func (s *Server) ListWebhookDeliveries(ctx context.Context, req gen.ListWebhookDeliveriesRequestObject) (gen.ListWebhookDeliveriesResponseObject, error) {
	p := req.Params
	var after *store.DeliveryPosition
	if p.Cursor != nil {
		pos, ok := decodeDeliveryCursor(*p.Cursor)
		if !ok {
			return nil, Validation(FieldError{Path: []string{"query", "cursor"}, Message: "is not a cursor of this list"})
		}
		after = &pos
	}
	if _, err := s.store.WebhookEndpoint(ctx, req.ProjectId, req.EndpointId); err != nil {
		return nil, err
	}
	limit := 50
	if p.Limit != nil {
		limit = *p.Limit
	}
	ds, more, err := s.store.WebhookDeliveries(ctx, req.EndpointId, after, limit)
	if err != nil {
		return nil, err
	}
	var res gen.ListWebhookDeliveries200JSONResponse
	res.Body.Data = make([]gen.WebhookDelivery, len(ds))
	for i, d := range ds {
		res.Body.Data[i] = webhookDeliveryJSON(d)
	}
	if more {
		last := ds[len(ds)-1]
		next := encodeDeliveryCursor(store.DeliveryPosition{CreatedAt: last.CreatedAt, ID: last.ID})
		res.Headers.XNextCursor = &next
	}
	return res, nil
}

// RedeliverWebhookDelivery queues the attempt's event to its endpoint again (409 while the
// endpoint is disabled).
func (s *Server) RedeliverWebhookDelivery(ctx context.Context, req gen.RedeliverWebhookDeliveryRequestObject) (gen.RedeliverWebhookDeliveryResponseObject, error) {
	var d store.WebhookDelivery
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		e, err := tx.WebhookEndpointForUpdate(ctx, req.ProjectId, req.EndpointId)
		if err != nil {
			return err
		}
		if e.DisabledAt != nil {
			return errWebhookEndpointDisabled
		}
		if d, err = s.store.WebhookDeliveryByID(ctx, e.ID, req.DeliveryId); err != nil {
			return err
		}
		return s.webhooks.Redeliver(ctx, tx, e.ID, d.EventID, d.EventType)
	})
	if err != nil {
		return nil, err
	}
	s.pokeWebhooks()
	res := gen.RedeliverWebhookDelivery202JSONResponse{}
	res.Data.EventId = d.EventID
	return res, nil
}

// changeWebhookEndpoint reads the endpoint in a transaction, applies change, writes it and
// audits action.
func (s *Server) changeWebhookEndpoint(ctx context.Context, projectID, id, action string, change func(e *store.WebhookEndpoint) error) (store.WebhookEndpoint, error) {
	var e store.WebhookEndpoint
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if e, err = tx.WebhookEndpointForUpdate(ctx, projectID, id); err != nil {
			return err
		}
		if err := change(&e); err != nil {
			return err
		}
		if err := tx.UpdateWebhookEndpoint(ctx, &e); err != nil {
			return err
		}
		return s.auditWebhook(ctx, tx, action, e, nil)
	})
	return e, err
}

// checkWebhookEndpoint answers 400, when checkURL, for a URL the SSRF guard refuses (body.url)
// and, when checkEnv, for an environment of another project (body.environmentId).
func (s *Server) checkWebhookEndpoint(ctx context.Context, e store.WebhookEndpoint, checkURL, checkEnv bool) error {
	var errs []FieldError
	if checkURL {
		if err := s.webhookGuard.CheckURL(ctx, e.URL); err != nil {
			errs = append(errs, FieldError{Path: []string{"body", "url"}, Message: err.Error()})
		}
	}
	if checkEnv {
		err := s.checkUsageEnvironment(ctx, e.ProjectID, e.EnvironmentID, []string{"body", "environmentId"})
		var pe *Error
		if errors.As(err, &pe) {
			errs = append(errs, pe.Errors...)
		} else if err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		return Validation(errs...)
	}
	return nil
}

// auditWebhook audits action on endpoint e (never its URL's query or its secret).
func (s *Server) auditWebhook(ctx context.Context, tx *store.Tx, action string, e store.WebhookEndpoint, metadata map[string]any) error {
	org := ScopeFrom(ctx).OrganizationID
	if metadata == nil {
		metadata = map[string]any{}
	}
	if e.EnvironmentID != "" {
		metadata["endpointEnvironmentId"] = e.EnvironmentID
	}
	return audit(ctx, tx, auditEvent{Action: action, TargetType: "webhook_endpoint", TargetID: e.ID,
		OrganizationID: org, ProjectID: e.ProjectID, Metadata: metadata})
}

// pokeWebhooks wakes this replica's webhook worker, when it runs one.
func (s *Server) pokeWebhooks() {
	if s.webhookPoke != nil {
		s.webhookPoke()
	}
}

func webhookEndpointJSON(e store.WebhookEndpoint) gen.WebhookEndpoint {
	out := gen.WebhookEndpoint{Id: e.ID, ProjectId: e.ProjectID, EnvironmentId: nullableString(e.EnvironmentID),
		Url: e.URL, Description: e.Description, EventTypes: e.EventTypes, DisabledAt: nullableOf(e.DisabledAt),
		PreviousSecretExpiresAt: nullableOf(e.PreviousSecretExpiresAt), CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	out.DisabledReason = nullableOf[gen.WebhookEndpointDisabledReason](nil)
	if e.DisabledReason != "" {
		r := gen.WebhookEndpointDisabledReason(e.DisabledReason)
		out.DisabledReason = nullableOf(&r)
	}
	return out
}

// webhookWithSecret is e with its secret, shown once.
func webhookWithSecret(e store.WebhookEndpoint, secret string) gen.WebhookEndpointWithSecretResponse {
	j := webhookEndpointJSON(e)
	var out gen.WebhookEndpointWithSecretResponse
	d := &out.Data
	d.Id, d.ProjectId, d.EnvironmentId, d.Url, d.Description = j.Id, j.ProjectId, j.EnvironmentId, j.Url, j.Description
	d.EventTypes, d.DisabledAt, d.PreviousSecretExpiresAt = j.EventTypes, j.DisabledAt, j.PreviousSecretExpiresAt
	d.CreatedAt, d.UpdatedAt, d.Secret = j.CreatedAt, j.UpdatedAt, secret
	d.DisabledReason = nullableOf[gen.WebhookEndpointWithSecretResponseDataDisabledReason](nil)
	if e.DisabledReason != "" {
		r := gen.WebhookEndpointWithSecretResponseDataDisabledReason(e.DisabledReason)
		d.DisabledReason = nullableOf(&r)
	}
	return out
}

func webhookDeliveryJSON(d store.WebhookDelivery) gen.WebhookDelivery {
	out := gen.WebhookDelivery{Id: d.ID, EventId: d.EventID, EventType: gen.WebhookEventType(d.EventType),
		Status: gen.WebhookDeliveryStatus(d.Status), Attempt: d.Attempt, NextAttemptAt: nullableOf(d.NextAttemptAt),
		CreatedAt: d.CreatedAt, ResponseCode: nullableOf[int](nil), LatencyMs: nullableOf[int](nil)}
	if d.ResponseCode > 0 {
		out.ResponseCode = nullableOf(&d.ResponseCode)
	}
	if d.Status != store.DeliveryPending {
		ms := int(d.LatencyMs)
		out.LatencyMs = nullableOf(&ms)
	}
	return out
}

// A deliveries cursor is the last attempt of the page before: the unpadded base64url of its
// CreatedAt (RFC 3339 with nanoseconds), a NUL byte and its id.

func encodeDeliveryCursor(last store.DeliveryPosition) string {
	return base64.RawURLEncoding.EncodeToString([]byte(last.CreatedAt.UTC().Format(time.RFC3339Nano) + "\x00" + last.ID))
}

func decodeDeliveryCursor(cursor string) (store.DeliveryPosition, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return store.DeliveryPosition{}, false
	}
	at, id, found := strings.Cut(string(raw), "\x00")
	if !found || !strings.HasPrefix(id, "whd_") || len(id) > 64 {
		return store.DeliveryPosition{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return store.DeliveryPosition{}, false
	}
	return store.DeliveryPosition{CreatedAt: t, ID: id}, true
}
