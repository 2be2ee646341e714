package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestProductApp builds the example product server (docs/examples/productapp), sets it up on a
// fresh Gatehouse (the real app over SQLite) through the API as docs/examples/README.md does,
// and drives it as a browser: sign-in through Gatehouse's sign-in and consent pages by form
// posts, the reports page denied until a role binding allows reports:read, and CSV export off
// until an entitlement grant turns csv_export on.
func TestProductApp(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "productapp")
	build := exec.Command(goTool, "build", "-o", bin, "./docs/examples/productapp")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./docs/examples/productapp: %v\n%s", err, out)
	}

	srv := httptest.NewUnstartedServer(nil)
	gh := "http://" + srv.Listener.Addr().String()
	app, err := newServer(server.Config{BaseURL: gh, BodyLimit: 1 << 20, SecretKey: make([]byte, 32)},
		storetest.Backends(t)[0].Open(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)

	// The product's address is chosen before it starts: its redirect URI is registered first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	product := "http://" + l.Addr().String()
	l.Close()

	// The operator's setup: an owner, an organization and project, the product's service
	// account, a role, a native OIDC client (http on loopback), and a user, Grace.
	owner := &ghClient{t: t, base: gh, jar: apptest.NewBrowser(t, gh).Client}
	owner.do("POST", "/api/auth/sign-up/email", `{"name":"Olive Owner","email":"olive@example.com","password":"owner-password-1"}`, 200)
	org := owner.do("POST", "/api/v1/organizations", `{"name":"Acme","slug":"acme"}`, 201)
	project := owner.do("POST", "/api/v1/organizations/"+org.id()+"/projects", `{"name":"Reports"}`, 201)
	account := owner.do("POST", "/api/v1/projects/"+project.id()+"/service-accounts",
		`{"name":"productapp","scopes":["project:read","billing:read"]}`, 201)
	role := owner.do("POST", "/api/v1/projects/"+project.id()+"/roles", `{"name":"Analyst","permissions":["reports:read"]}`, 201)
	client := owner.do("POST", "/api/v1/projects/"+project.id()+"/oidc-clients", `{"name":"Product","type":"native",
		"redirectUris":["`+product+`/callback"],"grantTypes":["authorization_code"],"scopes":["openid","profile","email"]}`, 201)
	grace := &ghClient{t: t, base: gh, jar: apptest.NewBrowser(t, gh).Client}
	graceID := grace.do("POST", "/api/auth/sign-up/email", `{"name":"Grace Hopper","email":"grace@example.com","password":"grace-password-1"}`, 200).
		field("user", "id")

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "ISSUER_URL="+gh, "PRODUCT_URL="+product, "CLIENT_ID="+client.id(), "CLIENT_SECRET=",
		"PROJECT_ID="+project.id(), "API_KEY="+account.field("data", "apiKey"))
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	br := apptest.NewBrowser(t, product)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := br.Client.Get(product + "/"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("productapp did not answer at %s:\n%s", product, logs.String())
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\n----- productapp log -----\n%s", append(args, logs.String())...)
	}

	// Signed out: the home page offers sign-in, and a page sends the browser to sign in.
	if p := br.Get("/"); p.Status != 200 || !strings.Contains(p.Body, `<a href="/login">Sign in with Gatehouse</a>`) {
		fail("home signed out: %d %s", p.Status, p.Body)
	}
	if p := br.Get("/reports"); p.Status != http.StatusFound || p.Header.Get("Location") != "/login" {
		fail("reports signed out: %d %v", p.Status, p.Header)
	}

	// Sign-in: the product redirects to Gatehouse, which shows its sign-in page, then (a public
	// client) its consent page, then redirects back to the product's callback with a code.
	auth := br.Get("/login")
	if auth.Status != http.StatusFound || !strings.HasPrefix(auth.Header.Get("Location"), gh+"/api/auth/oauth2/authorize?") {
		fail("login: %d %v", auth.Status, auth.Header)
	}
	q := auth.Location().Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != client.id() || q.Get("nonce") == "" {
		fail("authorization request without PKCE S256, the client or a nonce: %v", q)
	}
	ghBrowser := &apptest.Browser{T: t, Base: gh, Client: br.Client} // the same browser on Gatehouse's origin
	signIn := ghBrowser.Get(auth.Header.Get("Location"))
	callbackURL := signIn.Hidden(t, "callbackURL")
	signedIn := ghBrowser.Post("/api/auth/sign-in/email", url.Values{"email": {"grace@example.com"},
		"password": {"grace-password-1"}, "callbackURL": {callbackURL}}, gh)
	if signedIn.Status != http.StatusSeeOther || signedIn.Header.Get("Location") != callbackURL {
		fail("sign-in post: %d %v %s", signedIn.Status, signedIn.Header, signedIn.Body)
	}
	consent := ghBrowser.Get(callbackURL)
	consent.RedirectParams(t, "authorize after sign-in", "/api/auth/oauth2/consent?")
	challenge := ghBrowser.Get(consent.Header.Get("Location")).Hidden(t, "consent_challenge")
	back := ghBrowser.Post("/api/auth/oauth2/consent", url.Values{"consent_challenge": {challenge}, "decision": {"accept"}}, gh)
	back.RedirectParams(t, "consent accepted", product+"/callback?")
	if p := br.Get(back.Header.Get("Location")); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/" {
		fail("product callback: %d %v %s", p.Status, p.Header, p.Body)
	}
	if p := br.Get("/"); p.Status != 200 || !strings.Contains(p.Body, "Signed in as Grace Hopper (grace@example.com).") ||
		!strings.Contains(p.Body, "CSV export: off (not in your plan)") {
		fail("home signed in: %d %s", p.Status, p.Body)
	}
	// A replayed callback is refused: the state was used.
	if p := br.Get(back.Header.Get("Location")); p.Status != http.StatusBadRequest {
		fail("replayed callback: %d %s", p.Status, p.Body)
	}

	// The reports page: denied by /authorize, allowed once Grace is bound to Analyst.
	if p := br.Get("/reports"); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "You are not allowed to see reports.") {
		fail("reports without a binding: %d %s", p.Status, p.Body)
	}
	owner.do("POST", "/api/v1/projects/"+project.id()+"/role-bindings",
		`{"roleId":"`+role.id()+`","principalType":"user","principalId":"`+graceID+`"}`, 201)
	if p := br.Get("/reports"); p.Status != 200 || !strings.Contains(p.Body, "<h2>Reports</h2><p>Revenue is up, Grace Hopper.</p>") {
		fail("reports with a binding: %d %s", p.Status, p.Body)
	}

	// CSV export: off, then on from an entitlement grant to Grace's subject id.
	if p := br.Get("/export"); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "CSV export is not in your plan.") {
		fail("export without the entitlement: %d %s", p.Status, p.Body)
	}
	owner.do("POST", "/api/v1/projects/"+project.id()+"/subjects/"+graceID+"/entitlement-grants",
		`{"featureKey":"csv_export","value":true,"reason":"Pilot"}`, 201)
	if p := br.Get("/export"); p.Status != 200 || p.Header.Get("Content-Type") != "text/csv" ||
		p.Body != "month,revenue\n2026-10,1200\n2026-11,1500\n" {
		fail("export with the entitlement: %d %v %q", p.Status, p.Header, p.Body)
	}
	if p := br.Get("/"); !strings.Contains(p.Body, `CSV export: <a href="/export">on</a>`) {
		fail("home with the entitlement: %d %s", p.Status, p.Body)
	}
}

// ghClient calls Gatehouse's API as one signed-in user (the cookie jar of jar), with the Origin
// its cookie writes need.
type ghClient struct {
	t    *testing.T
	base string
	jar  *http.Client
}

// ghAnswer is a decoded JSON answer.
type ghAnswer map[string]any

// do sends body (JSON) and fails the test unless the answer has status.
func (c *ghClient) do(method, path, body string, status int) ghAnswer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", c.base)
	res, err := c.jar.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var a ghAnswer
	if res.StatusCode != status || json.NewDecoder(bytes.NewReader(raw)).Decode(&a) != nil {
		c.t.Fatalf("%s %s: %d %s; want %d", method, path, res.StatusCode, raw, status)
	}
	return a
}

// field is the string at keys in a.
func (a ghAnswer) field(keys ...string) string {
	var v any = map[string]any(a)
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// id is data.id.
func (a ghAnswer) id() string { return a.field("data", "id") }
