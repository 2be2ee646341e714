package server

import (
	"context"
	"errors"
	"strings"

	"golang.org/x/text/currency"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Billing problems with their own titles.
var (
	errPlanKeyTaken = Conflict("A plan with this key already exists")
	errPlanArchived = Conflict("Plan is archived; restore it first")
	errNotConnected = Conflict("The environment has no payment processor connection")
	errPlanNoPrice  = Conflict("The plan has no Stripe price for this environment")
)

// webhookPath is the processor webhook route of an environment, relative to the base URL.
func webhookPath(environmentID string) string {
	return "/api/v1/webhooks/processor/" + environmentID
}

// keyMode is the mode of a Stripe key from its prefix: sk_test_/rk_test_ → test,
// sk_live_/rk_live_ → live (the spec's pattern admits nothing else).
func keyMode(secretKey string) string {
	if strings.HasPrefix(secretKey, "sk_live_") || strings.HasPrefix(secretKey, "rk_live_") {
		return store.ModeLive
	}
	return store.ModeTest
}

// GetProcessorConnection shows the environment's connection without any secret.
func (s *Server) GetProcessorConnection(ctx context.Context, req gen.GetProcessorConnectionRequestObject) (gen.GetProcessorConnectionResponseObject, error) {
	c, err := s.store.ProcessorConnection(ctx, req.EnvironmentId)
	if errors.Is(err, store.ErrNotFound) {
		return gen.GetProcessorConnection200JSONResponse{Data: s.processorConnectionJSON(req.EnvironmentId, nil)}, nil
	}
	if err != nil {
		return nil, err
	}
	return gen.GetProcessorConnection200JSONResponse{Data: s.processorConnectionJSON(req.EnvironmentId, &c)}, nil
}

// PutProcessorConnection seals both secrets bound to the environment and stores them,
// audited (the audit row names the mode and last four characters, never a secret).
func (s *Server) PutProcessorConnection(ctx context.Context, req gen.PutProcessorConnectionRequestObject) (gen.PutProcessorConnectionResponseObject, error) {
	env := req.EnvironmentId
	c := store.ProcessorConnection{EnvironmentID: env, Provider: store.ProviderStripe,
		Mode: keyMode(req.Body.SecretKey), KeyLast4: req.Body.SecretKey[len(req.Body.SecretKey)-4:]}
	var err error
	if c.SecretKey, err = s.keyring.Seal([]byte(req.Body.SecretKey), store.ProcessorSecretKeyAAD(env)); err != nil {
		return nil, err
	}
	if c.WebhookSecret, err = s.keyring.Seal([]byte(req.Body.WebhookSecret), store.ProcessorWebhookSecretAAD(env)); err != nil {
		return nil, err
	}
	var created bool
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if c, created, err = tx.PutProcessorConnection(ctx, c); err != nil {
			return err
		}
		return s.auditBilling(ctx, tx, "processor_connection.update", "processor_connection", c.ID,
			map[string]any{"environmentId": env, "provider": c.Provider, "mode": c.Mode, "secretKeyLast4": c.KeyLast4, "created": created})
	})
	if err != nil {
		return nil, err
	}
	data := s.processorConnectionJSON(env, &c)
	if created {
		return gen.PutProcessorConnection201JSONResponse{Data: data}, nil
	}
	return gen.PutProcessorConnection200JSONResponse{Data: data}, nil
}

// DeleteProcessorConnection disconnects the environment, audited; 404 when not connected.
func (s *Server) DeleteProcessorConnection(ctx context.Context, req gen.DeleteProcessorConnectionRequestObject) (gen.DeleteProcessorConnectionResponseObject, error) {
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		c, err := tx.DeleteProcessorConnection(ctx, req.EnvironmentId)
		if err != nil {
			return err
		}
		return s.auditBilling(ctx, tx, "processor_connection.delete", "processor_connection", c.ID,
			map[string]any{"environmentId": req.EnvironmentId, "provider": c.Provider, "mode": c.Mode})
	})
	if err != nil {
		return nil, err
	}
	return gen.DeleteProcessorConnection200JSONResponse{Data: s.processorConnectionJSON(req.EnvironmentId, nil)}, nil
}

