package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/oapi-codegen/nullable"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/store"
)

// OIDC clients of a project. A web (confidential) client's secret is shown once, in the
// response that draws it (creation, rotation); the store keeps oauth.HashClientSecret of it, and
// audit rows never name it. Native and spa clients are public: no secret, no skipConsent.

// errPublicClientSecret answers a secret rotation on a public client.
var errPublicClientSecret = Conflict("Public clients have no client secret")

// errKeyClientSecret answers a secret rotation on a private_key_jwt client.
var errKeyClientSecret = Conflict("Clients that authenticate with private_key_jwt have no client secret")

// ListOidcClients lists a project's OIDC clients, never with secret material.
func (s *Server) ListOidcClients(ctx context.Context, req gen.ListOidcClientsRequestObject) (gen.ListOidcClientsResponseObject, error) {
	clients, err := s.store.ListOIDCClients(ctx, req.ProjectId)
	if err != nil {
		return nil, err
	}
	out := make([]gen.OidcClient, len(clients))
	for i, c := range clients {
		out[i] = oidcClientJSON(c)
	}
	return gen.ListOidcClients200JSONResponse{Data: out}, nil
}

// CreateOidcClient registers a client; a web client's secret is returned this once.
func (s *Server) CreateOidcClient(ctx context.Context, req gen.CreateOidcClientRequestObject) (gen.CreateOidcClientResponseObject, error) {
	body := req.Body
	if problems := checkOidcClient(body, s.provider.SigningAlgorithms()); len(problems) > 0 {
		return nil, Validation(problems...)
	}
	c := store.OIDCClient{
		ProjectID: req.ProjectId, Name: body.Name, Type: string(body.Type),
		RedirectURIs: slices.Clone(body.RedirectUris), PostLogoutRedirectURIs: []string{},
		GrantTypes: enumStrings(body.GrantTypes), Scopes: enumStrings(body.Scopes),
	}
	if body.PostLogoutRedirectUris != nil {
		c.PostLogoutRedirectURIs = slices.Clone(*body.PostLogoutRedirectUris)
	}
	if body.SkipConsent != nil {
		c.SkipConsent = *body.SkipConsent
	}
	if body.RequirePushedAuthorizationRequests != nil {
		c.RequirePAR = *body.RequirePushedAuthorizationRequests
	}
	if body.IdTokenSignedResponseAlg != nil {
		c.IDTokenAlg = string(*body.IdTokenSignedResponseAlg)
	}
	secret := nullable.NewNullNullable[string]()
	switch {
	case body.TokenEndpointAuthMethod != nil && *body.TokenEndpointAuthMethod == gen.OidcCreateAuthPrivateKeyJwt:
		// No secret anyone knows: the hash of a discarded random value keeps the table's rule
		// that web clients have a secret hash, and fosite refuses secrets for this client.
		_, hash, err := s.mintClientSecret()
		if err != nil {
			return nil, err
		}
		keys, _, err := oauth.ParseClientJWKS(*body.Jwks)
		if err != nil {
			return nil, err
		}
		normalised, err := json.Marshal(keys)
		if err != nil {
			return nil, err
		}
		c.SecretHash, c.TokenEndpointAuthMethod, c.JWKS = hash, store.OIDCAuthPrivateKeyJWT, string(normalised)
	case !c.Public():
		plain, hash, err := s.mintClientSecret()
		if err != nil {
			return nil, err
		}
		c.SecretHash, secret = hash, nullable.NewNullableWithValue(plain)
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateOIDCClient(ctx, &c); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "oidc_client.create", TargetType: "oidc_client", TargetID: c.ID,
			OrganizationID: ScopeFrom(ctx).OrganizationID, ProjectID: c.ProjectID, Metadata: map[string]any{
				"name": c.Name, "type": c.Type, "redirectUris": c.RedirectURIs,
				"postLogoutRedirectUris": c.PostLogoutRedirectURIs, "grantTypes": c.GrantTypes,
				"scopes": c.Scopes, "skipConsent": c.SkipConsent,
				"tokenEndpointAuthMethod":            oidcClientJSON(c).TokenEndpointAuthMethod,
				"requirePushedAuthorizationRequests": c.RequirePAR,
				"idTokenSignedResponseAlg":           nilIfEmpty(c.IDTokenAlg),
			}})
	})
	if err != nil {
		return nil, err
	}
	out := oidcClientJSON(c)
	resp := gen.CreateOidcClient201JSONResponse{}
	d := &resp.Data
	d.Id, d.ProjectId, d.Name, d.Type = out.Id, out.ProjectId, out.Name, out.Type
	d.RedirectUris, d.PostLogoutRedirectUris = out.RedirectUris, out.PostLogoutRedirectUris
	d.GrantTypes, d.Scopes, d.SkipConsent = out.GrantTypes, out.Scopes, out.SkipConsent
	d.TokenEndpointAuthMethod, d.DisabledAt = out.TokenEndpointAuthMethod, out.DisabledAt
	d.CreatedAt, d.UpdatedAt, d.ClientSecret = out.CreatedAt, out.UpdatedAt, secret
	d.Jwks, d.RequirePushedAuthorizationRequests = out.Jwks, out.RequirePushedAuthorizationRequests
	d.IdTokenSignedResponseAlg = out.IdTokenSignedResponseAlg
	return resp, nil
}

