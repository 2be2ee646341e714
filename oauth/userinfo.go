package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store"
)

// ---- Userinfo ----

// userinfo serves GET and POST /api/auth/oauth2/userinfo (OpenID Connect Core 5.3): the
// claims of the token's user for the granted scopes.
func (b *browserProvider) userinfo(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	token := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(rest) == "" {
			bearerError(w, http.StatusUnauthorized, "invalid_token", "The Authorization header must carry a Bearer token.")
			return
		}
		token = strings.TrimSpace(rest)
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			bearerError(w, http.StatusBadRequest, "invalid_request", "The body must be a form.")
			return
		}
		if body := r.PostForm.Get("access_token"); body != "" {
			if token != "" {
				bearerError(w, http.StatusBadRequest, "invalid_request", "Send the token once: in the Authorization header or in the body.")
				return
			}
			token = body
		}
	}
	if token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse"`)
		bearerError(w, http.StatusUnauthorized, "invalid_token", "No access token.")
		return
	}
	_, ar, err := b.p.IntrospectToken(ctx, token, fosite.AccessToken, NewSession(""))
	if err != nil {
		bearerError(w, http.StatusUnauthorized, "invalid_token", "The access token is invalid, expired or revoked.")
		return
	}
	fs, ok := ar.GetSession().(*Session)
	if !ok || !ar.GetGrantedScopes().Has("openid") || fs.Subject == "" || fs.Subject == ar.GetClient().GetID() {
		bearerError(w, http.StatusUnauthorized, "invalid_token", "The access token was not issued to a signed-in user with the openid scope.")
		return
	}
	user, err := b.store.User(ctx, fs.Subject)
	if errors.Is(err, store.ErrNotFound) {
		bearerError(w, http.StatusUnauthorized, "invalid_token", "The token's user no longer exists.")
		return
	}
	if err != nil {
		bearerError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again later.")
		return
	}
	claims, err := b.userClaims(ctx, ar, fs, user)
	if err != nil {
		bearerError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again later.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(claims)
}

// claims are the userinfo claims by granted scope.
func (b *browserProvider) userClaims(ctx context.Context, ar fosite.AccessRequester, fs *Session, user store.User) (map[string]any, error) {
	scopes := ar.GetGrantedScopes()
	out := map[string]any{"sub": user.ID}
	if scopes.Has("profile") {
		out["name"] = user.Name
		out["picture"] = user.Image
		out["updated_at"] = user.UpdatedAt.Unix()
	}
	if scopes.Has("email") {
		out["email"] = user.Email
		out["email_verified"] = user.EmailVerified
	}
	if scopes.Has("organization") {
		var org any
		if fs.OrganizationID != "" {
			o, err := b.store.Organization(ctx, fs.OrganizationID)
			m, merr := b.store.Member(ctx, fs.OrganizationID, user.ID)
			switch {
			case err == nil && merr == nil:
				org = map[string]string{"id": o.ID, "slug": o.Slug, "role": m.Role}
			case errors.Is(err, store.ErrNotFound) || errors.Is(merr, store.ErrNotFound):
			case err != nil:
				return nil, err
			default:
				return nil, merr
			}
		}
		out["organization"] = org
	}
	if scopes.Has("roles") {
		roles := []string{}
		if c, ok := ar.GetClient().(*Client); ok {
			bindings, err := b.store.ListRoleBindings(ctx, c.ProjectID, store.RoleBindingFilter{
				PrincipalType: store.PrincipalUser, PrincipalID: user.ID, Limit: store.MaxRoleBindingPage})
			if err != nil {
				return nil, err
			}
			now := time.Now()
			for _, rb := range bindings {
				if (rb.ExpiresAt == nil || rb.ExpiresAt.After(now)) && !slices.Contains(roles, rb.RoleSlug) {
					roles = append(roles, rb.RoleSlug)
				}
			}
			slices.Sort(roles)
		}
		out["roles"] = roles
	}
	if scopes.Has("entitlements") || scopes.Has("billing") {
		// Both are the subject's state in the client's project (every environment).
		c, _ := ar.GetClient().(*Client)
		projectID := ""
		if c != nil {
			projectID = c.ProjectID
		}
		if scopes.Has("entitlements") {
			ents, err := b.claims.EntitlementClaims(ctx, projectID, user.ID)
			if err != nil {
				return nil, err
			}
			out["entitlements"] = ents
		}
		if scopes.Has("billing") {
			billing, err := b.claims.BillingClaims(ctx, projectID, user.ID)
			if err != nil {
				return nil, err
			}
			out["billing"] = billing
		}
	}
	return out, nil
}

// bearerError writes an RFC 6750 error: the JSON body and, for 401, WWW-Authenticate.
func bearerError(w http.ResponseWriter, status int, code, description string) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="gatehouse", error=%q, error_description=%q`, code, description))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}
