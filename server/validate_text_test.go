package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// wantTextMessage is the message of a field that holds a NUL character or is not valid UTF-8.
const wantTextMessage = "must be valid UTF-8 without NUL characters"

// wantTextProblem asserts a 400 /problems/validation "Validation failed" whose errors are
// exactly want (path joined with "." → message), in order.
func wantTextProblem(t *testing.T, rec response, want ...[2]string) {
	t.Helper()
	p := rec.wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
	var got [][2]string
	for _, e := range p.Errors {
		got = append(got, [2]string{strings.Join(e.Path, "."), e.Message})
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors = %q, want %q", got, want)
	}
}

// TestHostileTextIsValidationProblem: PostgreSQL refuses NUL and invalid UTF-8 in text, SQLite
// stores them, so the service decides at the edge, on every backend alike: a path id, query
// value, header or JSON string (at any depth, member names included) that is not UTF-8 text
// without NUL is a 400 /problems/validation naming the field, before any query; nothing is
// written.
func TestHostileTextIsValidationProblem(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		cookie := map[string]string{"Cookie": owner.Cookie, "Origin": testBaseURL}
		env := ten.project.Environments[0].ID
		prj := "/api/v1/projects/" + ten.project.ID
		send := func(method, uri, body string, headers map[string]string) response {
			c := fuzzCase{method: method, uri: uri, body: body}
			if body != "" {
				c.contentType = "application/json"
			}
			return response{app.doRaw(c, headers)}
		}
		audits := func() int {
			t.Helper()
			rows, err := app.store.ListAudit(context.Background(), store.AuditFilter{OrganizationID: ten.org.ID})
			if err != nil {
				t.Fatal(err)
			}
			return len(rows)
		}
		before := audits()

		for _, raw := range []string{"%FF%FE%FD", "org_x%00", "%C0%AE%C0%AE%C0%AF"} {
			t.Run("path "+raw, func(t *testing.T) {
				wantTextProblem(t, send("GET", "/api/v1/organizations/"+raw, "", cookie),
					[2]string{"path.organizationId", wantTextMessage})
				wantTextProblem(t, send("DELETE", "/api/v1/organizations/"+raw, "", cookie),
					[2]string{"path.organizationId", wantTextMessage})
				wantTextProblem(t, send("GET", "/api/v1/projects/"+raw+"/roles", "", map[string]string{"X-API-Key": ten.starKey}),
					[2]string{"path.projectId", wantTextMessage})
				wantTextProblem(t, send("PUT", "/api/v1/environments/"+raw+"/configs/HOSTILE", `{"value":1}`, cookie),
					[2]string{"path.environmentId", wantTextMessage})
			})
		}
		t.Run("query", func(t *testing.T) {
			wantTextProblem(t, send("GET", prj+"/analytics/summary?environmentId=%00", "", cookie),
				[2]string{"query.environmentId", wantTextMessage})
			wantTextProblem(t, send("GET", prj+"/role-bindings?principalId=%00", "", cookie),
				[2]string{"query.principalId", wantTextMessage})
			wantTextProblem(t, send("GET", prj+"/role-bindings?principalId=a%FFb", "", cookie),
				[2]string{"query.principalId", wantTextMessage})
		})
		t.Run("header", func(t *testing.T) {
			h := map[string]string{"Cookie": owner.Cookie, "Origin": testBaseURL, "Idempotency-Key": "checkout-\xff\xfe-0000000001"}
			wantTextProblem(t, send("POST", prj+"/billing/checkout", `{"environmentId":"`+env+`","subjectId":"usr_1","planKey":"`+ten.planKey+
				`","successUrl":"https://app.example.com/ok","cancelUrl":"https://app.example.com/no"}`, h),
				[2]string{"header.idempotency-key", wantTextMessage})
		})
		t.Run("body", func(t *testing.T) {
			configs := "/api/v1/environments/" + env + "/configs/HOSTILE"
			wantTextProblem(t, send("PUT", configs, `{"value":"x\u0000y"}`, cookie), [2]string{"body.value", wantTextMessage})
			wantTextProblem(t, send("PUT", configs, `{"value":{"a":["ok","\u0000"]}}`, cookie), [2]string{"body.value.a.1", wantTextMessage})
			wantTextProblem(t, send("PUT", configs, `{"value":"\ud800"}`, cookie), [2]string{"body.value", wantTextMessage})
			wantTextProblem(t, send("PUT", configs, "{\"value\":\"caf\xe9\"}", cookie), [2]string{"body.value", wantTextMessage})
			wantTextProblem(t, send("PUT", configs, `{"value":{"a\u0000":1}}`, cookie),
				[2]string{"body.value", "must have member names that are valid UTF-8 without NUL characters"})
			wantTextProblem(t, send("PUT", configs, `{"value":1,"description":"x\u0000y"}`, cookie), [2]string{"body.description", wantTextMessage})
			send("GET", configs, "", cookie).wantProblem(t, http.StatusNotFound, "http-404", "Not found")

			batch := func(envID, property string) string {
				return `{"environmentId":"` + envID + `","events":[{"eventId":"evt_hostile","subjectId":"usr_1","meter":"api_call","properties":{"route":"` + property + `"}}]}`
			}
			key := map[string]string{"X-API-Key": ten.starKey}
			wantTextProblem(t, send("POST", prj+"/usage-events/batch", batch(`\u0000`, "/v1"), key), [2]string{"body.environmentId", wantTextMessage})
			wantTextProblem(t, send("POST", prj+"/usage-events/batch", batch(env, `\u0000`), key), [2]string{"body.events.0.properties.route", wantTextMessage})
			// Nothing was recorded: the same event id is new.
			var ack envelope[struct{ Accepted int }]
			send("POST", prj+"/usage-events/batch", batch(env, "/v1"), key).decode(t, http.StatusOK, &ack)
			if ack.Data.Accepted != 1 {
				t.Errorf("a valid event after the refused ones: accepted %d, want 1", ack.Data.Accepted)
			}
		})
		t.Run("auth", func(t *testing.T) {
			res := send("POST", "/api/auth/organization/create", `{"name":"Acme\u0000","slug":"acme-hostile"}`, cookie)
			wantTextProblem(t, res, [2]string{"body.name", wantTextMessage})
			var p struct{ Code, Message string }
			if err := json.Unmarshal(res.Body.Bytes(), &p); err != nil || p.Code != "VALIDATION_ERROR" || p.Message != "Validation failed" {
				t.Errorf("better-auth members: code %q, message %q", p.Code, p.Message)
			}
			wantTextProblem(t, send("POST", "/api/auth/sign-in/email", `{"email":"ada\u0000@example.com","password":"correct-horse-battery"}`, nil),
				[2]string{"body.email", wantTextMessage})
			rec := app.doRaw(fuzzCase{method: "POST", uri: "/api/auth/sign-in/email", contentType: "application/x-www-form-urlencoded",
				body: "email=ada%40example.com&password=correct%00horse-battery&callbackURL=%2F"}, map[string]string{"Origin": testBaseURL})
			wantTextProblem(t, response{rec}, [2]string{"body.password", wantTextMessage})
			orgs, err := app.store.ListUserOrganizations(context.Background(), owner.ID, store.StateAll)
			if err != nil {
				t.Fatal(err)
			}
			if len(orgs) != 1 {
				t.Errorf("the owner has %d organizations, want 1 (nothing created)", len(orgs))
			}
		})
		if n := audits(); n != before {
			t.Errorf("%d audit rows after the refused requests, want %d (nothing written)", n, before)
		}
	})
}

