package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Social sign-in (GitHub, Google). POST /api/auth/sign-in/social starts a flow: a random
// state (recorded in social_states, single-use), a PKCE verifier and a nonce go into a
// short-lived HMAC-signed cookie bound to this browser, and the answer is the provider's
// authorization URL. GET /api/auth/callback/{provider} checks the cookie, the state (equal to
// the cookie's, and consumed in the database so that a replayed callback fails even with the
// cookie), exchanges the code with the verifier, and signs the provider account's user in:
// its linked user, else the user with the same email when the provider verified that email,
// else a new user.

// socialFlowTTL is how long a started social sign-in may take.
const socialFlowTTL = 10 * time.Minute

var (
	errProviderNotFound = authError(http.StatusNotFound, kindNotFound, "PROVIDER_NOT_FOUND", "Provider not found")
	errInvalidState     = authError(http.StatusBadRequest, kindClientError, "INVALID_STATE",
		"The sign-in could not be verified; start it again")
)

// socialProviders are the configured providers in button order.
type socialProviders struct {
	byID  map[string]*identity.SocialProvider
	order []*identity.SocialProvider
	// key signs the flow cookie: seal.DeriveKey(secret key, "social-flow").
	key        []byte
	cookieName string
	secure     bool
}

// newSocialProviders indexes the configured providers and sets up the flow cookie of cfg.
func newSocialProviders(cfg Config, providers []*identity.SocialProvider) socialProviders {
	sp := socialProviders{byID: map[string]*identity.SocialProvider{}, order: providers,
		key: seal.DeriveKey(cfg.SecretKey, "social-flow"), cookieName: "gatehouse.social_flow", secure: cfg.Secure()}
	if sp.secure {
		sp.cookieName = "__Host-gatehouse.social_flow"
	}
	for _, p := range providers {
		sp.byID[p.ID] = p
	}
	return sp
}

// socialFlow is the flow cookie's content.
type socialFlow struct {
	Provider string `json:"p"`
	State    string `json:"s"`
	Verifier string `json:"v"`
	Nonce    string `json:"n"`
	Callback string `json:"c"`
	NewUser  string `json:"u,omitempty"`
	OnError  string `json:"e,omitempty"`
	Expires  int64  `json:"x"`
}