// DisableOidcClient disables a client: the protocol routes refuse it with invalid_client.
func (s *Server) DisableOidcClient(ctx context.Context, req gen.DisableOidcClientRequestObject) (gen.DisableOidcClientResponseObject, error) {
	c, err := s.setOidcClientDisabled(ctx, req.ProjectId, req.ClientId, true)
	if err != nil {
		return nil, err
	}
	return gen.DisableOidcClient200JSONResponse{Data: oidcClientJSON(c)}, nil
}

// EnableOidcClient re-enables a client.
func (s *Server) EnableOidcClient(ctx context.Context, req gen.EnableOidcClientRequestObject) (gen.EnableOidcClientResponseObject, error) {
	c, err := s.setOidcClientDisabled(ctx, req.ProjectId, req.ClientId, false)
	if err != nil {
		return nil, err
	}
	return gen.EnableOidcClient200JSONResponse{Data: oidcClientJSON(c)}, nil
}

func (s *Server) setOidcClientDisabled(ctx context.Context, projectID, clientID string, disabled bool) (store.OIDCClient, error) {
	action := "oidc_client.enable"
	if disabled {
		action = "oidc_client.disable"
	}
	var c store.OIDCClient
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = tx.SetOIDCClientDisabled(ctx, projectID, clientID, disabled); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: action, TargetType: "oidc_client", TargetID: c.ID,
			OrganizationID: ScopeFrom(ctx).OrganizationID, ProjectID: projectID})
	})
	return c, err
}

// RotateOidcClientSecret replaces a web client's secret; the new one is returned this once and
// the old one stops matching at once. A public client has none: 409.
func (s *Server) RotateOidcClientSecret(ctx context.Context, req gen.RotateOidcClientSecretRequestObject) (gen.RotateOidcClientSecretResponseObject, error) {
	plain, hash, err := s.mintClientSecret()
	if err != nil {
		return nil, err
	}
	var c store.OIDCClient
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = tx.SetOIDCClientSecretHash(ctx, req.ProjectId, req.ClientId, hash); err != nil {
			return err
		}
		return audit(ctx, tx, auditEvent{Action: "oidc_client.rotate_secret", TargetType: "oidc_client", TargetID: c.ID,
			OrganizationID: ScopeFrom(ctx).OrganizationID, ProjectID: req.ProjectId})
	})
	if errors.Is(err, store.ErrNoClientSecret) {
		return nil, errPublicClientSecret
	}
	if errors.Is(err, store.ErrKeyClientSecret) {
		return nil, errKeyClientSecret
	}
	if err != nil {
		return nil, err
	}
	out := oidcClientJSON(c)
	resp := gen.RotateOidcClientSecret200JSONResponse{}
	d := &resp.Data
	d.Id, d.ProjectId, d.Name, d.Type = out.Id, out.ProjectId, out.Name, out.Type
	d.RedirectUris, d.PostLogoutRedirectUris = out.RedirectUris, out.PostLogoutRedirectUris
	d.GrantTypes, d.Scopes, d.SkipConsent = out.GrantTypes, out.Scopes, out.SkipConsent
	d.TokenEndpointAuthMethod, d.DisabledAt = out.TokenEndpointAuthMethod, out.DisabledAt
	d.CreatedAt, d.UpdatedAt, d.ClientSecret = out.CreatedAt, out.UpdatedAt, plain
	d.Jwks, d.RequirePushedAuthorizationRequests = out.Jwks, out.RequirePushedAuthorizationRequests
	d.IdTokenSignedResponseAlg = out.IdTokenSignedResponseAlg
	return resp, nil
}

