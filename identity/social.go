// Social sign-in: users sign in with an external identity provider: GitHub (OAuth 2.0, the
// REST API for the profile and the verified emails) and Google (OpenID Connect, the ID
// token verified with go-oidc). Both use golang.org/x/oauth2 with PKCE (S256). Every
// endpoint is configurable so that tests point them at a local fake; the defaults are the
// real providers'. The HTTP flow (state, cookie, callback, account linking) is package
// server's (authapi_social.go).

package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Social provider ids, as the routes and the accounts table name them.
const (
	GitHub = "github"
	Google = "google"
)

// SocialIdentity is what a provider says about the user who signed in.
type SocialIdentity struct {
	// AccountID is the provider's stable user id (GitHub's numeric id, Google's sub).
	AccountID string
	// Email is the user's address ("" when the provider gave none) and EmailVerified whether
	// the provider marks it verified.
	Email         string
	EmailVerified bool
	Name          string
	Image         string
	// Scopes are the scopes the provider granted.
	Scopes []string
}

// SocialEndpoints are a provider's URLs. Empty fields take the real provider's.
type SocialEndpoints struct {
	// AuthURL and TokenURL are the OAuth 2.0 authorization and token endpoints.
	AuthURL  string
	TokenURL string
	// APIURL is GitHub's REST API base (/user, /user/emails).
	APIURL string
	// Issuer and JWKSURL are Google's ID token issuer and signing keys.
	Issuer  string
	JWKSURL string
}

// Default endpoints of the real providers.
var (
	GitHubEndpoints = SocialEndpoints{
		AuthURL: "https://github.com/login/oauth/authorize", TokenURL: "https://github.com/login/oauth/access_token",
		APIURL: "https://api.github.com",
	}
	GoogleEndpoints = SocialEndpoints{
		AuthURL: "https://accounts.google.com/o/oauth2/v2/auth", TokenURL: "https://oauth2.googleapis.com/token",
		Issuer: "https://accounts.google.com", JWKSURL: "https://www.googleapis.com/oauth2/v3/certs",
	}
)

// SocialConfig configures one provider.
type SocialConfig struct {
	ClientID     string
	ClientSecret string
	// RedirectURL is Gatehouse's callback: {base}/api/auth/callback/{provider}.
	RedirectURL string
	Endpoints   SocialEndpoints
	// HTTPClient makes the provider calls; nil means a client with a 10-second timeout.
	HTTPClient *http.Client
}

// SocialProvider is a configured identity provider.
type SocialProvider struct {
	ID   string
	Name string
	// oauth is the OAuth 2.0 client of the flow.
	oauth    *oauth2.Config
	client   *http.Client
	apiURL   string
	verifier *oidc.IDTokenVerifier
}

// New returns provider id (GitHub or Google) configured with cfg, filling in the real
// provider's endpoints where cfg leaves them empty. It makes no network call.
func NewSocialProvider(id string, cfg SocialConfig) (*SocialProvider, error) {
	var def SocialEndpoints
	var name string
	var scopes []string
	switch id {
	case GitHub:
		def, name, scopes = GitHubEndpoints, "GitHub", []string{"read:user", "user:email"}
	case Google:
		def, name, scopes = GoogleEndpoints, "Google", []string{oidc.ScopeOpenID, "email", "profile"}
	default:
		return nil, fmt.Errorf("identity: social: unknown provider %q", id)
	}
	e := cfg.Endpoints
	for _, f := range []struct {
		dst *string
		def string
	}{
		{&e.AuthURL, def.AuthURL}, {&e.TokenURL, def.TokenURL}, {&e.APIURL, def.APIURL},
		{&e.Issuer, def.Issuer}, {&e.JWKSURL, def.JWKSURL},
	} {
		if *f.dst == "" {
			*f.dst = f.def
		}
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	p := &SocialProvider{ID: id, Name: name, client: client, apiURL: strings.TrimRight(e.APIURL, "/"),
		oauth: &oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL, Scopes: scopes,
			Endpoint: oauth2.Endpoint{AuthURL: e.AuthURL, TokenURL: e.TokenURL, AuthStyle: oauth2.AuthStyleInParams},
		}}
	if id == Google {
		ctx := oidc.ClientContext(context.Background(), client)
		keys := oidc.NewRemoteKeySet(ctx, e.JWKSURL)
		p.verifier = oidc.NewVerifier(e.Issuer, keys, &oidc.Config{ClientID: cfg.ClientID,
			SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256}})
	}
	return p, nil
}

// AuthCodeURL is the provider's authorization URL for a flow with state, the PKCE verifier's
// S256 challenge and (Google) nonce.
func (p *SocialProvider) AuthCodeURL(state, verifier, nonce string) string {
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if p.verifier != nil {
		opts = append(opts, oidc.Nonce(nonce))
	}
	return p.oauth.AuthCodeURL(state, opts...)
}

// ErrSocialProvider wraps every failure of the provider's side (exchange, API, ID token).
var ErrSocialProvider = errors.New("identity: social: provider error")

