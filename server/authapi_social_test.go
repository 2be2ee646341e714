package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/socialtest"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// socialEnv is the real server on a loopback listener with GitHub and Google pointed at a
// local fake (package socialtest).
type socialEnv struct {
	app  *testApp
	url  string
	fake *socialtest.Fake
}

func newFake(t *testing.T) *socialtest.Fake {
	t.Helper()
	fake, err := socialtest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake
}

// socialConfig configures providers against fake.
func socialConfig(fake *socialtest.Fake, providers ...string) []SocialConfig {
	var out []SocialConfig
	for _, p := range providers {
		out = append(out, SocialConfig{ID: p, ClientID: socialtest.ClientID, ClientSecret: socialtest.ClientSecret,
			Endpoints: fake.Endpoints(p)})
	}
	return out
}

// serveApp starts an app over st with cfg on a loopback listener whose URL is the base URL.
func serveApp(t *testing.T, st *store.Store, cfg Config) (*testApp, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	cfg.BaseURL = base
	app := newTestApp(t, st, cfg)
	srv.Config.Handler = app.srv.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return app, base
}

func newSocialEnv(t *testing.T, st *store.Store, fake *socialtest.Fake, providers ...string) *socialEnv {
	t.Helper()
	cfg := testConfig()
	cfg.Social = socialConfig(fake, providers...)
	cfg.TrustedOrigins = append(cfg.TrustedOrigins, testBaseURL) // the fixtures call from testBaseURL
	app, base := serveApp(t, st, cfg)
	return &socialEnv{app: app, url: base, fake: fake}
}

// start posts sign-in/social as JSON from the base origin and returns the answer.
func (e *socialEnv) start(t *testing.T, br *apptest.Browser, body string) (apptest.Page, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+"/api/auth/sign-in/social", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", e.url)
	res := br.Do(req)
	var out map[string]any
	_ = json.Unmarshal([]byte(res.Body), &out)
	return res, out
}

// flowCookie returns the browser's social flow cookie ("" when none).
func (e *socialEnv) flowCookie(br *apptest.Browser) *http.Cookie {
	u, _ := url.Parse(e.url)
	for _, c := range br.Client.Jar.Cookies(u) {
		if c.Name == "gatehouse.social_flow" {
			return c
		}
	}
	return nil
}

// signInWith runs a whole social sign-in in br: start, the provider's authorize redirect, and
// the callback. It returns the callback's answer and the callback URL it followed.
func (e *socialEnv) signInWith(t *testing.T, br *apptest.Browser, body string) (apptest.Page, string) {
	t.Helper()
	res, out := e.start(t, br, body)
	if res.Status != http.StatusOK || out["redirect"] != true {
		t.Fatalf("sign-in/social: %d %s", res.Status, res.Body)
	}
	res = br.Get(out["url"].(string))
	if res.Status != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), e.url+"/api/auth/callback/") {
		t.Fatalf("provider authorize: %d %v %s", res.Status, res.Header, res.Body)
	}
	callback := res.Header.Get("Location")
	return br.Get(callback), callback
}

// session returns the browser's get-session user, nil when signed out.
func (e *socialEnv) session(t *testing.T, br *apptest.Browser) map[string]any {
	t.Helper()
	res := br.Get("/api/auth/get-session")
	var out struct {
		User map[string]any `json:"user"`
	}
	if err := json.Unmarshal([]byte(res.Body), &out); err != nil {
		t.Fatalf("get-session: %d %s", res.Status, res.Body)
	}
	return out.User
}

