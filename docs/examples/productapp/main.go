// Command productapp is a small product server built on Gatehouse, for reading
// (docs/examples/README.md says how to run it):
//
//   - /login and /callback sign users in through Gatehouse with the authorization-code flow and
//     PKCE (golang.org/x/oauth2), and check the ID token (github.com/coreos/go-oidc);
//   - /reports asks Gatehouse, POST /api/v1/authorize, whether the user holds reports:read in
//     the project's RBAC before it shows the page;
//   - /export is on when the user's entitlements (GET .../subjects/{sub}/entitlements) include
//     the feature csv_export.
//
// Configuration, from the environment: ISSUER_URL (Gatehouse's base URL, its OIDC issuer),
// PRODUCT_URL (this server's own origin; it listens on its host and port), CLIENT_ID and, for a
// web client, CLIENT_SECRET, PROJECT_ID, and API_KEY, a Gatehouse service account key with the
// scopes project:read and billing:read.
// Sessions live in memory: a restart signs everyone out.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html/template"
	"log"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

func main() {
	ctx := context.Background()
	gatehouse, product := env("ISSUER_URL", "http://localhost:8080"), env("PRODUCT_URL", "http://localhost:3000")
	provider, err := oidc.NewProvider(ctx, gatehouse) // discovery: /.well-known/openid-configuration
	if err != nil {
		log.Fatal(err)
	}
	a := &app{
		gatehouse: gatehouse, projectID: os.Getenv("PROJECT_ID"), apiKey: os.Getenv("API_KEY"), provider: provider,
		oauth: oauth2.Config{ClientID: os.Getenv("CLIENT_ID"), ClientSecret: os.Getenv("CLIENT_SECRET"),
			Endpoint: provider.Endpoint(), RedirectURL: product + "/callback", Scopes: []string{oidc.ScopeOpenID, "profile", "email"}},
		idTokens: provider.Verifier(&oidc.Config{ClientID: os.Getenv("CLIENT_ID")}),
		logins:   map[string]login{}, sessions: map[string]user{},
	}
	u, err := url.Parse(product)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.home)
	mux.HandleFunc("GET /login", a.login)
	mux.HandleFunc("GET /callback", a.callback)
	mux.HandleFunc("GET /reports", a.signedIn(a.reports))
	mux.HandleFunc("GET /export", a.signedIn(a.export))
	log.Printf("productapp on %s, signing in through %s", product, gatehouse)
	log.Fatal(http.ListenAndServe(u.Host, mux))
}

// app is the product: its OAuth client, its Gatehouse API key, and its users' sessions.
type app struct {
	gatehouse, projectID, apiKey string
	provider                     *oidc.Provider
	oauth                        oauth2.Config
	idTokens                     *oidc.IDTokenVerifier

	mu       sync.Mutex
	logins   map[string]login // by state: sign-ins under way
	sessions map[string]user  // by session cookie
}

type login struct{ verifier, nonce string }

