package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// GetSubjectEntitlements returns the union of the subject's plan entitlements and unexpired
// grants, each with its source, and the folded features.
func (s *Server) GetSubjectEntitlements(ctx context.Context, req gen.GetSubjectEntitlementsRequestObject) (gen.GetSubjectEntitlementsResponseObject, error) {
	env := ""
	if req.Params.EnvironmentId != nil {
		env = *req.Params.EnvironmentId
	}
	ents, err := s.store.SubjectEntitlements(ctx, req.ProjectId, req.SubjectId, env, s.store.Now())
	if err != nil {
		return nil, err
	}
	out := gen.Entitlements{SubjectId: req.SubjectId, Entitlements: make([]gen.Entitlement, len(ents)), Features: foldEntitlements(ents)}
	for i, e := range ents {
		out.Entitlements[i] = gen.Entitlement{FeatureKey: e.FeatureKey, Value: e.Value,
			Source:    gen.EntitlementSource{Type: gen.EntitlementSourceType(e.SourceType), Id: e.SourceID},
			ExpiresAt: nullableOf(e.ExpiresAt)}
	}
	return gen.GetSubjectEntitlements200JSONResponse{Data: out}, nil
}

// CreateEntitlementGrant grants the subject a feature, audited; expiresAt must be in the future.
func (s *Server) CreateEntitlementGrant(ctx context.Context, req gen.CreateEntitlementGrantRequestObject) (gen.CreateEntitlementGrantResponseObject, error) {
	b := req.Body
	g := store.EntitlementGrant{ProjectID: req.ProjectId, SubjectID: req.SubjectId, FeatureKey: b.FeatureKey, Value: b.Value}
	if b.Reason != nil && *b.Reason != "" {
		g.Reason = b.Reason
	}
	if b.ExpiresAt != nil {
		t := b.ExpiresAt.UTC()
		if !t.After(s.store.Now()) {
			return nil, Validation(FieldError{Path: []string{"body", "expiresAt"}, Message: "must be in the future"})
		}
		g.ExpiresAt = &t
	}
	g.ActorType, g.ActorID = actor(ctx)
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateEntitlementGrant(ctx, &g); err != nil {
			return err
		}
		if err := s.auditBilling(ctx, tx, "entitlement_grant.create", "entitlement_grant", g.ID,
			map[string]any{"subjectId": g.SubjectID, "featureKey": g.FeatureKey, "value": g.Value, "expiresAt": g.ExpiresAt}); err != nil {
			return err
		}
		return s.entitlementsChanged(ctx, tx, g.ProjectID, "", g.SubjectID, "grant")
	})
	if err != nil {
		return nil, err
	}
	return gen.CreateEntitlementGrant201JSONResponse{Data: gen.EntitlementGrant{Id: g.ID, ProjectId: g.ProjectID,
		SubjectId: g.SubjectID, FeatureKey: g.FeatureKey, Value: g.Value, ExpiresAt: nullableOf(g.ExpiresAt),
		Reason: nullableOf(g.Reason), CreatedBy: gen.AuditRef{Type: g.ActorType, Id: g.ActorID}, CreatedAt: g.CreatedAt}}, nil
}

// foldEntitlements folds entitlements by feature: a boolean is true when any source grants
// it; a numeric limit is the largest one. A feature granted both as a boolean and as a number
// keeps the number when some source grants true or a number, false otherwise.
func foldEntitlements(ents []store.Entitlement) gen.EntitlementMap {
	out := gen.EntitlementMap{}
	for _, e := range ents {
		prev, seen := out[e.FeatureKey]
		if !seen {
			out[e.FeatureKey] = e.Value
			continue
		}
		pn, pIsNum := number(prev)
		n, isNum := number(e.Value)
		switch {
		case pIsNum && isNum:
			if n > pn {
				out[e.FeatureKey] = e.Value
			}
		case isNum && prev == false:
			out[e.FeatureKey] = e.Value
		case !pIsNum && !isNum:
			out[e.FeatureKey] = prev == true || e.Value == true
		}
	}
	return out
}

// number reads a numeric entitlement value.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// ProductClaims are the OAuth provider's entitlements and billing claims over the store's
// billing tables (oauth.ProductClaims): main passes them to oauth.NewProvider.
type ProductClaims struct{ Store *store.Store }

// EntitlementClaims are the `entitlements` claim of the OAuth provider: the subject's
// entitlements in the client's project, as the API lists them.
func (c ProductClaims) EntitlementClaims(ctx context.Context, projectID, subjectID string) ([]any, error) {
	ents, err := c.Store.SubjectEntitlements(ctx, projectID, subjectID, "", c.Store.Now())
	if err != nil {
		return nil, err
	}
	out := make([]any, len(ents))
	for i, e := range ents {
		item := map[string]any{"featureKey": e.FeatureKey, "value": e.Value,
			"source": map[string]string{"type": e.SourceType, "id": e.SourceID}, "expiresAt": nil}
		if e.ExpiresAt != nil {
			item["expiresAt"] = e.ExpiresAt.UTC().Format(time.RFC3339)
		}
		out[i] = item
	}
	return out, nil
}

// BillingClaims are the `billing` claim of the OAuth provider: the plan key, subscription
// status and period end of the subject's current subscription in the client's project, each
// null when it has none.
func (c ProductClaims) BillingClaims(ctx context.Context, projectID, subjectID string) (map[string]any, error) {
	out := map[string]any{"plan": nil, "status": nil, "currentPeriodEnd": nil}
	st, ok, err := c.Store.SubjectBillingState(ctx, projectID, subjectID, "")
	if err != nil || !ok {
		return out, err
	}
	out["plan"], out["status"] = st.PlanKey, st.Status
	if st.CurrentPeriodEnd != nil {
		out["currentPeriodEnd"] = st.CurrentPeriodEnd.UTC().Format(time.RFC3339)
	}
	return out, nil
}
