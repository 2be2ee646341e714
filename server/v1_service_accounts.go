package server

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Service accounts and their API keys. A key is shown once, in the response that mints it; the
// store keeps identity.HashAPIKeySecret of its secret, and audit rows name a key by its public id
// only.

// ListServiceAccounts lists a project's service accounts with their keys' public ids and states.
func (s *Server) ListServiceAccounts(ctx context.Context, req gen.ListServiceAccountsRequestObject) (gen.ListServiceAccountsResponseObject, error) {
	accounts, err := s.store.ListServiceAccounts(ctx, req.ProjectId)
	if err != nil {
		return nil, err
	}
	out := make([]gen.ServiceAccount, len(accounts))
	for i, sa := range accounts {
		out[i] = serviceAccountJSON(sa)
	}
	return gen.ListServiceAccounts200JSONResponse{Data: out}, nil
}

// CreateServiceAccount creates a service account with its first API key, returned this once.
func (s *Server) CreateServiceAccount(ctx context.Context, req gen.CreateServiceAccountRequestObject) (gen.CreateServiceAccountResponseObject, error) {
	body := req.Body
	var problems []FieldError
	for i, scope := range body.Scopes {
		if !knownScope(scope) {
			problems = append(problems, FieldError{
				Path:    []string{"body", "scopes", strconv.Itoa(i)},
				Message: "must be a control-plane permission or *",
			})
		}
	}
	if body.EnvironmentId != nil {
		ok, err := s.projectHasEnvironment(ctx, req.ProjectId, *body.EnvironmentId)
		if err != nil {
			return nil, err
		}
		if !ok {
			problems = append(problems, FieldError{
				Path: []string{"body", "environmentId"}, Message: "must be an environment of this project",
			})
		}
	}
	if fe := s.checkFuture(body.ExpiresAt); fe != nil {
		problems = append(problems, *fe)
	}
	if len(problems) > 0 {
		return nil, Validation(problems...)
	}

	key, full, err := s.mintAPIKey(body.ExpiresAt)
	if err != nil {
		return nil, err
	}
	sa := store.ServiceAccount{
		ProjectID: req.ProjectId, Name: body.Name, Description: body.Description,
		EnvironmentID: body.EnvironmentId, Scopes: slices.Clone(body.Scopes),
	}
	orgID := ScopeFrom(ctx).OrganizationID
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateServiceAccount(ctx, &sa, &key); err != nil {
			return err
		}
		err := audit(ctx, tx, auditEvent{Action: "service_account.create", TargetType: "service_account",
			TargetID: sa.ID, OrganizationID: orgID, ProjectID: sa.ProjectID, Metadata: map[string]any{
				"name": sa.Name, "scopes": sa.Scopes, "environmentId": ptrValue(sa.EnvironmentID),
				"keyId": key.ID, "publicId": key.PublicID,
			}})
		if err != nil {
			return err
		}
		return audit(ctx, tx, apiKeyAuditEvent(ctx, "api_key.create", orgID, sa.ProjectID, key))
	})
	if err != nil {
		return nil, err
	}
	out := serviceAccountJSON(sa)
	resp := gen.CreateServiceAccount201JSONResponse{}
	resp.Data.Id, resp.Data.ProjectId, resp.Data.Name = out.Id, out.ProjectId, out.Name
	resp.Data.Description, resp.Data.EnvironmentId, resp.Data.Scopes = out.Description, out.EnvironmentId, out.Scopes
	resp.Data.DisabledAt, resp.Data.CreatedAt, resp.Data.UpdatedAt = out.DisabledAt, out.CreatedAt, out.UpdatedAt
	resp.Data.Keys, resp.Data.ApiKey = out.Keys, full
	return resp, nil
}

// DisableServiceAccount disables a service account: its keys stop authenticating.
func (s *Server) DisableServiceAccount(ctx context.Context, req gen.DisableServiceAccountRequestObject) (gen.DisableServiceAccountResponseObject, error) {
	sa, err := s.setServiceAccountDisabled(ctx, req.ProjectId, req.AccountId, true)
	if err != nil {
		return nil, err
	}
	return gen.DisableServiceAccount200JSONResponse{Data: serviceAccountJSON(sa)}, nil
}

// EnableServiceAccount re-enables a service account.
func (s *Server) EnableServiceAccount(ctx context.Context, req gen.EnableServiceAccountRequestObject) (gen.EnableServiceAccountResponseObject, error) {
	sa, err := s.setServiceAccountDisabled(ctx, req.ProjectId, req.AccountId, false)
	if err != nil {
		return nil, err
	}
	return gen.EnableServiceAccount200JSONResponse{Data: serviceAccountJSON(sa)}, nil
}

func (s *Server) setServiceAccountDisabled(ctx context.Context, projectID, accountID string, disabled bool) (store.ServiceAccount, error) {
	action := "service_account.enable"
	if disabled {
		action = "service_account.disable"
	}
	var sa store.ServiceAccount
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if sa, err = tx.SetServiceAccountDisabled(ctx, projectID, accountID, disabled); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: action, TargetType: "service_account", TargetID: sa.ID,
			OrganizationID: ScopeFrom(ctx).OrganizationID, ProjectID: projectID})
	})
	return sa, err
}

