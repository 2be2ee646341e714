package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// StripeMockVersion is the stripe-mock the processor tests run: a real Stripe API double built
// from the module proxy (go install …@version), once per test binary.
const StripeMockVersion = "v0.203.0"

var stripeMock struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// TestMain removes the stripe-mock binary the billing tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if stripeMock.dir != "" {
		_ = os.RemoveAll(stripeMock.dir)
	}
	os.Exit(code)
}

// startStripeMock builds stripe-mock once and starts one on free loopback ports for t; it
// returns its base URL. The process is killed (by its pid) when t ends.
func startStripeMock(t *testing.T) string {
	t.Helper()
	stripeMock.once.Do(func() {
		if stripeMock.dir, stripeMock.err = os.MkdirTemp("", "gatehouse-stripe-mock-"); stripeMock.err != nil {
			return
		}
		cmd := exec.Command("go", "install", "github.com/stripe/stripe-mock@"+StripeMockVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+stripeMock.dir, "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			stripeMock.err = fmt.Errorf("go install stripe-mock: %v\n%s", err, out)
			return
		}
		stripeMock.bin = filepath.Join(stripeMock.dir, "stripe-mock")
	})
	if stripeMock.err != nil {
		t.Fatal(stripeMock.err)
	}
	cmd := exec.Command(stripeMock.bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not start")
	}
	return ""
}

// countingTransport counts the Checkout Session creations that reach Stripe and keeps the
// last one's idempotency key and form body.
type countingTransport struct {
	calls    atomic.Int64
	mu       sync.Mutex
	lastKey  string
	lastForm string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/checkout/sessions" {
		c.calls.Add(1)
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		c.mu.Lock()
		c.lastKey, c.lastForm = r.Header.Get("Idempotency-Key"), string(body)
		c.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) last() (key, form string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastKey, c.lastForm
}

// Test secrets. The webhook secret is what Stripe would show for the endpoint.
const (
	testStripeKey     = "sk_test_51CanaryKeyAbCdEf9f3a"
	testWebhookSecret = "whsec_canaryWebhookSecret7d21e"
)

// billingFixture is a tenancy whose first environment is connected to a stripe-mock, with a
// plan "pro" priced in that environment.
type billingFixture struct {
	app       *testApp
	ten       tenancy
	env       string
	prj       string
	transport *countingTransport
}

func newBillingFixture(t *testing.T, b storetest.Backend) *billingFixture {
	t.Helper()
	return newBillingFixtureOn(t, b.Open(t))
}

func newBillingFixtureOn(t *testing.T, st *store.Store) *billingFixture {
	t.Helper()
	tr := &countingTransport{}
	cfg := testConfig()
	cfg.StripeAPIBase = startStripeMock(t)
	cfg.StripeHTTPClient = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	app := newTestApp(t, st, cfg)
	ten := app.newTenancy(t)
	f := &billingFixture{app: app, ten: ten, env: ten.project.Environments[0].ID,
		prj: "/api/v1/projects/" + ten.project.ID, transport: tr}
	return f
}

// call sends a request as a fixed role (or "stranger").
func (f *billingFixture) call(who, method, path, body string, headers ...string) response {
	r := request{method: method, path: path, body: body, headers: map[string]string{}}
	for i := 0; i+1 < len(headers); i += 2 {
		r.headers[headers[i]] = headers[i+1]
	}
	u := f.ten.stranger
	if who != "stranger" {
		u = f.ten.members[who]
	}
	return f.app.do(u.as(r))
}

// connect connects the fixture environment with the test secrets.
func (f *billingFixture) connect(t *testing.T) {
	t.Helper()
	res := f.call(RoleOwner, "PUT", "/api/v1/environments/"+f.env+"/processor-connection",
		`{"secretKey":"`+testStripeKey+`","webhookSecret":"`+testWebhookSecret+`"}`)
	if res.Code != http.StatusCreated && res.Code != http.StatusOK { // the tenancy fixture connected it already
		t.Fatalf("connect: %d %s", res.Code, res.Body)
	}
}

// createPlan creates a plan from a JSON body and returns its id.
func (f *billingFixture) createPlan(t *testing.T, body string) string {
	t.Helper()
	var out envelope[struct {
		ID string `json:"id"`
	}]
	f.call(RoleOwner, "POST", f.prj+"/billing/plans", body).decode(t, http.StatusCreated, &out)
	return out.Data.ID
}

// webhook posts payload to env's webhook, signed with secret at ts (zero: now).
func (f *billingFixture) webhook(env, secret, payload string, ts time.Time) response {
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: secret, Timestamp: ts})
	return f.app.do(request{method: "POST", path: webhookPath(env), body: payload,
		headers: map[string]string{"Stripe-Signature": signed.Header}})
}

// event is a Stripe event of type typ with the given id, created at created (Unix seconds),
// whose data.object is object.
func event(id, typ string, created int64, object string) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2019-02-19","type":%q,"created":%d,"livemode":false,`+
		`"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"data":{"object":%s}}`, id, typ, created, object)
}

// entitlementsOf reads a subject's entitlements through the API as the viewer.
func (f *billingFixture) entitlementsOf(t *testing.T, subject string) string {
	t.Helper()
	res := f.call(RoleViewer, "GET", f.prj+"/subjects/"+subject+"/entitlements", "")
	if res.Code != http.StatusOK {
		t.Fatalf("entitlements: %d %s", res.Code, res.Body)
	}
	return strings.TrimSpace(res.Body.String())
}

// addBillingFixtures gives the tenancy a plan "fixture-pro" priced in its first environment and
// connects that environment to Stripe with the test secrets, through the store (no audit rows),
// so that the operation matrix can run checkouts and plan operations.
func (ten *tenancy) addBillingFixtures(t *testing.T, a *testApp) {
	t.Helper()
	ctx := context.Background()
	env := ten.project.Environments[0].ID
	secret, err := a.srv.keyring.Seal([]byte(testStripeKey), store.ProcessorSecretKeyAAD(env))
	if err != nil {
		t.Fatal(err)
	}
	whsec, err := a.srv.keyring.Seal([]byte(testWebhookSecret), store.ProcessorWebhookSecretAAD(env))
	if err != nil {
		t.Fatal(err)
	}
	plan := store.Plan{ProjectID: ten.project.ID, Key: "fixture-pro", Name: "Fixture Pro", Amount: 1000, Currency: "usd",
		Interval: store.IntervalMonth, PriceIDs: map[string]string{env: "price_1FixturePro"}, Entitlements: map[string]any{"sso": true}}
	err = a.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreatePlan(ctx, &plan); err != nil {
			return err
		}
		_, _, err := tx.PutProcessorConnection(ctx, store.ProcessorConnection{EnvironmentID: env, Provider: store.ProviderStripe,
			Mode: store.ModeTest, KeyLast4: testStripeKey[len(testStripeKey)-4:], SecretKey: secret, WebhookSecret: whsec})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ten.planID, ten.planKey = plan.ID, plan.Key
}
