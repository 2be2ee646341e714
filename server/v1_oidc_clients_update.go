package server

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
)

// UpdateOidcClient replaces the registration members the body sends. The merged registration
// goes through oauth.CheckClient, the rules of creation, inside the transaction that writes it,
// so a refused change writes nothing. Type, authentication method and secret stay.
func (s *Server) UpdateOidcClient(ctx context.Context, req gen.UpdateOidcClientRequestObject) (gen.UpdateOidcClientResponseObject, error) {
	body := req.Body
	var changed []string
	var c store.OIDCClient
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		c, err = tx.UpdateOIDCClient(ctx, req.ProjectId, req.ClientId, func(c *store.OIDCClient) error {
			changed = applyOidcClientUpdate(c, body)
			r := oauth.ClientRegistration{Type: c.Type, RedirectURIs: c.RedirectURIs,
				PostLogoutRedirectURIs: c.PostLogoutRedirectURIs, GrantTypes: c.GrantTypes,
				TokenEndpointAuthMethod: c.TokenEndpointAuthMethod, SkipConsent: c.SkipConsent,
				OfferedAlgorithms: s.provider.SigningAlgorithms()}
			if body.IdTokenSignedResponseAlg != nil { // a stored one stays valid when no longer offered
				r.IDTokenSignedResponseAlg = c.IDTokenAlg
			}
			switch {
			case body.Jwks != nil:
				r.JWKS = *body.Jwks
			case c.JWKS != "":
				r.JWKS = []byte(c.JWKS)
			}
			var problems []FieldError
			for _, p := range oauth.CheckClient(r) {
				problems = append(problems, FieldError{Path: append([]string{"body"}, p.Path...), Message: p.Message})
			}
			if len(problems) > 0 {
				return Validation(problems...)
			}
			if body.Jwks != nil {
				// Stored normalised, as at registration.
				keys, _, err := oauth.ParseClientJWKS(*body.Jwks)
				if err != nil {
					return err
				}
				normalised, err := json.Marshal(keys)
				if err != nil {
					return err
				}
				c.JWKS = string(normalised)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "oidc_client.update", TargetType: "oidc_client", TargetID: c.ID,
			OrganizationID: ScopeFrom(ctx).OrganizationID, ProjectID: c.ProjectID, Metadata: map[string]any{
				"changed": changed, "name": c.Name, "redirectUris": c.RedirectURIs,
				"postLogoutRedirectUris": c.PostLogoutRedirectURIs, "grantTypes": c.GrantTypes,
				"scopes": c.Scopes, "skipConsent": c.SkipConsent,
				"requirePushedAuthorizationRequests": c.RequirePAR,
			}})
	})
	if err != nil {
		return nil, err
	}
	return gen.UpdateOidcClient200JSONResponse{Data: oidcClientJSON(c)}, nil
}

// applyOidcClientUpdate copies the members body sends onto c (jwks excepted: the caller
// checks, then normalises it) and returns their names, in the schema's order.
func applyOidcClientUpdate(c *store.OIDCClient, body *gen.UpdateOidcClientJSONRequestBody) []string {
	var changed []string
	if body.Name != nil {
		c.Name, changed = *body.Name, append(changed, "name")
	}
	if body.RedirectUris != nil {
		c.RedirectURIs, changed = slices.Clone(*body.RedirectUris), append(changed, "redirectUris")
	}
	if body.PostLogoutRedirectUris != nil {
		c.PostLogoutRedirectURIs, changed = slices.Clone(*body.PostLogoutRedirectUris), append(changed, "postLogoutRedirectUris")
	}
	if body.GrantTypes != nil {
		c.GrantTypes, changed = enumStrings(*body.GrantTypes), append(changed, "grantTypes")
	}
	if body.Scopes != nil {
		c.Scopes, changed = enumStrings(*body.Scopes), append(changed, "scopes")
	}
	if body.SkipConsent != nil {
		c.SkipConsent, changed = *body.SkipConsent, append(changed, "skipConsent")
	}
	if body.Jwks != nil {
		changed = append(changed, "jwks")
	}
	if body.IdTokenSignedResponseAlg != nil {
		c.IDTokenAlg, changed = string(*body.IdTokenSignedResponseAlg), append(changed, "idTokenSignedResponseAlg")
	}
	if body.RequirePushedAuthorizationRequests != nil {
		c.RequirePAR, changed = *body.RequirePushedAuthorizationRequests, append(changed, "requirePushedAuthorizationRequests")
	}
	return changed
}