func (sp socialProviders) seal(f socialFlow) string {
	payload, _ := json.Marshal(f)
	mac := hmac.New(sha256.New, sp.key)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// open verifies a flow cookie's signature and expiry.
func (sp socialProviders) open(raw string) (socialFlow, bool) {
	payloadPart, sigPart, ok := strings.Cut(raw, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(payloadPart)
	sig, err2 := base64.RawURLEncoding.DecodeString(sigPart)
	if !ok || err1 != nil || err2 != nil {
		return socialFlow{}, false
	}
	mac := hmac.New(sha256.New, sp.key)
	mac.Write(payload)
	var f socialFlow
	if !hmac.Equal(sig, mac.Sum(nil)) || json.Unmarshal(payload, &f) != nil || time.Now().Unix() > f.Expires {
		return socialFlow{}, false
	}
	return f, true
}

func (sp socialProviders) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: sp.cookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: sp.secure, SameSite: http.SameSiteLaxMode}
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ListSocialProviders answers the configured social providers.
func (s *Server) ListSocialProviders(context.Context, gen.ListSocialProvidersRequestObject) (gen.ListSocialProvidersResponseObject, error) {
	out := gen.ListSocialProviders200JSONResponse{}
	out.Providers = make([]struct {
		Id   gen.AuthSocialProvider `json:"id"`
		Name string                 `json:"name"`
	}, len(s.social.order))
	for i, p := range s.social.order {
		out.Providers[i].Id, out.Providers[i].Name = gen.AuthSocialProvider(p.ID), p.Name
	}
	return out, nil
}

// SignInSocial starts a social sign-in (see the file comment).
func (s *Server) SignInSocial(ctx context.Context, request gen.SignInSocialRequestObject) (gen.SignInSocialResponseObject, error) {
	body, err := jsonOrForm(request.JSONBody, request.FormdataBody)
	if err != nil {
		return nil, err
	}
	noStore(ctx)
	p := s.social.byID[string(body.Provider)]
	if p == nil {
		return nil, errProviderNotFound
	}
	for _, u := range []*string{body.CallbackURL, body.NewUserCallbackURL, body.ErrorCallbackURL} {
		if err := s.checkCallbackURL(u); err != nil {
			return nil, err
		}
	}
	f := socialFlow{Provider: p.ID, Callback: "/", Expires: time.Now().Add(socialFlowTTL).Unix()}
	if body.CallbackURL != nil {
		f.Callback = *body.CallbackURL
	}
	if body.NewUserCallbackURL != nil {
		f.NewUser = *body.NewUserCallbackURL
	}
	if body.ErrorCallbackURL != nil {
		f.OnError = *body.ErrorCallbackURL
	}
	if f.State, err = randomToken(); err != nil {
		return nil, err
	}
	if f.Nonce, err = randomToken(); err != nil {
		return nil, err
	}
	f.Verifier = oauth2.GenerateVerifier()
	if err := s.store.CreateSocialState(ctx, f.State, p.ID, time.Now().Add(socialFlowTTL)); err != nil {
		return nil, err
	}
	setCookie(ctx, s.social.cookie(s.social.seal(f), int(socialFlowTTL/time.Second)))
	target := p.AuthCodeURL(f.State, f.Verifier, f.Nonce)
	if request.FormdataBody != nil && !acceptsJSON(requestMetaFrom(ctx).Accept) {
		return gen.SignInSocial303Response{Headers: gen.SignInSocial303ResponseHeaders{Location: &target}}, nil
	}
	disable := body.DisableRedirect != nil && *body.DisableRedirect
	return gen.SignInSocial200JSONResponse{Body: gen.AuthSocialRedirect{Url: target, Redirect: !disable}}, nil
}

// socialCallback serves GET /api/auth/callback/{provider} (see the file comment and the spec).
func (s *Server) socialCallback(c echo.Context) error {
	req := c.Request()
	ctx := req.Context()
	p := s.social.byID[c.Param("provider")]
	if p == nil {
		return errProviderNotFound
	}
	noStore(ctx)
	raw, err := req.Cookie(s.social.cookieName)
	if err != nil {
		return errInvalidState
	}
	f, ok := s.social.open(raw.Value)
	if !ok || f.Provider != p.ID {
		return errInvalidState
	}
	// The flow ends here whatever happens: the cookie goes.
	setCookie(ctx, s.social.cookie("", -1))
	fail := func(code string) error {
		target := f.OnError
		if target == "" {
			target = f.Callback
		}
		return c.Redirect(http.StatusFound, withQueryParam(target, "error", code))
	}
	q := req.URL.Query()
	state := q.Get("state")
	if !hmac.Equal([]byte(state), []byte(f.State)) {
		return fail("state_mismatch")
	}
	if err := s.store.ConsumeSocialState(ctx, state, p.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fail("invalid_state")
		}
		return err
	}
	if q.Get("error") != "" || q.Get("code") == "" {
		return fail("access_denied")
	}
	id, err := p.Identify(ctx, q.Get("code"), f.Verifier, f.Nonce)
	if err != nil {
		s.log.WarnContext(ctx, "social sign-in: provider failure", "provider", p.ID, "err", err)
		return fail("provider_error")
	}
	user, created, token, err := s.socialSignIn(ctx, p.ID, id)
	if err == nil && token == "" {
		// RequireEmailVerification: the linked account's address is not verified.
		err = s.requireVerifiedEmail(ctx, user, nil)
		if errors.Is(err, errEmailNotVerified) {
			err = socialRefusal("email_not_verified")
		}
	}
	var code socialRefusal
	if errors.As(err, &code) {
		return fail(string(code))
	}
	if err != nil {
		return err
	}
	setCookie(ctx, s.sessions.Cookie(token, true))
	target := f.Callback
	if created && f.NewUser != "" {
		target = f.NewUser
	}
	// A member without a second factor of an organization that requires one enrols first, as
	// after the hosted password sign-in.
	if target, err = s.enrolmentDue(ctx, user.ID, target); err != nil {
		return err
	}
	return c.Redirect(http.StatusFound, target)
}

// socialRefusal is a refused social sign-in, named by the error code the browser is sent
// back with.
type socialRefusal string

