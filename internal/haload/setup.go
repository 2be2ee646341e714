// Package haload drives mixed load at a running Gatehouse for the failover tests
// (docs/failover.md): sign-ins, /authorize, configuration writes, single and batch usage
// ingest, all at once, over HTTP. It keeps a ledger of every write the server acknowledged (201
// or 200) and of every status it saw, and checks afterwards that each acknowledged write is in a
// given PostgreSQL database, that no request got a 500, that every 503 carried Retry-After, and
// how long the service was unavailable (first failure to the first success after the last one).
//
// It talks to the server only over HTTP and to the database only with SQL, so that the test
// that uses it can run the server however it likes and point the checker at any database (the
// promoted standby, after a failover).
package haload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Password is the password of every user Setup signs up.
const Password = "correct horse battery staple"

// Fixture is what the load needs on the server: a signed-in owner, a project with its first
// environment, an API key of a service account allowed to ingest usage, call /authorize and
// write configuration, users to sign in as, and a webhook endpoint receiving config.update
// events (the event outbox) at Hooks.
type Fixture struct {
	// Base is the server's URL; Origin is the Origin header writes send (its base URL).
	Base, Origin string
	Cookie       string
	OrgID        string
	ProjectID    string
	EnvID        string
	APIKey       string
	// Users are the e-mail addresses the sign-in workers use (Password).
	Users []string
	Hooks *Receiver
}

// Receiver is a webhook receiver that records the bodies it got.
type Receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

// URL is where the receiver listens.
func (r *Receiver) URL() string { return r.srv.URL }

// Bodies returns a copy of the bodies received so far.
func (r *Receiver) Bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

func newReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(raw))
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// client is the HTTP client of setup and of the load: no redirects followed, a timeout well
// above the server's own database timeouts.
var client = &http.Client{Timeout: 30 * time.Second,
	Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// call sends one JSON request and returns the status, headers and body; err is a transport
// failure (no answer).
func call(method, url, body string, headers map[string]string) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, raw, err
}

// Setup creates the fixture through the API of the server at base, whose GATEHOUSE_BASE_URL is
// origin and which must allow webhooks to loopback (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE=true).
// users is how many users the sign-in workers share.
func Setup(t testing.TB, base, origin string, users int) *Fixture {
	t.Helper()
	f := &Fixture{Base: base, Origin: origin, Hooks: newReceiver(t)}
	must := func(step string, want int, method, path, body string, headers map[string]string, out any) http.Header {
		t.Helper()
		if headers == nil {
			headers = map[string]string{}
		}
		headers["Origin"] = origin
		code, h, raw, err := call(method, base+path, body, headers)
		if err != nil || code != want {
			t.Fatalf("setup: %s: %d %v %s (want %d)", step, code, err, raw, want)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatalf("setup: %s: %v in %s", step, err, raw)
			}
		}
		return h
	}
	signUp := func(email string) http.Header {
		return must("sign up "+email, http.StatusOK, http.MethodPost, "/api/auth/sign-up/email",
			fmt.Sprintf(`{"name":"Load","email":%q,"password":%q}`, email, Password), nil, nil)
	}
	h := signUp("owner@load.example.com")
	f.Cookie = cookie(t, h)
	auth := map[string]string{"Cookie": f.Cookie}
	var org struct{ Data struct{ ID string } }
	must("organization", http.StatusCreated, http.MethodPost, "/api/v1/organizations", `{"name":"Load"}`, auth, &org)
	f.OrgID = org.Data.ID
	var prj struct {
		Data struct {
			ID           string
			Environments []struct{ ID string }
		}
	}
	must("project", http.StatusCreated, http.MethodPost, "/api/v1/organizations/"+f.OrgID+"/projects", `{"name":"Load"}`, auth, &prj)
	f.ProjectID, f.EnvID = prj.Data.ID, prj.Data.Environments[0].ID
	var sa struct{ Data struct{ APIKey string } }
	must("service account", http.StatusCreated, http.MethodPost, "/api/v1/projects/"+f.ProjectID+"/service-accounts",
		`{"name":"load","scopes":["usage:write","project:read","config:update"]}`, auth, &sa)
	f.APIKey = sa.Data.APIKey
	must("webhook endpoint", http.StatusCreated, http.MethodPost, "/api/v1/projects/"+f.ProjectID+"/webhook-endpoints",
		fmt.Sprintf(`{"url":%q,"eventTypes":["config.update"]}`, f.Hooks.URL()+"/hook"), auth, nil)
	for i := range users {
		email := fmt.Sprintf("user%d@load.example.com", i)
		signUp(email)
		f.Users = append(f.Users, email)
	}
	return f
}

// cookie returns the "name=value" of the session cookie set in h.
func cookie(t testing.TB, h http.Header) string {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if strings.Contains(c.Name, "session_token") && c.Value != "" {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("setup: no session cookie in %v", h["Set-Cookie"])
	return ""
}

// jsonBody is a compact JSON encoding of v.
func jsonBody(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}

// Do sends one request to the server (a JSON body when body is not empty) with the Origin
// header of writes, and returns the status and body; a transport failure is status 0.
func (f *Fixture) Do(method, path, body string, headers map[string]string) (int, []byte) {
	h := map[string]string{"Origin": f.Origin}
	for k, v := range headers {
		h[k] = v
	}
	code, _, raw, err := call(method, f.Base+path, body, h)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return code, raw
}
