package apptest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
)

// User is a user with a live session, and the Cookie header that authenticates as them.
type User struct {
	store.User
	Session store.Session
	Token   string
	Cookie  string
}

// NewUser creates a user with a password ("password-"+email) and a 7-day session directly in
// the store, independently of the /api/auth handlers.
func (a *App) NewUser(t testing.TB, name, email string) User {
	t.Helper()
	hash, err := identity.HashPassword("password-" + email)
	if err != nil {
		t.Fatal(err)
	}
	return a.NewUserWithHash(t, name, email, hash)
}

// NewFixtureUser is NewUser without a usable password (no argon2 cost), for fixtures that only
// need the session.
func (a *App) NewFixtureUser(t testing.TB, name, email string) User {
	t.Helper()
	return a.NewUserWithHash(t, name, email, "!no-password")
}

// NewUserWithHash is NewUser with the password hash given.
func (a *App) NewUserWithHash(t testing.TB, name, email, hash string) User {
	t.Helper()
	ctx := context.Background()
	u := store.User{Name: name, Email: email}
	token, err := identity.NewSessionToken()
	if err != nil {
		t.Fatal(err)
	}
	sess := store.Session{TokenHash: identity.HashToken(token), ExpiresAt: time.Now().Add(7 * 24 * time.Hour), RememberMe: true}
	err = a.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, &u, hash); err != nil {
			return err
		}
		sess.UserID = u.ID
		return tx.CreateSession(ctx, &sess)
	})
	if err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	value := identity.CookieValue(a.CookieKey, token)
	return User{User: u, Session: sess, Token: token, Cookie: a.CookieName + "=" + value}
}

// As returns r with headers that authenticate it as u, with a trusted Origin (BaseURL) for
// unsafe methods; r's own headers win.
func (u User) As(r Request) Request {
	h := map[string]string{"Cookie": u.Cookie, "Origin": BaseURL}
	for k, v := range r.Headers {
		h[k] = v
	}
	r.Headers = h
	return r
}

// NewOrganization creates, in the store, an organization and its owner (a fixture user).
func (a *App) NewOrganization(t testing.TB) (owner User, org store.Organization) {
	t.Helper()
	ctx := context.Background()
	n := strconv.Itoa(int(time.Now().UnixNano() % 1e9))
	owner = a.NewFixtureUser(t, "owner", "owner"+n+"@example.com")
	org = store.Organization{Name: "Acme " + n, Slug: "acme-" + n}
	if err := a.Store.InTx(ctx, func(tx *store.Tx) error {
		_, err := tx.CreateOrganization(ctx, &org, owner.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return owner, org
}

// NewProject adds a project to organization orgID directly in the store: a project without
// fixtures, so that lists and audit logs hold only what a test did.
func (a *App) NewProject(t testing.TB, orgID, slug string) store.Project {
	t.Helper()
	p := store.Project{OrganizationID: orgID, Name: "Project " + slug, Slug: slug}
	if err := a.Store.InTx(context.Background(), func(tx *store.Tx) error { return tx.CreateProject(context.Background(), &p) }); err != nil {
		t.Fatal(err)
	}
	return p
}

// GrantID returns the id of subject's only entitlement grant in projectID.
func (a *App) GrantID(t testing.TB, projectID, subject string) string {
	t.Helper()
	ents, err := a.Store.SubjectEntitlements(context.Background(), projectID, subject, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.SourceType == store.SourceGrant {
			return e.SourceID
		}
	}
	t.Fatalf("no grant for %s", subject)
	return ""
}

// OIDCClient is an OidcClient as the wire carries it; ClientSecret only in the creation and
// rotation responses.
type OIDCClient struct {
	ID                      string     `json:"id"`
	ProjectID               string     `json:"projectId"`
	Name                    string     `json:"name"`
	Type                    string     `json:"type"`
	RedirectURIs            []string   `json:"redirectUris"`
	PostLogoutRedirectURIs  []string   `json:"postLogoutRedirectUris"`
	GrantTypes              []string   `json:"grantTypes"`
	Scopes                  []string   `json:"scopes"`
	SkipConsent             bool       `json:"skipConsent"`
	TokenEndpointAuthMethod string     `json:"tokenEndpointAuthMethod"`
	DisabledAt              *time.Time `json:"disabledAt"`
	CreatedAt               time.Time  `json:"createdAt"`
	UpdatedAt               time.Time  `json:"updatedAt"`
	ClientSecret            *string    `json:"clientSecret"`
}

// WebClientBody registers a confidential skipConsent client of https://shop.example.com with
// every grant type and scope.
const WebClientBody = `{"name":"Storefront web","type":"web","redirectUris":["https://shop.example.com/cb","https://shop.example.com/cb2?x=1"],` +
	`"postLogoutRedirectUris":["https://shop.example.com/"],"grantTypes":["authorization_code","refresh_token","client_credentials"],` +
	`"scopes":["openid","profile","email","offline_access","organization","roles","entitlements","billing"],"skipConsent":true}`

// CreateOIDCClient registers a client (body: its JSON) in projectID through /api/v1 as u,
// sending Origin origin, and returns the decoded 201 body with the raw body.
func (a *App) CreateOIDCClient(t testing.TB, u User, projectID, body, origin string) (OIDCClient, string) {
	t.Helper()
	var out Envelope[OIDCClient]
	res := a.Do(u.As(Request{Method: "POST", Path: "/api/v1/projects/" + projectID + "/oidc-clients",
		Body: body, Headers: map[string]string{"Origin": origin}}))
	res.Decode(t, http.StatusCreated, &out)
	return out.Data, res.Body.String()
}
