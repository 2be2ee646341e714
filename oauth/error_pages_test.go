package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestOAuthErrorPageMessages: the error page speaks to the person in front of it, one sentence
// per error, with the error code small underneath and none of RFC 6749's descriptions.
func TestOAuthErrorPageMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		const cb = "https://shop.example.com/cb"
		ada := env.app.NewUser(t, "Ada Lovelace", "ada-pages@example.com")
		br := apptest.NewBrowser(t, env.url)
		br.SignIn(t, ada.Email, "password-"+ada.Email)
		anonymous := apptest.NewBrowser(t, env.url)
		challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
		shop, _ := env.create(t, consentClientBody)
		disabled, _ := env.create(t, apptest.WebClientBody)
		env.disable(t, disabled.ID)
		par, _ := env.create(t, parClientBody)
		parCfg := &oauth2.Config{ClientID: par.ID, ClientSecret: *par.ClientSecret, RedirectURL: "https://par.example.com/cb",
			Scopes: []string{"openid"}, Endpoint: oauth2.Endpoint{TokenURL: env.url + "/api/auth/oauth2/token"}}
		requestURI := func() string {
			t.Helper()
			res := env.push(t, parCfg, oauth2.GenerateVerifier(), nil)
			var pr struct {
				RequestURI string `json:"request_uri"`
			}
			if err := json.Unmarshal([]byte(res.Body), &pr); err != nil || pr.RequestURI == "" {
				t.Fatalf("push: %d %s", res.Status, res.Body)
			}
			return pr.RequestURI
		}
		authorize := func(q url.Values) string { return env.url + "/api/auth/oauth2/authorize?" + q.Encode() }
		used := requestURI()
		br.Get(authorize(url.Values{"client_id": {par.ID}, "request_uri": {used}})).RedirectParams(t, "use the request_uri", "https://par.example.com/cb?")

		const (
			unknownApp  = "This application isn&#39;t known here."
			notReturn   = "This application&#39;s return address isn&#39;t registered."
			noReturn    = "This application didn&#39;t say where to send you back."
			malformed   = "This sign-in link is malformed."
			usedLink    = "This sign-in link has expired or has already been used."
			otherApp    = "This sign-in link belongs to another application."
			cannotServe = "This application&#39;s request can&#39;t be completed."
		)
		for _, c := range []struct {
			name, url, code, sentence string
		}{
			{"unknown client", apptest.AuthorizeURL(env.url, "cli_00000000000000000000000000", cb, challenge), "invalid_client", unknownApp},
			{"disabled client", apptest.AuthorizeURL(env.url, disabled.ID, cb, challenge), "invalid_client", unknownApp},
			{"no client_id", apptest.AuthorizeURL(env.url, "", cb, challenge, "client_id", ""), "invalid_client", unknownApp},
			{"redirect_uri of another site", apptest.AuthorizeURL(env.url, shop.ID, "https://evil.example/cb", challenge), "invalid_request", notReturn},
			{"redirect_uri with a trailing slash", apptest.AuthorizeURL(env.url, shop.ID, cb+"/", challenge), "invalid_request", notReturn},
			{"no redirect_uri", apptest.AuthorizeURL(env.url, env.web.ID, "", challenge, "redirect_uri", ""), "invalid_request", noReturn},
			{"repeated client_id", apptest.AuthorizeURL(env.url, shop.ID, cb, challenge) + "&client_id=" + shop.ID, "invalid_request", malformed},
			{"unreadable query", apptest.AuthorizeURL(env.url, shop.ID, cb, challenge) + "&x=%zz", "invalid_request", malformed},
			{"used request_uri", authorize(url.Values{"client_id": {par.ID}, "request_uri": {used}}), "invalid_request_uri", usedLink},
			{"request_uri of another client", authorize(url.Values{"client_id": {shop.ID}, "request_uri": {requestURI()}}), "invalid_request", otherApp},
			{"unknown response_mode", apptest.AuthorizeURL(env.url, shop.ID, cb, challenge, "response_mode", "bogus"), "unsupported_response_mode", cannotServe},
		} {
			for _, who := range []*apptest.Browser{br, anonymous} {
				page := who.Get(c.url)
				page.WantPage(t, c.name, http.StatusBadRequest, "<p class=\"error\" role=\"alert\">"+c.sentence+"</p>", "<code>"+c.code+"</code>")
				if strings.Contains(page.Body, "The request is missing a required parameter") || strings.Contains(page.Body, "OAuth 2.0") ||
					strings.Contains(page.Body, "Client authentication failed") {
					t.Errorf("%s: the page speaks RFC 6749:\n%s", c.name, page.Body)
				}
			}
		}

		// The consent side.
		res := br.Get(apptest.AuthorizeURL(env.url, shop.ID, cb, challenge))
		res.RedirectParams(t, "to consent", "/api/auth/oauth2/consent?")
		consentURL := "/api/auth/oauth2/consent?" + res.Location().RawQuery
		ch := br.Get(consentURL).Hidden(t, "consent_challenge")
		anonymous.Get(consentURL).WantPage(t, "consent page signed out", http.StatusBadRequest,
			`role="alert">You&#39;re not signed in.</p>`, "<code>login_required</code>")
		br.Get(consentURL+"x").WantPage(t, "forged consent challenge", http.StatusBadRequest,
			`role="alert">This consent request is invalid or has expired.</p>`, "<code>invalid_request</code>")
		br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {ch}, "decision": {"accept"}}, "").
			WantPage(t, "consent without Origin", http.StatusForbidden, `role="alert">This form wasn&#39;t sent from this site.</p>`, "<code>access_denied</code>")
		br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {ch}}, env.url).
			WantPage(t, "consent without a decision", http.StatusBadRequest, `role="alert">Choose Allow or Deny.</p>`, "<code>invalid_request</code>")
		env.disable(t, shop.ID)
		br.Get(consentURL).WantPage(t, "consent page of a client disabled meanwhile", http.StatusBadRequest,
			`role="alert">`+unknownApp+`</p>`, "<code>invalid_client</code>")
		br.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {ch}, "decision": {"accept"}}, env.url).
			WantPage(t, "consent post of a client disabled meanwhile", http.StatusBadRequest, `role="alert">`+unknownApp+`</p>`, "<code>invalid_client</code>")
	})
}

// TestOAuthErrorPageServerError: a store that fails shows the error page's own sentence, not
// the driver's error.
func TestOAuthErrorPageServerError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		env := newProviderEnv(t, b)
		if err := env.app.Store.Close(); err != nil {
			t.Fatal(err)
		}
		page := apptest.NewBrowser(t, env.url).Get(env.url + "/api/auth/oauth2/authorize?" +
			url.Values{"client_id": {env.web.ID}, "request_uri": {"urn:ietf:params:oauth:request_uri:abc"}}.Encode())
		page.WantPage(t, "store failure", http.StatusInternalServerError, `role="alert">Something went wrong on our side.</p>`, "<code>server_error</code>")
		if strings.Contains(page.Body, "sql") || strings.Contains(page.Body, "closed") {
			t.Errorf("the page leaks the store's error:\n%s", page.Body)
		}
	})
}