// TestAuthorizeFastPathSkipsHostileText: the API-key fast path of POST /api/v1/authorize reads
// the body before validation (to fetch key and decision in one query on PostgreSQL); a body
// that is not text takes the ordinary path, so validation answers it (400), never the database.
func TestAuthorizeFastPathSkipsHostileText(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		for _, field := range []string{"projectId", "principalId", "permission"} {
			body := map[string]string{"projectId": ten.project.ID, "principalType": "user", "principalId": "user-42", "permission": "document:write"}
			body[field] = "x\u0000y"
			raw, _ := json.Marshal(body)
			res := app.do(request{method: "POST", path: "/api/v1/authorize", body: string(raw), headers: map[string]string{"X-API-Key": ten.starKey}})
			// permission also fails its grammar's pattern: the text rule is the one reported.
			wantTextProblem(t, res, [2]string{"body." + field, wantTextMessage})
		}
	})
}

// TestUserAgentStoredAsText: the User-Agent recorded on sessions and audit rows is cut to 512
// bytes on a character boundary, and each run of bytes that is not UTF-8, and each NUL, becomes
// U+FFFD, so a browser with an odd header still signs up on PostgreSQL.
func TestUserAgentStoredAsText(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		for i, c := range []struct{ sent, stored string }{
			{strings.Repeat("a", 511) + "é", strings.Repeat("a", 511)},
			{"Mozilla/5.0 \xff\xfe (X11)", "Mozilla/5.0 \uFFFD (X11)"},
			{"Mozilla/5.0\x00", "Mozilla/5.0\uFFFD"},
		} {
			email := "ua" + string(rune('a'+i)) + "@example.com"
			res := app.do(request{method: "POST", path: "/api/auth/sign-up/email", body: `{"name":"Ada","email":"` + email + `","password":"correct-horse-battery"}`,
				headers: map[string]string{"User-Agent": c.sent}})
			var out struct{ User struct{ ID string } }
			res.decode(t, http.StatusOK, &out)
			sessions, err := app.store.ListSessions(context.Background(), out.User.ID)
			if err != nil || len(sessions) != 1 {
				t.Fatalf("sessions: %v, %d", err, len(sessions))
			}
			if got := sessions[0].UserAgent; got != c.stored || !utf8.ValidString(got) {
				t.Errorf("user agent %q stored as %q, want %q", c.sent, got, c.stored)
			}
		}
	})
}

