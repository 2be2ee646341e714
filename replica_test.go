package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// The replica test (issue 14): three `gatehouse serve` runs — each its own store, pool,
// migration and listener, as separate processes would have — started at the same moment on one
// fresh, empty PostgreSQL schema with one secret key, and a round-robin client that sends each
// request to the next replica. It runs when GATEHOUSE_TEST_POSTGRES_URL is set (so in CI:
// .ci/run sets it); SQLite is one process's file and has no replicas.

// replicaBaseURL is the replicas' shared public origin (what the load balancer would serve).
const replicaBaseURL = "http://gatehouse.test"

// roundRobin sends each request to the next replica in turn.
type roundRobin struct {
	t      *testing.T
	addrs  []string
	next   atomic.Int64
	client *http.Client
}

// rrResponse is a replica's answer: which replica, the status, the body and the headers.
type rrResponse struct {
	replica int
	status  int
	body    string
	header  http.Header
}

// do sends one request to the next replica; body, when not empty, is JSON. headers are
// "Name: value" strings.
func (rr *roundRobin) do(method, path, body string, headers ...string) rrResponse {
	rr.t.Helper()
	i := int(rr.next.Add(1)-1) % len(rr.addrs)
	return rr.to(i, method, path, body, headers...)
}

// to sends one request to replica i.
func (rr *roundRobin) to(i int, method, path, body string, headers ...string) rrResponse {
	rr.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+rr.addrs[i]+path, r)
	if err != nil {
		rr.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Set(name, value)
	}
	resp, err := rr.client.Do(req)
	if err != nil {
		rr.t.Fatalf("replica %d: %s %s: %v", i, method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return rrResponse{replica: i, status: resp.StatusCode, body: string(raw), header: resp.Header}
}

// want fails the test unless the answer has status.
func (r rrResponse) want(t *testing.T, step string, status int) rrResponse {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: replica %d answered %d, want %d: %s", step, r.replica, r.status, status, r.body)
	}
	return r
}

// data decodes the answer's {"data": ...} into v.
func (r rrResponse) data(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.body), &struct{ Data any }{Data: v}); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// eachReplica sends the same request len(addrs) times through the round robin, so once to each
// replica, and checks every answer's status.
func (rr *roundRobin) eachReplica(t *testing.T, step string, status int, method, path, body string, headers ...string) {
	t.Helper()
	seen := map[int]bool{}
	for range rr.addrs {
		res := rr.do(method, path, body, headers...).want(t, step, status)
		seen[res.replica] = true
	}
	if len(seen) != len(rr.addrs) {
		t.Fatalf("%s: reached replicas %v, want all %d", step, seen, len(rr.addrs))
	}
}