func (r socialRefusal) Error() string { return "social sign-in refused: " + string(r) }

// socialSignIn finds or creates the user of provider account id and starts a session, in one
// transaction: the linked user; else the user with id's email when the provider verified it
// (the account is linked to them, after identity.ClaimEmail took it over if its email was
// never verified); else, when no user has the email, a new user (created reports it). An
// unverified email that belongs to a user is socialRefusal "email_not_verified"; no email at
// all for a new user is "no_email".
//
// With RequireEmailVerification it is gated like a password sign-in: an address the provider
// did not verify creates no user ("email_not_verified": nobody proved it, and a verification
// link would take the new account's only way in away again, see identity.ClaimEmail), and a
// user whose address is not verified gets no session (token is ""; the caller mails a fresh
// verification link and refuses).
func (s *Server) socialSignIn(ctx context.Context, provider string, id identity.SocialIdentity) (user store.User, created bool, token string, err error) {
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		created = false
		acc, err := tx.AccountByProvider(ctx, provider, id.AccountID)
		switch {
		case err == nil:
			if user, err = tx.UserByID(ctx, acc.UserID); err != nil {
				return err
			}
			if s.cfg.RequireEmailVerification && !user.EmailVerified {
				return nil
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		case id.Email == "":
			return socialRefusal("no_email")
		default:
			user, err = tx.UserByEmailTx(ctx, id.Email)
			switch {
			case err == nil:
				if !id.EmailVerified {
					return socialRefusal("email_not_verified")
				}
				// The provider proves the address is this person's: an account never verified
				// is taken over (its password, provider links, sessions and OAuth grants go),
				// a verified one is only linked.
				owner := context.WithValue(ctx, principalKey{}, &Principal{Kind: PrincipalUser, User: user})
				if _, err := identity.ClaimEmail(ctx, tx, user.ID, provider, auditEntry(owner, auditEvent{})); err != nil {
					return err
				}
				user.EmailVerified = true
			case errors.Is(err, store.ErrNotFound):
				if s.cfg.RequireEmailVerification && !id.EmailVerified {
					return socialRefusal("email_not_verified")
				}
				if err := s.allowSignUp(ctx, id.Email, id.EmailVerified); err != nil {
					if errors.Is(err, errSignUpClosed) || errors.Is(err, errSignUpNeedsInvitation) {
						return socialSignUpDisabled
					}
					return err
				}
				user = store.User{Name: id.Name, Email: id.Email, EmailVerified: id.EmailVerified}
				if user.Name == "" {
					user.Name, _, _ = strings.Cut(id.Email, "@")
				}
				if id.Image != "" {
					img := id.Image
					user.Image = &img
				}
				if err := tx.CreateUser(ctx, &user, ""); err != nil {
					return err
				}
				created = true
			default:
				return err
			}
			if _, err := tx.LinkAccount(ctx, user.ID, provider, id.AccountID, id.Scopes); err != nil {
				return err
			}
			actx := context.WithValue(ctx, principalKey{}, &Principal{Kind: PrincipalUser, User: user})
			action := "account.link"
			if created {
				action = "user.sign_up"
			}
			if err := audit(actx, tx, auditEvent{Action: action, TargetType: "user", TargetID: user.ID,
				Metadata: map[string]any{"provider": provider}}); err != nil {
				return err
			}
		}
		_, token, err = s.createSession(ctx, tx, user.ID, true, nil, []string{provider})
		return err
	})
	return user, created, token, err
}

// ListAccounts lists the caller's accounts (credential and linked social accounts).
func (s *Server) ListAccounts(ctx context.Context, _ gen.ListAccountsRequestObject) (gen.ListAccountsResponseObject, error) {
	noStore(ctx)
	accounts, err := s.store.LinkedAccounts(ctx, PrincipalFrom(ctx).ID())
	if err != nil {
		return nil, err
	}
	out := make(gen.ListAccounts200JSONResponse, len(accounts))
	for i, a := range accounts {
		out[i] = gen.AuthLinkedAccount{Id: a.ID, ProviderId: a.ProviderID, AccountId: a.AccountID, UserId: a.UserID,
			Scopes: a.Scopes, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC()}
	}
	return out, nil
}
