package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// receivedHook is one request a test receiver got.
type receivedHook struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// hookReceiver is an HTTP receiver that records every request and answers status().
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []receivedHook
	status func() int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{status: func() int { return http.StatusNoContent }}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, receivedHook{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Body: b})
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status())
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) received() []receivedHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedHook(nil), r.got...)
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifySignature checks a Standard Webhooks signature header against secret, as the
// specification defines it: base64 HMAC-SHA256 under the base64-decoded part of whsec_…, over
// "id.timestamp.body"; the header holds space-separated "v1,<sig>" entries, one of which must
// match.
func verifySignature(secret string, h receivedHook) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.ID + "." + h.Timestamp + "."))
	mac.Write(h.Body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, part := range strings.Fields(h.Signature) {
		if v, sig, ok := strings.Cut(part, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

type endpointBody struct {
	ID, ProjectID, URL, Description, Secret   string
	EnvironmentID, DisabledAt, DisabledReason *string
	PreviousSecretExpiresAt                   *string
	EventTypes                                []string
}

func TestWebhookEndpointsCRUDAndSSRF(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig()) // GATEHOUSE_WEBHOOK_ALLOW_PRIVATE off
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		base := "/api/v1/projects/" + ten.project.ID + "/webhook-endpoints"
		var list envelope[[]endpointBody]
		app.do(owner.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
		fixtures := len(list.Data) // the tenancy's own endpoint

		// Refused URLs: 400 on body.url, nothing written.
		for _, c := range []struct{ url, message string }{
			{"http://hooks.example.com/x", "must be an https URL"},
			{"https://127.0.0.1/hook", "resolves to a loopback, private, link-local or metadata address"},
			{"https://localhost:8443/hook", "resolves to a loopback, private, link-local or metadata address"},
			{"https://169.254.169.254/latest/meta-data/", "resolves to a loopback, private, link-local or metadata address"},
			{"https://10.0.0.7/hook", "resolves to a loopback, private, link-local or metadata address"},
			{"https://[::1]/hook", "resolves to a loopback, private, link-local or metadata address"},
			{"https://user:pw@93.184.215.14/hook", "must not carry credentials"},
			{"hooks.example.com", "must be an absolute URL"},
		} {
			p := app.do(owner.as(request{method: "POST", path: base, body: `{"url":"` + c.url + `","eventTypes":["*"]}`})).
				wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
			wantPaths(t, p.Errors, "body.url")
			if len(p.Errors) == 1 && p.Errors[0].Message != c.message {
				t.Errorf("%s: message %q, want %q", c.url, p.Errors[0].Message, c.message)
			}
		}
		p := app.do(owner.as(request{method: "POST", path: base, body: `{"url":"https://93.184.215.14/hook","eventTypes":["no.such_type"]}`})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.eventTypes.0")
		p = app.do(owner.as(request{method: "POST", path: base, body: `{"url":"https://93.184.215.14/hook","eventTypes":["*"],"environmentId":"env_nope"}`})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.environmentId")
		app.do(owner.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
		if len(list.Data) != fixtures {
			t.Fatalf("refused creations wrote %d endpoints", len(list.Data)-fixtures)
		}

		// Create: the secret is shown once.
		var created envelope[endpointBody]
		app.do(owner.as(request{method: "POST", path: base,
			body: `{"url":"https://93.184.215.14/hook","eventTypes":["config.update","subject.delete"],"description":"Caches"}`})).
			decode(t, http.StatusCreated, &created)
		e := created.Data
		if !regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`).MatchString(e.Secret) || e.URL != "https://93.184.215.14/hook" ||
			e.Description != "Caches" || strings.Join(e.EventTypes, ",") != "config.update,subject.delete" ||
			e.DisabledAt != nil || e.EnvironmentID != nil || e.ProjectID != ten.project.ID || !strings.HasPrefix(e.ID, "whe_") {
			t.Fatalf("created %+v", e)
		}
		var got envelope[map[string]any]
		app.do(owner.as(request{method: "GET", path: base + "/" + e.ID})).decode(t, http.StatusOK, &got)
		if _, ok := got.Data["secret"]; ok {
			t.Fatal("GET shows the secret")
		}
		// Sealed at rest: the stored value is not the secret.
		stored, err := app.store.WebhookEndpoint(t.Context(), ten.project.ID, e.ID)
		if err != nil || stored.Secret == e.Secret || strings.Contains(stored.Secret, strings.TrimPrefix(e.Secret, "whsec_")) {
			t.Fatalf("stored secret %q (err %v) is not sealed", stored.Secret, err)
		}

		// Patch, environment, disable, enable.
		env := ten.project.Environments[0].ID
		var patched envelope[endpointBody]
		app.do(owner.as(request{method: "PATCH", path: base + "/" + e.ID, body: `{"eventTypes":["*"],"environmentId":"` + env + `"}`})).
			decode(t, http.StatusOK, &patched)
		if strings.Join(patched.Data.EventTypes, ",") != "*" || patched.Data.EnvironmentID == nil || *patched.Data.EnvironmentID != env {
			t.Fatalf("patched %+v", patched.Data)
		}
		p = app.do(owner.as(request{method: "PATCH", path: base + "/" + e.ID, body: `{"url":"https://169.254.169.254/"}`})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.url")
		app.do(owner.as(request{method: "POST", path: base + "/" + e.ID + "/disable"})).decode(t, http.StatusOK, &patched)
		if patched.Data.DisabledAt == nil || patched.Data.DisabledReason == nil || *patched.Data.DisabledReason != "manual" {
			t.Fatalf("disabled %+v", patched.Data)
		}
		app.do(owner.as(request{method: "POST", path: base + "/" + e.ID + "/enable"})).decode(t, http.StatusOK, &patched)
		if patched.Data.DisabledAt != nil || patched.Data.DisabledReason != nil {
			t.Fatalf("enabled %+v", patched.Data)
		}
		var rotated envelope[endpointBody]
		app.do(owner.as(request{method: "POST", path: base + "/" + e.ID + "/rotate-secret"})).decode(t, http.StatusOK, &rotated)
		if rotated.Data.Secret == e.Secret || !strings.HasPrefix(rotated.Data.Secret, "whsec_") || rotated.Data.PreviousSecretExpiresAt == nil {
			t.Fatalf("rotated %+v", rotated.Data)
		}

		// Permissions: a viewer reads (credential:read) but may not change; a service account
		// with every scope may not change either (user only).
		viewer := ten.members[RoleViewer]
		app.do(viewer.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
		if len(list.Data) != fixtures+1 || list.Data[fixtures].ID != e.ID {
			t.Fatalf("viewer lists %+v", list.Data)
		}
		app.do(viewer.as(request{method: "POST", path: base, body: `{"url":"https://93.184.215.14/","eventTypes":["*"]}`})).
			wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		app.do(request{method: "DELETE", path: base + "/" + e.ID, headers: map[string]string{"X-API-Key": ten.starKey}}).
			wantProblem(t, http.StatusForbidden, "http-403", "A user session is required")
		app.do(ten.stranger.as(request{method: "GET", path: base})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")

		// The audit log has each change, and never the secret.
		var logs envelope[[]auditBody]
		app.do(owner.as(request{method: "GET", path: "/api/v1/projects/" + ten.project.ID + "/audit-logs?targetId=" + e.ID})).
			decode(t, http.StatusOK, &logs)
		var actions []string
		for _, l := range logs.Data {
			actions = append(actions, l.Action)
		}
		if strings.Join(actions, ",") != "webhook_endpoint.rotate_secret,webhook_endpoint.enable,webhook_endpoint.disable,webhook_endpoint.update,webhook_endpoint.create" {
			t.Fatalf("audit actions %v", actions)
		}

		res := app.do(owner.as(request{method: "DELETE", path: base + "/" + e.ID}))
		if res.Code != http.StatusNoContent {
			t.Fatalf("delete: %d %s", res.Code, res.Body)
		}
		app.do(owner.as(request{method: "GET", path: base + "/" + e.ID})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		raw, _ := json.Marshal(logs)
		if strings.Contains(string(raw), strings.TrimPrefix(e.Secret, "whsec_")) {
			t.Fatal("the audit log shows the secret")
		}
	})
}