func TestReplicas(t *testing.T) {
	var dbURL string
	for _, b := range storetest.Backends(t) {
		if b.Name == "postgres" {
			dbURL = b.URL(t) // a fresh, empty schema of its own
		}
	}
	if dbURL == "" {
		t.Skip("replicas share a PostgreSQL database: set " + storetest.PostgresURLEnv)
	}
	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	metricsAddr := freeLoopbackAddr(t)

	// Start all three at once on the empty schema: exactly one applies the migrations, the
	// others wait for golang-migrate's advisory lock, find the schema current, and serve.
	const replicas = 3
	servers := make([]serving, replicas)
	readies := make([]chan net.Addr, replicas)
	start := make(chan struct{})
	for i := range replicas {
		extra := map[string]string{
			"GATEHOUSE_DATABASE_URL": dbURL,
			"GATEHOUSE_SECRET_KEY":   secret,
			"GATEHOUSE_BASE_URL":     replicaBaseURL,
		}
		if i == 0 {
			extra["GATEHOUSE_METRICS_ADDR"] = metricsAddr
		}
		servers[i], readies[i] = launchServe(t, testEnv(t, extra), start)
	}
	close(start)
	for i := range servers {
		select {
		case servers[i].addr = <-readies[i]:
		case code := <-servers[i].done:
			t.Fatalf("replica %d exited with %d: %s", i, code, servers[i].stderr.String())
		case <-time.After(time.Minute):
			t.Fatalf("replica %d did not start: %s", i, servers[i].stderr.String())
		}
	}
	applied := 0
	rr := &roundRobin{t: t, client: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for i, sv := range servers {
		logs := sv.stderr.String()
		switch {
		case strings.Contains(logs, "migrations_applied=true"):
			applied++
		case !strings.Contains(logs, "migrations_applied=false"):
			t.Errorf("replica %d logged no migration outcome: %s", i, logs)
		}
		rr.addrs = append(rr.addrs, sv.addr.String())
	}
	if applied != 1 {
		t.Fatalf("%d replicas applied migrations, want exactly 1", applied)
	}
	rr.eachReplica(t, "health", http.StatusOK, http.MethodGet, "/api/v1/health", "")

	origin := "Origin: " + replicaBaseURL

	// Sign up on one replica; the cookie works on every replica.
	res := rr.do(http.MethodPost, "/api/auth/sign-up/email",
		`{"name":"Ada","email":"ada@example.com","password":"correct horse battery staple"}`, origin).want(t, "sign up", http.StatusOK)
	cookie := sessionCookie(t, res.header)
	rr.eachReplica(t, "the session on every replica", http.StatusOK, http.MethodGet, "/api/v1/organizations", "", cookie)

	// An organization, a project, a role and a service account key, each made on the next replica.
	var org struct{ ID string }
	var prj struct {
		ID           string
		Environments []struct{ ID string }
	}
	rr.do(http.MethodPost, "/api/v1/organizations", `{"name":"Acme"}`, cookie, origin).want(t, "organization", http.StatusCreated).data(t, &org)
	rr.do(http.MethodPost, "/api/v1/organizations/"+org.ID+"/projects", `{"name":"Storefront"}`, cookie, origin).
		want(t, "project", http.StatusCreated).data(t, &prj)
	prjPath := "/api/v1/projects/" + prj.ID
	var role struct{ ID string }
	rr.do(http.MethodPost, prjPath+"/roles", `{"name":"Editor","permissions":["document:write"]}`, cookie, origin).
		want(t, "role", http.StatusCreated).data(t, &role)
	newKey := func(name, scopes string) (accountID, keyID, key string) {
		var sa struct {
			ID     string
			APIKey string
			Keys   []struct{ ID string }
		}
		rr.do(http.MethodPost, prjPath+"/service-accounts", `{"name":"`+name+`","scopes":`+scopes+`}`, cookie, origin).
			want(t, "service account", http.StatusCreated).data(t, &sa)
		return sa.ID, sa.Keys[0].ID, sa.APIKey
	}
	accountID, keyID, key := newKey("authorizer", `["project:read"]`)
	otherAccountID, _, otherKey := newKey("reporter", `["project:read"]`)
	meterAccountID, meterKeyID, meterKey := newKey("meter", `["usage:write"]`)

	// The keys work on every replica.
	for _, k := range []string{key, otherKey} {
		rr.eachReplica(t, "the key on every replica", http.StatusOK, http.MethodGet, prjPath, "", "X-API-Key: "+k)
	}

	// Usage ingest remembers a key it has read (server/apikey_cache.go): every replica reads
	// the meter key here, and records an event with it.
	event := func(id string) string {
		return `{"eventId":"` + id + `","subjectId":"alice","environmentId":"` + prj.Environments[0].ID + `","meter":"api_call"}`
	}
	for i := range replicas {
		rr.to(i, http.MethodPost, prjPath+"/usage-events", event(fmt.Sprintf("before-%d", i)), "X-API-Key: "+meterKey).
			want(t, "an event", http.StatusCreated)
	}

	// A binding changes the decision on every replica at the next request, and so does its
	// deletion, and its expiry. Each replica is asked twice, alone and in a batch without
	// explain, so that later answers are the ones it kept (server/decision_cache.go), and the
	// next step's first answers follow kept ones.
	decide := func(step string, want bool) {
		t.Helper()
		body := fmt.Sprintf(`{"projectId":%q,"principalType":"user","principalId":"alice","permission":"document:write"}`, prj.ID)
		batch := fmt.Sprintf(`{"projectId":%q,"checks":[{"principalType":"user","principalId":"alice","permission":"document:write"}]}`, prj.ID)
		for range 2 * replicas {
			r := rr.do(http.MethodPost, "/api/v1/authorize", body, "X-API-Key: "+key).want(t, step, http.StatusOK)
			var d struct{ Allowed bool }
			r.data(t, &d)
			if d.Allowed != want {
				t.Fatalf("%s: replica %d decided allowed=%v, want %v", step, r.replica, d.Allowed, want)
			}
			r = rr.do(http.MethodPost, "/api/v1/authorize/batch", batch, "X-API-Key: "+key).want(t, step+": batch", http.StatusOK)
			var b struct{ Results []struct{ Allowed bool } }
			r.data(t, &b)
			if len(b.Results) != 1 || b.Results[0].Allowed != want {
				t.Fatalf("%s: replica %d's batch answered %s, want allowed=%v", step, r.replica, r.body, want)
			}
		}
	}
	decide("before any binding", false)
	var binding struct{ ID string }
	rr.do(http.MethodPost, prjPath+"/role-bindings", `{"roleId":"`+role.ID+`","principalType":"user","principalId":"alice"}`, cookie, origin).
		want(t, "binding", http.StatusCreated).data(t, &binding)
	decide("after binding", true)
	// So do the batch, the explanation, the effective permissions and the holders (issue 24).
	lookups := func(step, wantExplanation, wantPermissions, wantHolders string) {
		t.Helper()
		type result struct {
			Allowed     bool
			Explanation json.RawMessage
		}
		batchBody := fmt.Sprintf(`{"projectId":%q,"explain":true,"checks":[{"principalType":"user","principalId":"alice","permission":"document:write"}]}`, prj.ID)
		explainBody := fmt.Sprintf(`{"projectId":%q,"principalType":"user","principalId":"alice","permission":"document:write","explain":true}`, prj.ID)
		for range replicas {
			var batch struct{ Results []result }
			r := rr.do(http.MethodPost, "/api/v1/authorize/batch", batchBody, "X-API-Key: "+key).want(t, step+": batch", http.StatusOK)
			r.data(t, &batch)
			if len(batch.Results) != 1 || string(batch.Results[0].Explanation) != wantExplanation {
				t.Fatalf("%s: replica %d's batch answered %s, want one result explained %s", step, r.replica, r.body, wantExplanation)
			}
			var single result
			r = rr.do(http.MethodPost, "/api/v1/authorize", explainBody, "X-API-Key: "+key).want(t, step+": explain", http.StatusOK)
			r.data(t, &single)
			if string(single.Explanation) != wantExplanation {
				t.Fatalf("%s: replica %d explained %s, want %s", step, r.replica, single.Explanation, wantExplanation)
			}
			var perms struct{ Permissions json.RawMessage }
			r = rr.do(http.MethodGet, prjPath+"/principals/user/alice/permissions", "", "X-API-Key: "+key).want(t, step+": permissions", http.StatusOK)
			r.data(t, &perms)
			if string(perms.Permissions) != wantPermissions {
				t.Fatalf("%s: replica %d's permissions %s, want %s", step, r.replica, perms.Permissions, wantPermissions)
			}
			var holders json.RawMessage
			r = rr.do(http.MethodGet, prjPath+"/permission-holders?permission=document:write", "", "X-API-Key: "+key).want(t, step+": holders", http.StatusOK)
			r.data(t, &holders)
			if string(holders) != wantHolders {
				t.Fatalf("%s: replica %d's holders %s, want %s", step, r.replica, holders, wantHolders)
			}
		}
	}
	lookups("after binding",
		`{"grantedBy":[{"bindingId":"`+binding.ID+`","expiresAt":null,"matched":"document:write","roleId":"`+role.ID+`","roleSlug":"editor"}]}`,
		`["document:write"]`, `[{"principalId":"alice","principalType":"user","roles":["editor"]}]`)
	rr.do(http.MethodDelete, prjPath+"/role-bindings/"+binding.ID, "", cookie, origin).want(t, "delete binding", http.StatusOK)
	decide("after deleting the binding", false)
	lookups("after deleting the binding", `{"considered":[],"reason":"no_bindings"}`, `[]`, `[]`)
	expires := time.Now().Add(2 * time.Second).UTC()
	rr.do(http.MethodPost, prjPath+"/role-bindings", `{"roleId":"`+role.ID+`","principalType":"user","principalId":"alice","expiresAt":"`+
		expires.Format(time.RFC3339Nano)+`"}`, cookie, origin).want(t, "expiring binding", http.StatusCreated)
	decide("before the binding expires", true)
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	decide("after the binding expired", false)

	// Revoking a key, and disabling an account, refuse it on every replica at the next request.
	rr.do(http.MethodPost, prjPath+"/service-accounts/"+accountID+"/keys/"+keyID+"/revoke", "", cookie, origin).want(t, "revoke", http.StatusOK)
	rr.eachReplica(t, "a revoked key", http.StatusUnauthorized, http.MethodGet, prjPath, "", "X-API-Key: "+key)
	rr.eachReplica(t, "a revoked key deciding", http.StatusUnauthorized, http.MethodPost, "/api/v1/authorize",
		fmt.Sprintf(`{"projectId":%q,"principalType":"user","principalId":"alice","permission":"document:write"}`, prj.ID), "X-API-Key: "+key)
	rr.eachReplica(t, "a revoked key deciding a batch", http.StatusUnauthorized, http.MethodPost, "/api/v1/authorize/batch",
		fmt.Sprintf(`{"projectId":%q,"checks":[{"principalType":"user","principalId":"alice","permission":"document:write"}]}`, prj.ID), "X-API-Key: "+key)
	// The meter key, remembered by every replica, is refused by each at its next event, and
	// before judging the event: a bad one is 401 too, not 400.
	rr.do(http.MethodPost, prjPath+"/service-accounts/"+meterAccountID+"/keys/"+meterKeyID+"/revoke", "", cookie, origin).
		want(t, "revoke the meter key", http.StatusOK)
	rr.eachReplica(t, "a revoked, remembered key sending an event", http.StatusUnauthorized, http.MethodPost,
		prjPath+"/usage-events", event("after"), "X-API-Key: "+meterKey)
	rr.eachReplica(t, "a revoked, remembered key sending a bad event", http.StatusUnauthorized, http.MethodPost,
		prjPath+"/usage-events", `{}`, "X-API-Key: "+meterKey)
	var summary struct {
		Meters []struct {
			Meter  string
			Events int
		}
	}
	rr.do(http.MethodGet, prjPath+"/analytics/summary", "", cookie).want(t, "usage summary", http.StatusOK).data(t, &summary)
	if len(summary.Meters) != 1 || summary.Meters[0].Events != replicas {
		t.Fatalf("usage summary meters %+v, want api_call with %d events", summary.Meters, replicas)
	}
	rr.do(http.MethodPost, prjPath+"/service-accounts/"+otherAccountID+"/disable", "", cookie, origin).want(t, "disable", http.StatusOK)
	rr.eachReplica(t, "a disabled account's key", http.StatusUnauthorized, http.MethodGet, prjPath, "", "X-API-Key: "+otherKey)

	// Metrics: served on replica 0's metrics listener only, never on the app's listener.
	rr.eachReplica(t, "/metrics on the app listener", http.StatusNotFound, http.MethodGet, "/metrics", "")
	metrics := httpGet(t, "http://"+metricsAddr+"/metrics")
	for _, series := range []string{
		`gatehouse_http_requests_total{method="POST",operation="authorize",status="200"}`,
		`gatehouse_api_key_authentications_total{outcome="revoked"}`,
		`gatehouse_authorize_decisions_total{decision="allowed"}`,
		`go_sql_open_connections{db_name="postgres"}`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("replica 0's metrics lack %s", series)
		}
	}
	// Replica 0 served decisions as kept (each step's second ask), so the steps above followed
	// kept answers.
	if hits := regexp.MustCompile(`(?m)^gatehouse_authorize_kept_total\{kind="decision",outcome="hit"\} ([0-9]+)$`).FindStringSubmatch(metrics); hits == nil || hits[1] == "0" {
		t.Errorf("replica 0 served no decision as kept: %v", hits)
	}

	// Sign out on one replica: the cookie is refused on every replica.
	rr.do(http.MethodPost, "/api/auth/sign-out", "", cookie, origin).want(t, "sign out", http.StatusOK)
	rr.eachReplica(t, "a signed-out session", http.StatusUnauthorized, http.MethodGet, "/api/v1/organizations", "", cookie)

	// Failed sign-ins for one account spread over the replicas: the sixth and later are 429
	// (the documented limit: five failures per account in 15 minutes), on whichever replica.
	for i := range 9 {
		want := http.StatusUnauthorized
		if i >= 5 {
			want = http.StatusTooManyRequests
		}
		rr.do(http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"wrong"}`, origin).
			want(t, fmt.Sprintf("failed sign-in %d", i+1), want)
	}
	for i := range replicas {
		rr.to(i, http.MethodPost, "/api/auth/sign-in/email", `{"email":"ada@example.com","password":"correct horse battery staple"}`, origin).
			want(t, "the right password while throttled", http.StatusTooManyRequests)
	}
}

// launchServe runs `gatehouse serve` with env once start is closed, and returns at once; the
// listening address arrives on the channel. Cleanup stops it and waits for it to exit.
func launchServe(t *testing.T, env func(string) string, start <-chan struct{}) (serving, chan net.Addr) {
	ctx, cancel := context.WithCancel(context.Background())
	sv := serving{cancel: cancel, done: make(chan int, 1), stderr: &lockedBuffer{}}
	ready := make(chan net.Addr, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		<-start
		sv.done <- run(ctx, []string{"serve"}, env, sv.stderr, ready)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("a replica did not stop: %s", sv.stderr.String())
		}
	})
	return sv, ready
}

// sessionCookie returns the "Cookie: name=value" header for the session cookie in h.
func sessionCookie(t *testing.T, h http.Header) string {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if strings.Contains(c.Name, "session_token") && c.Value != "" {
			return "Cookie: " + c.Name + "=" + c.Value
		}
	}
	t.Fatalf("no session cookie in %v", h["Set-Cookie"])
	return ""
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port free at the time of the call.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
	}
	return string(raw)
}

// TestMetricsListener: GATEHOUSE_METRICS_ADDR serves /metrics on its own listener, the app's
// listener does not, and an invalid address stops the binary with status 2 naming the variable.
func TestMetricsListener(t *testing.T) {
	metricsAddr := freeLoopbackAddr(t)
	sv := startServe(t, testEnv(t, map[string]string{"GATEHOUSE_METRICS_ADDR": metricsAddr}))
	httpGet(t, "http://"+sv.addr.String()+"/api/v1/health")
	metrics := httpGet(t, "http://"+metricsAddr+"/metrics")
	for _, series := range []string{
		`gatehouse_http_requests_total{method="GET",operation="getHealth",status="200"} 1`,
		`go_sql_open_connections{db_name="sqlite-writer"}`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("metrics lack %s", series)
		}
	}
	resp, err := http.Get("http://" + sv.addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the app's listener: %d, want 404", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + metricsAddr + "/api/v1/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /api/v1/health on the metrics listener: %d, want 404", resp.StatusCode)
		}
	}

	var stderr lockedBuffer
	code := run(context.Background(), nil, testEnv(t, map[string]string{"GATEHOUSE_METRICS_ADDR": "nope"}), &stderr, nil)
	if code != 2 || !strings.Contains(stderr.String(), "GATEHOUSE_METRICS_ADDR") {
		t.Errorf("invalid metrics address: exit %d, stderr %q", code, stderr.String())
	}
}