// accounts returns the browser's list-accounts as provider → accountId.
func (e *socialEnv) accounts(t *testing.T, br *apptest.Browser) (map[string]string, string) {
	t.Helper()
	res := br.Get("/api/auth/list-accounts")
	var list []struct {
		ProviderID string   `json:"providerId"`
		AccountID  string   `json:"accountId"`
		Scopes     []string `json:"scopes"`
	}
	if err := json.Unmarshal([]byte(res.Body), &list); err != nil || res.Status != http.StatusOK {
		t.Fatalf("list-accounts: %d %s", res.Status, res.Body)
	}
	out := map[string]string{}
	for _, a := range list {
		out[a.ProviderID] = a.AccountID
	}
	return out, res.Body
}

func wantRedirect(t *testing.T, name string, res apptest.Page, want string) {
	t.Helper()
	if res.Status != http.StatusFound || res.Header.Get("Location") != want {
		t.Errorf("%s: %d Location %q; want 302 to %q (%s)", name, res.Status, res.Header.Get("Location"), want, res.Body)
	}
}

// TestSocialSignIn drives GitHub and Google sign-ins through the local fake: a new user,
// the same account again, linking by a verified email, refusing an unverified one, a state
// mismatch, a replayed callback, a missing flow cookie, a bad ID token signature.
func TestSocialSignIn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st, _ := saOpen(t, b)
		fake := newFake(t)
		env := newSocialEnv(t, st, fake, identity.GitHub, identity.Google)
		ctx := context.Background()

		// The providers are advertised, and the start answer is GitHub's authorize URL with
		// state and an S256 challenge.
		res := apptest.NewBrowser(t, env.url).Get("/api/auth/providers")
		if res.Status != 200 || strings.TrimSpace(res.Body) != `{"providers":[{"id":"github","name":"GitHub"},{"id":"google","name":"Google"}]}` {
			t.Errorf("providers: %d %s", res.Status, res.Body)
		}

		// 1. A new user through GitHub, with a verified primary email.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "1001", Login: "grace", Name: "Grace Hopper",
			Email: "Grace@Example.com", EmailVerified: true})
		br := apptest.NewBrowser(t, env.url)
		start, out := env.start(t, br, `{"provider":"github","callbackURL":"/dashboard","newUserCallbackURL":"/welcome"}`)
		authURL, _ := url.Parse(out["url"].(string))
		if q := authURL.Query(); start.Status != 200 || !strings.HasPrefix(out["url"].(string), fake.URL+"/github/authorize?") ||
			q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || len(q.Get("state")) != 43 ||
			q.Get("redirect_uri") != env.url+"/api/auth/callback/github" || q.Get("scope") != "read:user user:email" {
			t.Errorf("start: %d %s", start.Status, start.Body)
		}
		if c := env.flowCookie(br); c == nil || !strings.Contains(start.Header.Get("Set-Cookie"), "HttpOnly") ||
			!strings.Contains(start.Header.Get("Set-Cookie"), "SameSite=Lax") || !strings.Contains(start.Header.Get("Set-Cookie"), "Max-Age=600") {
			t.Errorf("flow cookie: %q", start.Header.Get("Set-Cookie"))
		}
		res = br.Get(out["url"].(string))
		res = br.Get(res.Header.Get("Location"))
		wantRedirect(t, "new GitHub user", res, "/welcome")
		user := env.session(t, br)
		if user == nil || user["email"] != "grace@example.com" || user["emailVerified"] != true || user["name"] != "Grace Hopper" {
			t.Fatalf("new GitHub user session: %v", user)
		}
		if env.flowCookie(br) != nil {
			t.Error("the flow cookie outlived the callback")
		}
		accounts, raw := env.accounts(t, br)
		if len(accounts) != 1 || accounts["github"] != "1001" || !strings.Contains(raw, `"scopes":["read:user","user:email"]`) {
			t.Errorf("list-accounts of the new user: %s", raw)
		}

		// 2. The same GitHub account again signs in the same user, to callbackURL.
		br2 := apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br2, `{"provider":"github","callbackURL":"/dashboard","newUserCallbackURL":"/welcome"}`)
		wantRedirect(t, "returning GitHub user", res, "/dashboard")
		if again := env.session(t, br2); again == nil || again["id"] != user["id"] {
			t.Errorf("returning GitHub user: %v, want %v", again, user["id"])
		}

		// 3. Google with a verified email links to the existing password user, whose email is
		// verified (an unverified one is taken over: TestSocialLinkTakesOverUnverifiedAccount).
		ada := env.app.newVerifiedFixtureUser(t, "Ada Lovelace", "ada-social@example.com")
		fake.SetUser(identity.Google, socialtest.User{ID: "google-sub-ada", Name: "Ada L.", Email: "ada-social@example.com", EmailVerified: true})
		br3 := apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br3, `{"provider":"google","callbackURL":"https://app.example.com/home"}`)
		wantRedirect(t, "Google linking by verified email", res, "https://app.example.com/home")
		if got := env.session(t, br3); got == nil || got["id"] != ada.ID {
			t.Errorf("Google linking: signed in as %v, want %s", got, ada.ID)
		}
		if accounts, raw := env.accounts(t, br3); accounts["credential"] != ada.ID || accounts["google"] != "google-sub-ada" {
			t.Errorf("list-accounts after linking: %s", raw)
		}

		// 4. An unverified email that belongs to a user is refused: no session, no link.
		bob := env.app.newVerifiedFixtureUser(t, "Bob", "bob-social@example.com")
		fake.SetUser(identity.GitHub, socialtest.User{ID: "2002", Login: "mallory", Email: "bob-social@example.com", EmailVerified: false})
		br4 := apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br4, `{"provider":"github","callbackURL":"/dashboard","errorCallbackURL":"/sign-in"}`)
		wantRedirect(t, "unverified email of an existing user", res, "/sign-in?error=email_not_verified")
		if got := env.session(t, br4); got != nil {
			t.Errorf("unverified email signed in as %v", got)
		}
		if linked, err := st.LinkedAccounts(ctx, bob.ID); err != nil || len(linked) != 1 || linked[0].ProviderID != "credential" {
			t.Errorf("bob's accounts after the refusal: %v %v", linked, err)
		}
		// A GitHub account whose only verified address is not primary links through it.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "2003", Login: "bob", Email: "bob-old@example.com", EmailVerified: false,
			ExtraEmails: []socialtest.Email{{Email: "bob-social@example.com", Verified: true}}})
		res, _ = env.signInWith(t, apptest.NewBrowser(t, env.url), `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "verified secondary email", res, "/dashboard")
		if linked, _ := st.LinkedAccounts(ctx, bob.ID); len(linked) != 2 {
			t.Errorf("bob's accounts after linking through a verified secondary address: %v", linked)
		}
		// An unverified email nobody has creates a user, whose email stays unverified.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "2004", Login: "newbie", Email: "newbie@example.com", EmailVerified: false})
		br5 := apptest.NewBrowser(t, env.url)
		res, _ = env.signInWith(t, br5, `{"provider":"github","callbackURL":"/dashboard"}`)
		wantRedirect(t, "unverified email, new user", res, "/dashboard")
		if got := env.session(t, br5); got == nil || got["email"] != "newbie@example.com" || got["emailVerified"] != false || got["name"] != "newbie" {
			t.Errorf("unverified new user: %v", got)
		}

		// 5. A state mismatch is refused, and spends nothing.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "1001", Login: "grace", Email: "grace@example.com", EmailVerified: true})
		br6 := apptest.NewBrowser(t, env.url)
		_, out = env.start(t, br6, `{"provider":"github","callbackURL":"/dashboard"}`)
		res = br6.Get(out["url"].(string))
		cb, _ := url.Parse(res.Header.Get("Location"))
		q := cb.Query()
		q.Set("state", "forged-state-forged-state-forged-state-forg")
		cb.RawQuery = q.Encode()
		exchanges := fake.Exchanges
		res = br6.Get(cb.String())
		wantRedirect(t, "state mismatch", res, "/dashboard?error=state_mismatch")
		if got := env.session(t, br6); got != nil || fake.Exchanges != exchanges {
			t.Errorf("state mismatch: session %v, exchanges %d → %d", got, exchanges, fake.Exchanges)
		}

		// 6. A replayed callback is refused even with the flow cookie.
		br7 := apptest.NewBrowser(t, env.url)
		_, out = env.start(t, br7, `{"provider":"github","callbackURL":"/dashboard"}`)
		flow := env.flowCookie(br7)
		res = br7.Get(out["url"].(string))
		callback := res.Header.Get("Location")
		wantRedirect(t, "first callback", br7.Get(callback), "/dashboard")
		replay := apptest.NewBrowser(t, env.url)
		req, _ := http.NewRequest("GET", callback, nil)
		req.AddCookie(&http.Cookie{Name: flow.Name, Value: flow.Value})
		res = replay.Do(req)
		wantRedirect(t, "replayed callback", res, "/dashboard?error=invalid_state")
		if strings.Contains(res.Header.Get("Set-Cookie"), env.app.srv.sessionCookieName+"=") &&
			!strings.Contains(res.Header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("replayed callback set a session: %v", res.Header["Set-Cookie"])
		}

		// 7. Without the flow cookie (another browser): 400 INVALID_STATE.
		res = apptest.NewBrowser(t, env.url).Get(callback)
		if res.Status != http.StatusBadRequest || !strings.Contains(res.Body, `"code":"INVALID_STATE"`) {
			t.Errorf("callback without the flow cookie: %d %s", res.Status, res.Body)
		}

		// 8. Google's ID token signed by a key it does not publish.
		fake.BadIDTokenKey = true
		res, _ = env.signInWith(t, apptest.NewBrowser(t, env.url), `{"provider":"google","callbackURL":"/dashboard"}`)
		wantRedirect(t, "bad ID token signature", res, "/dashboard?error=provider_error")
		fake.BadIDTokenKey = false

		// 9. Refusals at the start: an off-site callbackURL, a bad provider, no session for list-accounts.
		for _, c := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"untrusted callbackURL", `{"provider":"github","callbackURL":"https://evil.example.com/"}`, 403, "INVALID_CALLBACK_URL"},
			{"untrusted errorCallbackURL", `{"provider":"github","errorCallbackURL":"//evil.example.com/"}`, 403, "INVALID_CALLBACK_URL"},
			{"unknown provider", `{"provider":"gitlab"}`, 400, "VALIDATION_ERROR"},
		} {
			res, _ := env.start(t, apptest.NewBrowser(t, env.url), c.body)
			if res.Status != c.status || !strings.Contains(res.Body, `"code":"`+c.code+`"`) {
				t.Errorf("%s: %d %s", c.name, res.Status, res.Body)
			}
		}
		if res := apptest.NewBrowser(t, env.url).Get("/api/auth/list-accounts"); res.Status != http.StatusUnauthorized {
			t.Errorf("list-accounts without a session: %d %s", res.Status, res.Body)
		}
	})
}

// TestSocialButtonsFollowConfiguration: the sign-in page shows a button per configured
// provider and starts the flow with a form post; restarted with a provider's variables
// removed, its button, its providers entry, its start and its callback are gone (404).
func TestSocialButtonsFollowConfiguration(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st, _ := saOpen(t, b)
		fake := newFake(t)
		env := newSocialEnv(t, st, fake, identity.GitHub, identity.Google)
		ten := env.app.newTenancy(t)
		project := saProject(t, env.app, ten, "social-buttons")
		client, _ := env.app.CreateOIDCClient(t, apptest.User(ten.members[RoleOwner]), project.ID, webClientBody, env.url)
		challenge := "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

		signInPage := func(e *socialEnv) apptest.Page {
			t.Helper()
			res := apptest.NewBrowser(t, e.url).Get(apptest.AuthorizeURL(e.url, client.ID, "https://shop.example.com/cb", challenge))
			res.WantPage(t, "sign-in page", http.StatusOK, `action="/api/auth/sign-in/email"`)
			return res
		}
		res := signInPage(env)
		for _, want := range []string{`name="provider" value="github"`, `>Continue with GitHub</button>`,
			`name="provider" value="google"`, `>Continue with Google</button>`} {
			if !strings.Contains(res.Body, want) {
				t.Errorf("sign-in page lacks %q", want)
			}
		}
		// The button's form post goes straight to the provider, the flow cookie set.
		fake.SetUser(identity.GitHub, socialtest.User{ID: "3003", Login: "lin", Email: "lin@example.com", EmailVerified: true})
		br := apptest.NewBrowser(t, env.url)
		callback := res.Hidden(t, "callbackURL")
		start := br.Post("/api/auth/sign-in/social", url.Values{"provider": {"github"}, "callbackURL": {callback},
			"errorCallbackURL": {res.Hidden(t, "errorCallbackURL")}}, env.url)
		if start.Status != http.StatusSeeOther || !strings.HasPrefix(start.Header.Get("Location"), fake.URL+"/github/authorize?") ||
			env.flowCookie(br) == nil {
			t.Fatalf("button post: %d %v %s", start.Status, start.Header, start.Body)
		}
		// Through the provider, back signed in, on to the authorization request: a code.
		res = br.Get(start.Header.Get("Location"))
		githubCallback := res.Header.Get("Location")
		res = br.Get(githubCallback)
		wantRedirect(t, "social sign-in from the page", res, callback)
		res = br.Get(res.Header.Get("Location"))
		if q := res.RedirectParams(t, "authorization after social sign-in", "https://shop.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("authorization after social sign-in: %v", q)
		}

		// Restarted without GitHub's variables.
		googleOnly := newSocialEnv(t, st, fake, identity.Google)
		res = signInPage(googleOnly)
		if strings.Contains(res.Body, `value="github"`) || !strings.Contains(res.Body, `value="google"`) {
			t.Errorf("sign-in page without GitHub:\n%s", res.Body)
		}
		if res := apptest.NewBrowser(t, googleOnly.url).Get("/api/auth/providers"); strings.TrimSpace(res.Body) != `{"providers":[{"id":"google","name":"Google"}]}` {
			t.Errorf("providers without GitHub: %s", res.Body)
		}
		cb, _ := url.Parse(githubCallback)
		res = apptest.NewBrowser(t, googleOnly.url).Get(googleOnly.url + cb.RequestURI())
		if res.Status != http.StatusNotFound || !strings.Contains(res.Body, `"code":"PROVIDER_NOT_FOUND"`) {
			t.Errorf("GitHub callback without GitHub: %d %s", res.Status, res.Body)
		}
		if res, _ := googleOnly.start(t, apptest.NewBrowser(t, googleOnly.url), `{"provider":"github"}`); res.Status != http.StatusNotFound {
			t.Errorf("GitHub start without GitHub: %d %s", res.Status, res.Body)
		}

		// Restarted with none: no buttons at all.
		none := newSocialEnv(t, st, fake)
		if res := signInPage(none); strings.Contains(res.Body, "sign-in/social") || strings.Contains(res.Body, "Continue with") {
			t.Errorf("sign-in page without providers shows buttons:\n%s", res.Body)
		}
		if res := apptest.NewBrowser(t, none.url).Get("/api/auth/providers"); strings.TrimSpace(res.Body) != `{"providers":[]}` {
			t.Errorf("providers without any: %s", res.Body)
		}
		if res := apptest.NewBrowser(t, none.url).Get(none.url + "/api/auth/callback/google?code=x&state=y"); res.Status != http.StatusNotFound {
			t.Errorf("Google callback without Google: %d %s", res.Status, res.Body)
		}
	})
}