// processorConnectionJSON renders a connection (nil: not connected). It never carries a secret.
func (s *Server) processorConnectionJSON(envID string, c *store.ProcessorConnection) gen.ProcessorConnection {
	out := gen.ProcessorConnection{EnvironmentId: envID, Provider: gen.ProcessorProviderStripe,
		WebhookEndpointUrl: s.cfg.BaseURL + webhookPath(envID)}
	out.Mode.SetNull()
	out.SecretKeyLast4.SetNull()
	out.UpdatedAt.SetNull()
	if c != nil {
		out.Connected = true
		out.Mode.Set(gen.ProcessorConnectionMode(c.Mode))
		out.SecretKeyLast4.Set(c.KeyLast4)
		out.UpdatedAt.Set(c.UpdatedAt)
	}
	return out
}

// ---- Plans ----

// ListBillingPlans lists the project's plans by key.
func (s *Server) ListBillingPlans(ctx context.Context, req gen.ListBillingPlansRequestObject) (gen.ListBillingPlansResponseObject, error) {
	state := store.StateActive
	if req.Params.State != nil {
		state = store.State(*req.Params.State)
	}
	plans, err := s.store.ListPlans(ctx, req.ProjectId, state)
	if err != nil {
		return nil, err
	}
	out := make([]gen.BillingPlan, len(plans))
	for i, p := range plans {
		out[i] = planJSON(p)
	}
	return gen.ListBillingPlans200JSONResponse{Data: out}, nil
}

// CreateBillingPlan creates a plan; a key the project uses already is a 409.
func (s *Server) CreateBillingPlan(ctx context.Context, req gen.CreateBillingPlanRequestObject) (gen.CreateBillingPlanResponseObject, error) {
	b := req.Body
	p := store.Plan{ProjectID: req.ProjectId, Key: b.Key, Name: b.Name, Amount: b.Amount, Currency: b.Currency,
		Interval: string(b.Interval)}
	if b.Description != nil && *b.Description != "" {
		p.Description = b.Description
	}
	if b.StripePriceIds != nil {
		p.PriceIDs = *b.StripePriceIds
	}
	if b.Entitlements != nil {
		p.Entitlements = *b.Entitlements
	}
	if err := s.checkPlan(ctx, p); err != nil {
		return nil, err
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreatePlan(ctx, &p); err != nil {
			return err
		}
		return s.auditPlan(ctx, tx, "billing_plan.create", p)
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, errPlanKeyTaken
	}
	if err != nil {
		return nil, err
	}
	return gen.CreateBillingPlan201JSONResponse{Data: planJSON(p)}, nil
}

// UpdateBillingPlan changes the members sent; an archived plan is a 409.
func (s *Server) UpdateBillingPlan(ctx context.Context, req gen.UpdateBillingPlanRequestObject) (gen.UpdateBillingPlanResponseObject, error) {
	b := req.Body
	var p store.Plan
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if p, err = tx.Plan(ctx, req.ProjectId, req.PlanId); err != nil {
			return err
		}
		if p.ArchivedAt != nil {
			return errPlanArchived
		}
		if b.Name != nil {
			p.Name = *b.Name
		}
		if b.Description.IsSpecified() {
			p.Description = nil
			if v, err := b.Description.Get(); err == nil && v != "" {
				p.Description = &v
			}
		}
		if b.Amount != nil {
			p.Amount = *b.Amount
		}
		if b.Currency != nil {
			p.Currency = *b.Currency
		}
		if b.Interval != nil {
			p.Interval = string(*b.Interval)
		}
		if b.StripePriceIds != nil {
			p.PriceIDs = *b.StripePriceIds
		}
		if b.Entitlements != nil {
			p.Entitlements = *b.Entitlements
		}
		if err := s.checkPlan(ctx, p); err != nil {
			return err
		}
		if err := tx.UpdatePlan(ctx, &p); err != nil {
			return err
		}
		return s.auditPlan(ctx, tx, "billing_plan.update", p)
	})
	if err != nil {
		return nil, err
	}
	return gen.UpdateBillingPlan200JSONResponse{Data: planJSON(p)}, nil
}