// CreateServiceAccountKey mints another key for an account (rotation), returned this once.
func (s *Server) CreateServiceAccountKey(ctx context.Context, req gen.CreateServiceAccountKeyRequestObject) (gen.CreateServiceAccountKeyResponseObject, error) {
	var expiresAt *time.Time
	if req.Body != nil {
		expiresAt = req.Body.ExpiresAt
	}
	if fe := s.checkFuture(expiresAt); fe != nil {
		return nil, Validation(*fe)
	}
	key, full, err := s.mintAPIKey(expiresAt)
	if err != nil {
		return nil, err
	}
	orgID := ScopeFrom(ctx).OrganizationID
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.AddAPIKey(ctx, req.ProjectId, req.AccountId, &key); err != nil {
			return err
		}
		return audit(ctx, tx, apiKeyAuditEvent(ctx, "api_key.create", orgID, req.ProjectId, key))
	})
	if err != nil {
		return nil, err
	}
	resp := gen.CreateServiceAccountKey201JSONResponse{}
	resp.Data.Key, resp.Data.ApiKey = apiKeyJSON(key), full
	return resp, nil
}

// RevokeServiceAccountKey revokes one key of an account; revoking again keeps the first time.
func (s *Server) RevokeServiceAccountKey(ctx context.Context, req gen.RevokeServiceAccountKeyRequestObject) (gen.RevokeServiceAccountKeyResponseObject, error) {
	var key store.APIKey
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if key, err = tx.RevokeAPIKey(ctx, req.ProjectId, req.AccountId, req.KeyId); err != nil {
			return err
		}
		return audit(ctx, tx, apiKeyAuditEvent(ctx, "api_key.revoke", ScopeFrom(ctx).OrganizationID, req.ProjectId, key))
	})
	if err != nil {
		return nil, err
	}
	return gen.RevokeServiceAccountKey200JSONResponse{Data: apiKeyJSON(key)}, nil
}

// mintAPIKey draws a new key and returns it ready for the store (public id and secret hash)
// with the full key to show once.
func (s *Server) mintAPIKey(expiresAt *time.Time) (store.APIKey, string, error) {
	publicID, secret, full, err := identity.NewAPIKey()
	if err != nil {
		return store.APIKey{}, "", err
	}
	return store.APIKey{
		PublicID: publicID, SecretHash: identity.HashAPIKeySecret(s.apiKeyPepper, secret), ExpiresAt: expiresAt,
	}, full, nil
}

// checkFuture returns a validation issue at body.expiresAt unless t is nil or after the store's
// clock.
func (s *Server) checkFuture(t *time.Time) *FieldError {
	if t == nil || t.After(s.store.Now()) {
		return nil
	}
	return &FieldError{Path: []string{"body", "expiresAt"}, Message: "must be in the future"}
}

// projectHasEnvironment reports whether environmentID is an environment of projectID.
func (s *Server) projectHasEnvironment(ctx context.Context, projectID, environmentID string) (bool, error) {
	p, err := s.store.Project(ctx, projectID)
	if err != nil {
		return false, err
	}
	for _, e := range p.Environments {
		if e.ID == environmentID {
			return true, nil
		}
	}
	return false, nil
}

// knownScope reports whether scope is "*" or a control-plane permission.
func knownScope(scope string) bool {
	return scope == "*" || slices.Contains(allPermissions, scope)
}

// apiKeyAuditEvent records a key event. The key is named by its ids, never by its secret or hash.
func apiKeyAuditEvent(ctx context.Context, action, orgID, projectID string, k store.APIKey) auditEvent {
	md := map[string]any{"serviceAccountId": k.ServiceAccountID, "publicId": k.PublicID}
	if k.ExpiresAt != nil {
		md["expiresAt"] = k.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return auditEvent{Action: action, TargetType: "api_key", TargetID: k.ID,
		OrganizationID: orgID, ProjectID: projectID, Metadata: md}
}

func serviceAccountJSON(sa store.ServiceAccount) gen.ServiceAccount {
	keys := make([]gen.ApiKey, len(sa.Keys))
	for i, k := range sa.Keys {
		keys[i] = apiKeyJSON(k)
	}
	scopes := sa.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return gen.ServiceAccount{
		Id: sa.ID, ProjectId: sa.ProjectID, Name: sa.Name,
		Description: nullableOf(sa.Description), EnvironmentId: nullableOf(sa.EnvironmentID),
		Scopes: scopes, DisabledAt: nullableOf(sa.DisabledAt),
		CreatedAt: sa.CreatedAt, UpdatedAt: sa.UpdatedAt, Keys: keys,
	}
}

// apiKeyJSON is a key's public view: ids and states, never secret material.
func apiKeyJSON(k store.APIKey) gen.ApiKey {
	return gen.ApiKey{
		Id: k.ID, PublicId: k.PublicID, ExpiresAt: nullableOf(k.ExpiresAt),
		RevokedAt: nullableOf(k.RevokedAt), LastUsedAt: nullableOf(k.LastUsedAt), CreatedAt: k.CreatedAt,
	}
}
