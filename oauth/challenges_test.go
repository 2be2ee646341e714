package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// consentChallenge starts an authorization request of client in br and returns the consent
// page's challenge.
func (e *providerEnv) consentChallenge(t *testing.T, br *apptest.Browser, clientID string, extra ...string) string {
	t.Helper()
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	res := br.Get(apptest.AuthorizeURL(e.url, clientID, "https://shop.example.com/cb", challenge, extra...))
	res.RedirectParams(t, "to the consent page", "/api/auth/oauth2/consent?")
	return br.Get("/api/auth/oauth2/consent?"+res.Location().RawQuery).Hidden(t, "consent_challenge")
}

// TestOAuthConsentChallengeSingleUse: a consent challenge answers one decision, in the
// session it was issued to; a second post of it, accept or deny, gets the error page.
func TestOAuthConsentChallengeSingleUse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		shop, _ := env.create(t, consentClientBody)
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-replay@example.com")
		bob := env.app.NewUser(t, "Bob Babbage", "bob-replay@example.com")
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)
		other := apptest.NewBrowser(t, env.url)
		other.SignIn(t, bob.Email, "password-"+bob.Email)
		decide := func(b *apptest.Browser, challenge, decision string) apptest.Page {
			return b.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {decision}}, env.url)
		}
		const answered = "This consent request has already been answered."

		// Accepted once: a code; accepted again or denied after: the error page, no code.
		ch := env.consentChallenge(t, br, shop.ID, "prompt", "consent")
		if q := decide(br, ch, "accept").RedirectParams(t, "accept", "https://shop.example.com/cb?"); q.Get("code") == "" {
			t.Fatalf("accept: %v", q)
		}
		decide(br, ch, "accept").WantPage(t, "accept replayed", http.StatusBadRequest, answered, "invalid_request")
		decide(br, ch, "deny").WantPage(t, "deny after accept", http.StatusBadRequest, answered, "invalid_request")

		// Denied once: access_denied; replayed: the error page.
		ch = env.consentChallenge(t, br, shop.ID, "prompt", "consent")
		if q := decide(br, ch, "deny").RedirectParams(t, "deny", "https://shop.example.com/cb?"); q.Get("error") != "access_denied" {
			t.Fatalf("deny: %v", q)
		}
		decide(br, ch, "accept").WantPage(t, "accept after deny", http.StatusBadRequest, answered, "invalid_request")

		// Issued to session A: refused in session B (another user's), and still usable in A.
		ch = env.consentChallenge(t, br, shop.ID, "prompt", "consent")
		other.Get("/api/auth/oauth2/consent?"+url.Values{"consent_challenge": {ch}}.Encode()).
			WantPage(t, "consent page of another session", http.StatusBadRequest, "This consent request is invalid or has expired.")
		decide(other, ch, "accept").WantPage(t, "consent post of another session", http.StatusBadRequest, "This consent request is invalid or has expired.")
		if q := decide(br, ch, "accept").RedirectParams(t, "accept after another session's attempt", "https://shop.example.com/cb?"); q.Get("code") == "" {
			t.Errorf("accept after another session's attempt: %v", q)
		}
	})
}

// TestOAuthPushedContinuationSingleUse: the sign-in page's continuation of a pushed request
// (for a client that requires PAR) works once, in the browser that was shown the page; used
// again, or in another browser (even signed in), it is a plain request and refused.
func TestOAuthPushedContinuationSingleUse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		ctx := context.Background()
		client, _ := env.create(t, parClientBody)
		cfg := &oauth2.Config{ClientID: client.ID, ClientSecret: *client.ClientSecret,
			RedirectURL: "https://par.example.com/cb", Scopes: []string{"openid", "email"},
			Endpoint: oauth2.Endpoint{AuthURL: env.url + "/api/auth/oauth2/authorize",
				TokenURL: env.url + "/api/auth/oauth2/token", AuthStyle: oauth2.AuthStyleInHeader}}
		pe := &paramsEnv{providerEnv: env, webCfg: *cfg}
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-continue@example.com")
		eve := env.app.NewUser(t, "Eve Intruder", "eve-continue@example.com")
		intruder := apptest.NewBrowser(t, env.url)
		intruder.SignIn(t, eve.Email, "password-"+eve.Email)
		refused := func(name string, res apptest.Page) {
			t.Helper()
			if q := res.RedirectParams(t, name, "https://par.example.com/cb?"); q.Get("error") != "invalid_request" || q.Get("code") != "" {
				t.Errorf("%s: %v; want invalid_request", name, q)
			}
		}
		// signInPage pushes a request and opens it in br, signed out: the sign-in page's callback.
		signInPage := func(br *apptest.Browser, verifier string) string {
			t.Helper()
			res := br.Get(pe.pushURI(t, cfg, verifier, nil))
			res.WantPage(t, "sign-in for a pushed request", http.StatusOK, `action="/api/auth/sign-in/email"`)
			return res.Hidden(t, "callbackURL")
		}

		br := apptest.NewBrowser(t, env.url)
		verifier := oauth2.GenerateVerifier()
		callback := signInPage(br, verifier)
		// Another browser, signed in as someone else, cannot use it.
		refused("continuation in another browser", intruder.Get(callback))
		// The browser that was shown the page signs in and continues, once.
		res := br.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"password-" + ada.Email},
			"callbackURL": {callback}}, env.url)
		if res.Status != http.StatusSeeOther || res.Header.Get("Location") != callback {
			t.Fatalf("sign-in: %d %q", res.Status, res.Header.Get("Location"))
		}
		q := br.Get(callback).RedirectParams(t, "continuation", "https://par.example.com/cb?")
		if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err != nil {
			t.Fatalf("token after the continuation: %v (%v)", err, q)
		}
		refused("continuation used twice", br.Get(callback))
		refused("continuation used by another browser after its owner", intruder.Get(callback))

		// A failed sign-in comes back through the continuation to a new sign-in page, whose own
		// continuation then works.
		fresh := apptest.NewBrowser(t, env.url)
		verifier = oauth2.GenerateVerifier()
		callback = signInPage(fresh, verifier)
		res = fresh.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"wrong-password"}, "callbackURL": {callback}}, env.url)
		again := fresh.Get(res.Header.Get("Location"))
		again.WantPage(t, "sign-in page after a failure", http.StatusOK, "The email or password is not correct.")
		callback = again.Hidden(t, "callbackURL")
		fresh.Post("/api/auth/sign-in/email", url.Values{"email": {ada.Email}, "password": {"password-" + ada.Email}, "callbackURL": {callback}}, env.url)
		q = fresh.Get(callback).RedirectParams(t, "continuation after a failed sign-in", "https://par.example.com/cb?")
		if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err != nil {
			t.Errorf("token after a failed, then successful sign-in: %v (%v)", err, q)
		}
	})
}