// ArchiveBillingPlan archives a plan (an archived one is returned unchanged).
func (s *Server) ArchiveBillingPlan(ctx context.Context, req gen.ArchiveBillingPlanRequestObject) (gen.ArchiveBillingPlanResponseObject, error) {
	p, err := s.setPlanArchived(ctx, req.ProjectId, req.PlanId, true)
	if err != nil {
		return nil, err
	}
	return gen.ArchiveBillingPlan200JSONResponse{Data: planJSON(p)}, nil
}

// RestoreBillingPlan restores a plan (an active one is returned unchanged).
func (s *Server) RestoreBillingPlan(ctx context.Context, req gen.RestoreBillingPlanRequestObject) (gen.RestoreBillingPlanResponseObject, error) {
	p, err := s.setPlanArchived(ctx, req.ProjectId, req.PlanId, false)
	if err != nil {
		return nil, err
	}
	return gen.RestoreBillingPlan200JSONResponse{Data: planJSON(p)}, nil
}

func (s *Server) setPlanArchived(ctx context.Context, projectID, planID string, archived bool) (store.Plan, error) {
	action := "billing_plan.restore"
	if archived {
		action = "billing_plan.archive"
	}
	var p store.Plan
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var changed bool
		var err error
		if p, changed, err = tx.SetPlanArchived(ctx, projectID, planID, archived); err != nil || !changed {
			return err
		}
		return s.auditPlan(ctx, tx, action, p)
	})
	return p, err
}

// checkPlan checks what the schema cannot: the currency is an ISO 4217 code, and every price
// id is keyed by an environment of the plan's project.
func (s *Server) checkPlan(ctx context.Context, p store.Plan) error {
	var errs []FieldError
	if u, err := currency.ParseISO(p.Currency); err != nil || strings.ToLower(u.String()) != p.Currency {
		errs = append(errs, FieldError{Path: []string{"body", "currency"}, Message: "is not an ISO 4217 currency code"})
	}
	if len(p.PriceIDs) > 0 {
		prj, err := s.store.Project(ctx, p.ProjectID)
		if err != nil {
			return err
		}
		envs := map[string]bool{}
		for _, e := range prj.Environments {
			envs[e.ID] = true
		}
		for env := range p.PriceIDs {
			if !envs[env] {
				errs = append(errs, FieldError{Path: []string{"body", "stripePriceIds", env}, Message: "is not an environment of this project"})
			}
		}
	}
	if len(errs) > 0 {
		return Validation(errs...)
	}
	return nil
}

func planJSON(p store.Plan) gen.BillingPlan {
	prices := gen.StripePriceIds(p.PriceIDs)
	if prices == nil {
		prices = gen.StripePriceIds{}
	}
	ents := gen.EntitlementMap(p.Entitlements)
	if ents == nil {
		ents = gen.EntitlementMap{}
	}
	return gen.BillingPlan{Id: p.ID, ProjectId: p.ProjectID, Key: p.Key, Name: p.Name, Description: nullableOf(p.Description),
		Amount: p.Amount, Currency: p.Currency, Interval: gen.BillingPlanInterval(p.Interval),
		StripePriceIds: prices, Entitlements: ents, Archived: p.ArchivedAt != nil,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, ArchivedAt: nullableOf(p.ArchivedAt)}
}

func (s *Server) auditPlan(ctx context.Context, tx *store.Tx, action string, p store.Plan) error {
	return s.auditBilling(ctx, tx, action, "billing_plan", p.ID, map[string]any{"key": p.Key})
}

// auditBilling records a billing mutation in the organization and project the request
// addresses. Metadata never holds a secret.
func (s *Server) auditBilling(ctx context.Context, tx *store.Tx, action, targetType, targetID string, md map[string]any) error {
	scope := ScopeFrom(ctx)
	return audit(ctx, tx, auditEvent{Action: action, TargetType: targetType, TargetID: targetID,
		OrganizationID: scope.OrganizationID, ProjectID: scope.ProjectID, Metadata: md})
}