// user is who signed in: ID is Gatehouse's sub (usr_…), the id the product binds roles to and
// meters usage by.
type user struct {
	ID    string `json:"sub"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// login sends the browser to Gatehouse's authorization endpoint with a fresh state, nonce and
// PKCE verifier; the state also goes into a cookie, so that the callback comes from this browser.
func (a *app) login(w http.ResponseWriter, r *http.Request) {
	state, l := random(), login{verifier: oauth2.GenerateVerifier(), nonce: random()}
	a.mu.Lock()
	a.logins[state] = l
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "productapp_state", Value: state, Path: "/callback", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, a.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(l.verifier), oidc.Nonce(l.nonce)), http.StatusFound)
}

// callback exchanges the code (with the PKCE verifier), verifies the ID token (signature from
// the JWKS, issuer, audience, expiry, then the nonce), reads the user's profile and starts a
// session.
func (a *app) callback(w http.ResponseWriter, r *http.Request) {
	state, err := r.Cookie("productapp_state")
	a.mu.Lock()
	l, ok := a.logins[r.FormValue("state")]
	delete(a.logins, r.FormValue("state"))
	a.mu.Unlock()
	if err != nil || !ok || state.Value != r.FormValue("state") {
		http.Error(w, "This sign-in was not started here, or has already been used.", http.StatusBadRequest)
		return
	}
	if e := r.FormValue("error"); e != "" {
		http.Error(w, "Sign-in failed: "+e, http.StatusForbidden)
		return
	}
	token, err := a.oauth.Exchange(r.Context(), r.FormValue("code"), oauth2.VerifierOption(l.verifier))
	if err != nil {
		http.Error(w, "Sign-in failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	raw, _ := token.Extra("id_token").(string)
	idToken, err := a.idTokens.Verify(r.Context(), raw)
	if err != nil || idToken.Nonce != l.nonce {
		http.Error(w, "Sign-in failed: the ID token is not valid", http.StatusBadGateway)
		return
	}
	// The ID token names the user (sub); the userinfo endpoint gives their profile.
	info, err := a.provider.UserInfo(r.Context(), oauth2.StaticTokenSource(token))
	var u user
	if err == nil {
		err = info.Claims(&u)
	}
	if err != nil || info.Subject != idToken.Subject {
		http.Error(w, "Sign-in failed: no profile", http.StatusBadGateway)
		return
	}
	session := random()
	a.mu.Lock()
	a.sessions[session] = u
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "productapp_session", Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// home greets the signed-in user and says whether their plan includes CSV export.
func (a *app) home(w http.ResponseWriter, r *http.Request) {
	u, ok := a.user(r)
	if !ok {
		render(w, http.StatusOK, `<p>Welcome. <a href="/login">Sign in with Gatehouse</a></p>`, nil)
		return
	}
	export, err := a.entitled(r.Context(), u.ID, "csv_export")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	render(w, http.StatusOK, `<p>Signed in as {{.U.Name}} ({{.U.Email}}).</p>
<ul><li><a href="/reports">Reports</a></li>
<li>CSV export: {{if .Export}}<a href="/export">on</a>{{else}}off (not in your plan){{end}}</li></ul>`,
		map[string]any{"U": u, "Export": export})
}

// reports is shown to users whom the project's RBAC allows reports:read.
func (a *app) reports(w http.ResponseWriter, r *http.Request, u user) {
	var decision struct {
		Data struct {
			Allowed bool `json:"allowed"`
		} `json:"data"`
	}
	err := a.call(r.Context(), "POST", "/api/v1/authorize", map[string]string{"projectId": a.projectID,
		"principalType": "user", "principalId": u.ID, "permission": "reports:read"}, &decision)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
	case !decision.Data.Allowed:
		render(w, http.StatusForbidden, `<p>You are not allowed to see reports.</p>`, nil)
	default:
		render(w, http.StatusOK, `<h2>Reports</h2><p>Revenue is up, {{.Name}}.</p>`, u)
	}
}

// export is the feature gated on an entitlement.
func (a *app) export(w http.ResponseWriter, r *http.Request, u user) {
	on, err := a.entitled(r.Context(), u.ID, "csv_export")
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
	case !on:
		render(w, http.StatusForbidden, `<p>CSV export is not in your plan.</p>`, nil)
	default:
		w.Header().Set("Content-Type", "text/csv")
		fmt.Fprintf(w, "month,revenue\n2026-10,1200\n2026-11,1500\n")
	}
}

// entitled reports whether the subject's entitlements (its plans' and its grants') turn feature on.
func (a *app) entitled(ctx context.Context, subject, feature string) (bool, error) {
	var ent struct {
		Data struct {
			Features map[string]any `json:"features"`
		} `json:"data"`
	}
	path := "/api/v1/projects/" + url.PathEscape(a.projectID) + "/subjects/" + url.PathEscape(subject) + "/entitlements"
	if err := a.call(ctx, "GET", path, nil, &ent); err != nil {
		return false, err
	}
	return ent.Data.Features[feature] == true, nil
}

// call sends a request to Gatehouse's /api/v1 with the product's API key and decodes the answer.
func (a *app) call(ctx context.Context, method, path string, body, out any) error {
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, a.gatehouse+path, &buf)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", a.apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("gatehouse %s %s: %s", method, path, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// signedIn passes the session's user to h, or sends the browser to sign in.
func (a *app) signedIn(h func(http.ResponseWriter, *http.Request, user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if u, ok := a.user(r); ok {
			h(w, r, u)
			return
		}
		http.Redirect(w, r, "/login", http.StatusFound)
	}
}

func (a *app) user(r *http.Request) (user, bool) {
	c, err := r.Cookie("productapp_session")
	if err != nil {
		return user{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.sessions[c.Value]
	return u, ok
}

func render(w http.ResponseWriter, status int, body string, data any) {
	t := template.Must(template.New("").Parse(`<!doctype html><title>Product</title><h1>Product</h1>` + body))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = t.Execute(w, data)
}

func random() string { return rand.Text() }

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