// TestProtocolHostileClientID: the OAuth protocol routes are not validated against the spec;
// a client_id that is not text names no client (store.OIDCClientByID answers not found without
// a query), so they answer as for any unknown client, on every backend: RFC 6749 invalid_client
// at the token endpoint, the error page at the authorization endpoint.
func TestProtocolHostileClientID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		for _, id := range []string{"cli_x%00", "%FF%FE%FD", "%C0%AE%C0%AE%C0%AF"} {
			rec := app.doRaw(fuzzCase{method: "POST", uri: "/api/auth/oauth2/token", contentType: "application/x-www-form-urlencoded",
				body: "grant_type=client_credentials&client_id=" + id + "&client_secret=secret"}, nil)
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusUnauthorized || e.Error != "invalid_client" {
				t.Errorf("token with client_id %s: %d %s, want 401 invalid_client", id, rec.Code, rec.Body)
			}
			rec = app.doRaw(fuzzCase{method: "GET", uri: "/api/auth/oauth2/authorize?response_type=code&client_id=" + id +
				"&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb&scope=openid&state=state-0123456789" +
				"&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuKE6HASQAs&code_challenge_method=S256"}, nil)
			if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" || !strings.Contains(rec.Body.String(), "<code>invalid_client</code>") {
				t.Errorf("authorize with client_id %s: %d (Location %q), want 400 and the invalid_client page", id, rec.Code, rec.Header().Get("Location"))
			}
		}
	})
}

// TestMarkNonText: bytes that are not UTF-8 and unpaired surrogate escapes become \u0000, so
// the text rule finds them where the JSON decoder would have written U+FFFD; surrogate pairs
// and escaped backslashes stay as they are.
func TestMarkNonText(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"a":"\ud83d\ude00"}`, ""},
		{`{"a":"\\ud800"}`, ""},
		{`{"a":"\u00e9"}`, ""},
		{`{"a":"\ud800x"}`, `{"a":"\u0000x"}`},
		{`{"a":["\udc00\ud800"]}`, `{"a":["\u0000\u0000"]}`},
		{`{"a":"\\\ud800"}`, `{"a":"\\\u0000"}`},
		{"{\"caf\xe9\":\"\xff\xfe\"}", `{"caf\u0000":"\u0000\u0000"}`},
	} {
		got, ok := markNonText([]byte(c.raw))
		if ok != (c.want != "") || ok && string(got) != c.want {
			t.Errorf("markNonText(%q) = %q, %v; want %q", c.raw, got, ok, c.want)
		}
	}
}