// mintClientSecret draws a client secret and returns it with its stored form.
func (s *Server) mintClientSecret() (plain string, hash []byte, err error) {
	if plain, err = oauth.NewClientSecret(); err != nil {
		return "", nil, err
	}
	return plain, oauth.HashClientSecret(s.clientSecretPepper, plain), nil
}

// checkOidcClient applies oauth.CheckClient, the registration rules the schema cannot state,
// reporting each problem at the body field it concerns.
func checkOidcClient(body *gen.CreateOidcClientJSONRequestBody, offered []string) []FieldError {
	r := oauth.ClientRegistration{Type: string(body.Type), RedirectURIs: body.RedirectUris,
		GrantTypes: enumStrings(body.GrantTypes), OfferedAlgorithms: offered}
	if body.IdTokenSignedResponseAlg != nil {
		r.IDTokenSignedResponseAlg = string(*body.IdTokenSignedResponseAlg)
	}
	if body.Jwks != nil {
		r.JWKS = *body.Jwks
	}
	if body.PostLogoutRedirectUris != nil {
		r.PostLogoutRedirectURIs = *body.PostLogoutRedirectUris
	}
	if body.TokenEndpointAuthMethod != nil {
		r.TokenEndpointAuthMethod = string(*body.TokenEndpointAuthMethod)
	}
	if body.SkipConsent != nil {
		r.SkipConsent = *body.SkipConsent
	}
	var problems []FieldError
	for _, p := range oauth.CheckClient(r) {
		problems = append(problems, FieldError{Path: append([]string{"body"}, p.Path...), Message: p.Message})
	}
	return problems
}

// enumStrings converts a list of generated enum values to plain strings.
func enumStrings[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

// oidcClientJSON is a client's public view: its registration and state, never secret material.
func oidcClientJSON(c store.OIDCClient) gen.OidcClient {
	grants := make([]gen.OidcGrantType, len(c.GrantTypes))
	for i, g := range c.GrantTypes {
		grants[i] = gen.OidcGrantType(g)
	}
	scopes := make([]gen.OidcScope, len(c.Scopes))
	for i, sc := range c.Scopes {
		scopes[i] = gen.OidcScope(sc)
	}
	method := gen.OidcAuthClientSecretBasic
	var jwks *gen.OidcClientJwks
	switch {
	case c.Public():
		method = gen.OidcAuthNone
	case c.TokenEndpointAuthMethod == store.OIDCAuthPrivateKeyJWT:
		method = gen.OidcAuthPrivateKeyJwt
		raw := gen.OidcClientJwks(c.JWKS)
		jwks = &raw
	}
	post := c.PostLogoutRedirectURIs
	if post == nil {
		post = []string{}
	}
	redirects := c.RedirectURIs
	if redirects == nil {
		redirects = []string{}
	}
	return gen.OidcClient{
		Id: c.ID, ProjectId: c.ProjectID, Name: c.Name, Type: gen.OidcClientType(c.Type),
		RedirectUris: redirects, PostLogoutRedirectUris: post, GrantTypes: grants, Scopes: scopes,
		SkipConsent: c.SkipConsent, TokenEndpointAuthMethod: method, Jwks: jwks,
		RequirePushedAuthorizationRequests: c.RequirePAR,
		IdTokenSignedResponseAlg:           idTokenAlgJSON(c.IDTokenAlg),
		DisabledAt:                         nullableOf(c.DisabledAt), CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
}

// idTokenAlgJSON is a client's idTokenSignedResponseAlg: null when it registered none.
func idTokenAlgJSON(alg string) nullable.Nullable[gen.OidcSigningAlg] {
	if alg == "" {
		return nullable.NewNullNullable[gen.OidcSigningAlg]()
	}
	return nullable.NewNullableWithValue(gen.OidcSigningAlg(alg))
}

// nilIfEmpty is s, or nil (JSON null) for "".
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