// Identify exchanges code (with the PKCE verifier) for tokens and returns the user's
// identity: from GitHub's API, or from Google's ID token, whose signature, issuer, audience,
// expiry and nonce are checked.
func (p *SocialProvider) Identify(ctx context.Context, code, verifier, nonce string) (SocialIdentity, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, p.client)
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return SocialIdentity{}, fmt.Errorf("%w: token exchange: %v", ErrSocialProvider, err)
	}
	granted := p.oauth.Scopes
	if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
		granted = strings.FieldsFunc(sc, func(r rune) bool { return r == ',' || r == ' ' })
	}
	var id SocialIdentity
	if p.ID == GitHub {
		id, err = p.github(ctx, tok)
	} else {
		id, err = p.google(ctx, tok, nonce)
	}
	if err != nil {
		return SocialIdentity{}, err
	}
	id.Scopes = granted
	return id, nil
}

func (p *SocialProvider) github(ctx context.Context, tok *oauth2.Token) (SocialIdentity, error) {
	var user struct {
		ID        int64  `json:"id"`
		Login     string `json:"login"`
		Name      string `json:"name"`
		AvatarURL string `json:"avatar_url"`
	}
	if err := p.getJSON(ctx, tok, "/user", &user); err != nil {
		return SocialIdentity{}, err
	}
	if user.ID == 0 {
		return SocialIdentity{}, fmt.Errorf("%w: /user has no id", ErrSocialProvider)
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := p.getJSON(ctx, tok, "/user/emails", &emails); err != nil {
		return SocialIdentity{}, err
	}
	id := SocialIdentity{AccountID: strconv.FormatInt(user.ID, 10), Name: user.Name, Image: user.AvatarURL}
	if id.Name == "" {
		id.Name = user.Login
	}
	// The primary address when GitHub verified it; else any verified one; else the
	// (unverified) primary, which can create a user but never link to one.
	for _, pass := range []func(e int) bool{
		func(i int) bool { return emails[i].Primary && emails[i].Verified },
		func(i int) bool { return emails[i].Verified },
		func(i int) bool { return emails[i].Primary },
	} {
		for i := range emails {
			if pass(i) && emails[i].Email != "" {
				id.Email, id.EmailVerified = emails[i].Email, emails[i].Verified
				return id, nil
			}
		}
	}
	return id, nil
}

func (p *SocialProvider) getJSON(ctx context.Context, tok *oauth2.Token, path string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	tok.SetAuthHeader(req)
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrSocialProvider, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrSocialProvider, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: status %d", ErrSocialProvider, path, resp.StatusCode)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrSocialProvider, path, err)
	}
	return nil
}

func (p *SocialProvider) google(ctx context.Context, tok *oauth2.Token, nonce string) (SocialIdentity, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return SocialIdentity{}, fmt.Errorf("%w: no id_token", ErrSocialProvider)
	}
	idt, err := p.verifier.Verify(oidc.ClientContext(ctx, p.client), raw)
	if err != nil {
		return SocialIdentity{}, fmt.Errorf("%w: id_token: %v", ErrSocialProvider, err)
	}
	if idt.Nonce != nonce {
		return SocialIdentity{}, fmt.Errorf("%w: id_token nonce mismatch", ErrSocialProvider)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
		Name          string `json:"name"`
		Picture       string `json:"picture"`
	}
	if err := idt.Claims(&claims); err != nil {
		return SocialIdentity{}, fmt.Errorf("%w: id_token claims: %v", ErrSocialProvider, err)
	}
	// email_verified is a boolean, or (in some older Google tokens) the string "true".
	verified := claims.EmailVerified == true || claims.EmailVerified == "true"
	return SocialIdentity{AccountID: idt.Subject, Email: claims.Email, EmailVerified: verified,
		Name: claims.Name, Image: claims.Picture}, nil
}

// SocialCallbackPath is the callback route of provider p, relative to the base URL:
// SocialCallbackPath + p (the redirect URL registered at the provider).
const SocialCallbackPath = "/api/auth/callback/"

// SocialSettings are one social provider's configured credentials (GATEHOUSE_<P>_CLIENT_ID and
// _CLIENT_SECRET) and endpoint overrides.
type SocialSettings struct {
	// ID is GitHub or Google.
	ID           string
	ClientID     string
	ClientSecret string
	// Endpoints override the real provider's URLs (tests point them at a fake).
	Endpoints SocialEndpoints
}

// NewSocialProviders returns the providers of settings, in order, each redirecting to
// baseURL + SocialCallbackPath + its id.
func NewSocialProviders(baseURL string, settings []SocialSettings) ([]*SocialProvider, error) {
	out := make([]*SocialProvider, 0, len(settings))
	for _, c := range settings {
		p, err := NewSocialProvider(c.ID, SocialConfig{ClientID: c.ClientID, ClientSecret: c.ClientSecret,
			RedirectURL: baseURL + SocialCallbackPath + c.ID, Endpoints: c.Endpoints})
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
