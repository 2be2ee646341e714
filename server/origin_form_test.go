package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestFormSignInNeedsTrustedOrigin: login CSRF without an Origin. A form post that can sign a
// browser in — sign-in, sign-up, the social sign-in start — must name a trusted origin in
// Origin or, failing that, Referer, and is refused when the browser says it is cross-site
// (Sec-Fetch-Site), trusted Origin or not; a refused post sets no cookie. JSON posts keep their
// rule: without an Origin (a server-side client) they work, and a trusted product origin on
// another site (Sec-Fetch-Site: cross-site, the better-auth client over CORS) is accepted.
func TestFormSignInNeedsTrustedOrigin(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		fake := newFake(t)
		cfg := testConfig()
		cfg.Social = socialConfig(fake, "github")
		app := newTestApp(t, b.Open(t), cfg)
		app.newUser(t, "Ada", "ada@example.com")

		type want struct {
			status   int
			title    string // refusals: the problem's title
			code     string // refusals: better-auth's code
			location string // 303s: the Location prefix
		}
		var (
			missing   = want{status: 403, title: "Missing or null Origin", code: "MISSING_OR_NULL_ORIGIN"}
			crossSite = want{status: 403, title: "Cross-site navigation login blocked", code: "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED"}
		)
		headerCases := []struct {
			name    string
			headers map[string]string
			refused *want
		}{
			{"no Origin or Referer", nil, &missing},
			{"trusted Origin", map[string]string{"Origin": testBaseURL, "Sec-Fetch-Site": "same-origin"}, nil},
			{"trusted Referer only", map[string]string{"Referer": testBaseURL + "/sign-in?x=1"}, nil},
			{"cross-site with a trusted Origin", map[string]string{"Origin": "https://app.example.com", "Sec-Fetch-Site": "cross-site"}, &crossSite},
			{"cross-site with a trusted Referer", map[string]string{"Referer": "https://app.example.com/", "Sec-Fetch-Site": "cross-site"}, &crossSite},
		}
		n := 0
		routes := []struct {
			name     string
			path     string
			form     func() url.Values
			accepted want
		}{
			{"sign-in", "/api/auth/sign-in/email", func() url.Values {
				return url.Values{"email": {"ada@example.com"}, "password": {"password-ada@example.com"}, "callbackURL": {"/dashboard"}}
			}, want{status: 303, location: "/dashboard"}},
			{"sign-up", "/api/auth/sign-up/email", func() url.Values {
				n++
				return url.Values{"name": {"Eve"}, "email": {fmt.Sprintf("eve-%d@example.com", n)}, "password": {"correct horse battery"}}
			}, want{status: 303, location: "/api/auth/check-inbox?for=verify-email"}},
			{"social sign-in", "/api/auth/sign-in/social", func() url.Values {
				return url.Values{"provider": {"github"}, "callbackURL": {"/dashboard"}}
			}, want{status: 303, location: fake.URL + "/github/authorize?"}},
		}
		for _, r := range routes {
			for _, hc := range headerCases {
				t.Run(r.name+"/"+hc.name, func(t *testing.T) {
					req := request{method: http.MethodPost, path: r.path, body: r.form().Encode(), headers: map[string]string{
						"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html,application/xhtml+xml"}}
					for k, v := range hc.headers {
						req.headers[k] = v
					}
					res := app.do(req)
					if hc.refused != nil {
						res.wantProblem(t, hc.refused.status, "http-403", hc.refused.title)
						var body struct{ Code, Message string }
						_ = json.Unmarshal(res.Body.Bytes(), &body)
						if body.Code != hc.refused.code || body.Message != hc.refused.title {
							t.Errorf("code %q message %q; want %q %q", body.Code, body.Message, hc.refused.code, hc.refused.title)
						}
						if sc := res.Header().Values("Set-Cookie"); len(sc) > 0 {
							t.Errorf("refused form post set cookies: %v", sc)
						}
						return
					}
					if res.Code != r.accepted.status || !strings.HasPrefix(res.Header().Get("Location"), r.accepted.location) {
						t.Fatalf("status %d Location %q; want %d to %q… (%s)", res.Code, res.Header().Get("Location"),
							r.accepted.status, r.accepted.location, res.Body)
					}
					if len(res.Header().Values("Set-Cookie")) == 0 {
						t.Error("accepted form post set no cookie")
					}
				})
			}
		}

		// JSON posts keep today's rule.
		for _, c := range []struct {
			name    string
			headers map[string]string
		}{
			{"JSON without Origin", nil},
			{"JSON cross-site from a trusted product origin", map[string]string{"Origin": "https://app.example.com", "Sec-Fetch-Site": "cross-site"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				var body signInBody
				app.do(request{method: http.MethodPost, path: "/api/auth/sign-in/email", headers: c.headers,
					body: `{"email":"ada@example.com","password":"password-ada@example.com"}`}).decode(t, http.StatusOK, &body)
				if !tokenRE.MatchString(body.Token) || body.User.Email != "ada@example.com" {
					t.Errorf("JSON sign-in: %+v", body)
				}
			})
		}
	})
}
