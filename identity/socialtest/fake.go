// Package socialtest is a local fake of GitHub and Google for tests: a real HTTP server that
// speaks their protocols. Its authorization endpoints approve at once (redirecting back with a
// code and the state), its token endpoints check the client credentials, the redirect URI and
// the PKCE code_verifier against the S256 challenge, and each code works once. GitHub's side
// serves /user and /user/emails for the access token; Google's answers an RS256 ID token
// (iss, aud, sub, email, email_verified, nonce) signed with a key published at its JWKS URL.
package socialtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/gatehouse-dev/gatehouse/identity"
)

// Client credentials the fake accepts (for both providers).
const (
	ClientID     = "fake-client-id"
	ClientSecret = "fake-client-secret"
)

// User is the account the fake signs in as, per provider (SetUser).
type User struct {
	// ID is GitHub's numeric id (as text) or Google's sub.
	ID    string
	Login string
	Name  string
	// Email and EmailVerified: Google's claims, and GitHub's primary address.
	Email         string
	EmailVerified bool
	// ExtraEmails are more GitHub addresses (not primary).
	ExtraEmails []Email
}

// Email is one of GitHub's /user/emails entries.
type Email struct {
	Email    string `json:"email"`
	Primary  bool   `json:"primary"`
	Verified bool   `json:"verified"`
}

type grant struct {
	provider, redirectURI, challenge, nonce string
	user                                    User
}

// Fake is the running fake. Close it when done.
type Fake struct {
	URL string
	srv *httptest.Server
	key *rsa.PrivateKey

	mu     sync.Mutex
	users  map[string]User
	codes  map[string]grant
	tokens map[string]User
	// Exchanges counts successful code exchanges.
	Exchanges int
	// BadIDTokenKey, when set, makes Google sign ID tokens with a key it does not publish.
	BadIDTokenKey bool
}

// New starts a fake.
func New() (*Fake, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	f := &Fake{key: key, users: map[string]User{}, codes: map[string]grant{}, tokens: map[string]User{}}
	mux := http.NewServeMux()
	for _, p := range []string{identity.GitHub, identity.Google} {
		mux.HandleFunc("GET /"+p+"/authorize", f.authorize(p))
		mux.HandleFunc("POST /"+p+"/token", f.token(p))
	}
	mux.HandleFunc("GET /github/api/user", f.githubUser)
	mux.HandleFunc("GET /github/api/user/emails", f.githubEmails)
	mux.HandleFunc("GET /google/jwks", f.jwks)
	f.srv = httptest.NewServer(mux)
	f.URL = f.srv.URL
	return f, nil
}

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// SetUser makes provider sign in as u from now on.
func (f *Fake) SetUser(provider string, u User) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[provider] = u
}

// Endpoints returns the fake's endpoints for provider, to configure Gatehouse with.
func (f *Fake) Endpoints(provider string) identity.SocialEndpoints {
	b := f.URL + "/" + provider
	e := identity.SocialEndpoints{AuthURL: b + "/authorize", TokenURL: b + "/token"}
	if provider == identity.GitHub {
		e.APIURL = b + "/api"
	} else {
		e.Issuer, e.JWKSURL = b, b+"/jwks"
	}
	return e
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (f *Fake) authorize(provider string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != ClientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
			q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("redirect_uri") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		u, ok := f.users[provider]
		code := random()
		f.codes[code] = grant{provider: provider, redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
			nonce: q.Get("nonce"), user: u}
		f.mu.Unlock()
		if !ok {
			http.Error(w, "no user set", http.StatusInternalServerError)
			return
		}
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		bq := back.Query()
		bq.Set("code", code)
		bq.Set("state", q.Get("state"))
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	}
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func (f *Fake) token(provider string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			tokenError(w, "invalid_request")
			return
		}
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if id != ClientID || secret != ClientSecret {
			tokenError(w, "invalid_client")
			return
		}
		f.mu.Lock()
		g, ok := f.codes[r.PostForm.Get("code")]
		delete(f.codes, r.PostForm.Get("code"))
		f.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || g.provider != provider || r.PostForm.Get("grant_type") != "authorization_code":
			tokenError(w, "invalid_grant")
			return
		case g.redirectURI != r.PostForm.Get("redirect_uri"):
			tokenError(w, "invalid_grant")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			tokenError(w, "invalid_grant") // PKCE verification failed
			return
		}
		access := random()
		f.mu.Lock()
		f.tokens[access] = g.user
		f.Exchanges++
		f.mu.Unlock()
		resp := map[string]any{"access_token": access, "token_type": "bearer"}
		if provider == identity.GitHub {
			resp["scope"] = "read:user,user:email"
		} else {
			resp["scope"] = "openid email profile"
			resp["expires_in"] = 3599
			idt, err := f.idToken(g)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			resp["id_token"] = idt
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}
}

func (f *Fake) idToken(g grant) (string, error) {
	key := f.key
	if f.BadIDTokenKey {
		var err error
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return "", err
		}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "fake-google-1"))
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims := map[string]any{"iss": f.URL + "/google", "aud": ClientID, "sub": g.user.ID, "iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "email": g.user.Email, "email_verified": g.user.EmailVerified,
		"name": g.user.Name}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

func (f *Fake) bearer(w http.ResponseWriter, r *http.Request) (User, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	u, known := f.tokens[tok]
	f.mu.Unlock()
	if !ok || !known {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return User{}, false
	}
	return u, true
}

func (f *Fake) githubUser(w http.ResponseWriter, r *http.Request) {
	u, ok := f.bearer(w, r)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(u.ID, 10, 64)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "login": u.Login, "name": u.Name,
		"avatar_url": "https://avatars.example.com/" + u.Login})
}

func (f *Fake) githubEmails(w http.ResponseWriter, r *http.Request) {
	u, ok := f.bearer(w, r)
	if !ok {
		return
	}
	emails := []Email{}
	if u.Email != "" {
		emails = append(emails, Email{Email: u.Email, Primary: true, Verified: u.EmailVerified})
	}
	emails = append(emails, u.ExtraEmails...)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(emails)
}

func (f *Fake) jwks(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &f.key.PublicKey, KeyID: "fake-google-1", Algorithm: "RS256", Use: "sig"}}})
}
