package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/identity/webhook"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestPublicAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "127.8.9.10": false, "::1": false, "10.1.2.3": false, "172.16.0.1": false,
		"192.168.1.1": false, "169.254.169.254": false, "fe80::1": false, "fc00::1": false, "0.0.0.0": false,
		"100.64.0.1": false, "::ffff:127.0.0.1": false, "::ffff:169.254.169.254": false, "fd00:ec2::254": false,
		"224.0.0.1": false, "93.184.215.14": true, "2606:2800:21f:cb07:6820:80da:af6b:8b2c": true, "8.8.8.8": true,
	} {
		if got := webhook.PublicAddress(netip.MustParseAddr(addr)); got != want {
			t.Errorf("PublicAddress(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestGuardControl(t *testing.T) {
	g := webhook.Guard{}
	for _, addr := range []string{"127.0.0.1:443", "169.254.169.254:80", "[::1]:443", "10.0.0.1:443"} {
		if err := g.Control("tcp", addr, nil); !errors.Is(err, webhook.ErrPrivateAddress) {
			t.Errorf("Control(%s) = %v, want ErrPrivateAddress", addr, err)
		}
	}
	if err := g.Control("tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
	if err := (webhook.Guard{AllowPrivate: true}).Control("tcp", "127.0.0.1:443", nil); err != nil {
		t.Errorf("AllowPrivate: Control(loopback) = %v", err)
	}
}

// fixture is a project with one endpoint at url (written through the store, past the
// creation check, as a name that resolved publicly then would be), a running webhook worker
// whose deliverer has guard, and the outcomes it observed.
type fixture struct {
	st       *store.Store
	em       *webhook.Emitter
	endpoint store.WebhookEndpoint
	mu       sync.Mutex
	outcomes []string
}

func newFixture(t *testing.T, b storetest.Backend, url string, guard webhook.Guard, transport http.RoundTripper) *fixture {
	t.Helper()
	ctx := context.Background()
	st := b.Open(t)
	ring, err := seal.NewKeyring([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, em: webhook.NewEmitter(st, ring)}
	st.OnAudit(f.em.AuditHook)
	u := store.User{Name: "Owner", Email: "owner@example.com"}
	org := store.Organization{Name: "Acme", Slug: "acme"}
	prj := store.Project{Name: "Shop", Slug: "shop"}
	f.endpoint = store.WebhookEndpoint{ID: store.NewWebhookEndpointID(), URL: url, EventTypes: []string{"*"}}
	if f.endpoint.Secret, err = ring.Seal([]byte(webhook.NewSecret()), store.WebhookSecretAAD(f.endpoint.ID)); err != nil {
		t.Fatal(err)
	}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateUser(ctx, &u, "!none"); err != nil {
			return err
		}
		if _, err := tx.CreateOrganization(ctx, &org, u.ID); err != nil {
			return err
		}
		prj.OrganizationID = org.ID
		if err := tx.CreateProject(ctx, &prj); err != nil {
			return err
		}
		f.endpoint.ProjectID = prj.ID
		return tx.CreateWebhookEndpoint(ctx, &f.endpoint)
	})
	if err != nil {
		t.Fatal(err)
	}
	d := webhook.NewDeliverer(st, ring, webhook.DelivererConfig{Guard: guard, Transport: transport,
		Observe: func(outcome string, _ time.Duration) {
			f.mu.Lock()
			f.outcomes = append(f.outcomes, outcome)
			f.mu.Unlock()
		}})
	w := outbox.NewWorker(st, ring, outbox.WorkerConfig{Handlers: map[string]outbox.Handler{webhook.Kind: d.Handler()},
		PollInterval: 10 * time.Millisecond, Schedule: []time.Duration{20 * time.Millisecond}})
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(wctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// mutate appends an audit entry of the fixture's project (an event for its endpoint).
func (f *fixture) mutate(t *testing.T, action string) string {
	t.Helper()
	e := store.AuditEntry{ActorType: store.ActorSystem, Action: action, TargetType: "project", TargetID: f.endpoint.ProjectID,
		ProjectID: f.endpoint.ProjectID}
	if err := f.st.InTx(context.Background(), func(tx *store.Tx) error { return tx.AppendAudit(context.Background(), &e) }); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// attempts waits until the endpoint has n attempts that are not pending and returns them.
func (f *fixture) attempts(t *testing.T, n int) []store.WebhookDelivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, _, err := f.st.WebhookDeliveries(context.Background(), f.endpoint.ID, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		var done []store.WebhookDelivery
		for _, d := range ds {
			if d.Status != store.DeliveryPending {
				done = append(done, d)
			}
		}
		if len(done) >= n {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d finished attempts after 10s, want %d: %+v", len(done), n, ds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConnectTimeGuard: an endpoint whose name resolves to 127.0.0.1 (localhost, as a DNS
// rebinding would make a public name do after creation) and one at the metadata address are
// refused when the worker connects, with GATEHOUSE_WEBHOOK_ALLOW_PRIVATE off: nothing reaches
// the receiver, and the attempt is recorded as failed, refused.
func TestConnectTimeGuard(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
			defer srv.Close()
			port := srv.URL[strings.LastIndex(srv.URL, ":"):]
			// The test server's certificate, with the guarded dialer: only the guard refuses.
			transport := srv.Client().Transport.(*http.Transport).Clone()
			transport.DialContext = (&netDialer{guard: webhook.Guard{}}).DialContext
			transport.TLSClientConfig.ServerName = "example.com" // the test certificate's name
			for _, url := range []string{"https://localhost" + port + "/hook", "https://169.254.169.254/latest/meta-data/"} {
				f := newFixture(t, b, url, webhook.Guard{}, transport)
				f.mutate(t, "project.update")
				ds := f.attempts(t, 1)
				if ds[0].Status != store.DeliveryFailed || ds[0].ResponseCode != 0 ||
					!strings.Contains(ds[0].Error, "loopback, private, link-local or metadata") {
					t.Errorf("%s: attempt %+v", url, ds[0])
				}
				f.mu.Lock()
				if len(f.outcomes) == 0 || f.outcomes[0] != webhook.OutcomeRefused {
					t.Errorf("%s: outcomes %v", url, f.outcomes)
				}
				f.mu.Unlock()
			}
			if hits.Load() != 0 {
				t.Fatalf("the receiver on 127.0.0.1 got %d requests", hits.Load())
			}
			// The same receiver is reached when private addresses are allowed: the guard, not
			// the transport, refused it above.
			allowed := srv.Client().Transport.(*http.Transport).Clone()
			allowed.TLSClientConfig.ServerName = "example.com" // the test certificate's name
			f := newFixture(t, b, "https://localhost"+port+"/hook", webhook.Guard{AllowPrivate: true}, allowed)
			f.mutate(t, "project.update")
			if ds := f.attempts(t, 1); ds[0].Status != store.DeliverySucceeded || hits.Load() != 1 {
				t.Fatalf("allowed: attempt %+v, hits %d", ds[0], hits.Load())
			}
		})
	}
}

// TestFailingEndpointDisabled: an endpoint that has failed continuously for three days is
// disabled at its next failure, with an audit entry by the system.
func TestFailingEndpointDisabled(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte(strings.Repeat("x", 10000)))
			}))
			defer srv.Close()
			f := newFixture(t, b, srv.URL+"/hook", webhook.Guard{AllowPrivate: true}, nil)
			ctx := context.Background()
			// Failing since 71 hours: one more failure does not disable it yet.
			setFailingSince(t, f, time.Now().Add(-71*time.Hour))
			f.mutate(t, "project.update")
			ds := f.attempts(t, 1)
			if ds[0].ResponseCode != 502 || len(ds[0].ResponseBody) != webhook.MaxStoredBody {
				t.Errorf("attempt %d with %d bytes of body stored, want 502 with 4096", ds[0].ResponseCode, len(ds[0].ResponseBody))
			}
			if e, _ := f.st.WebhookEndpoint(ctx, "", f.endpoint.ID); e.DisabledAt != nil {
				t.Fatal("disabled before three days")
			}
			setFailingSince(t, f, time.Now().Add(-73*time.Hour))
			f.mutate(t, "project.update")
			deadline := time.Now().Add(10 * time.Second)
			for {
				e, err := f.st.WebhookEndpoint(ctx, "", f.endpoint.ID)
				if err != nil {
					t.Fatal(err)
				}
				if e.DisabledAt != nil {
					if e.DisabledReason != store.WebhookDisabledFailing {
						t.Fatalf("disabled for %q", e.DisabledReason)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("not disabled after three days of failures")
				}
				time.Sleep(10 * time.Millisecond)
			}
			logs, err := f.st.ListAudit(ctx, store.AuditFilter{ProjectID: f.endpoint.ProjectID, Action: "webhook_endpoint.disable"})
			if err != nil || len(logs) != 1 || logs[0].ActorType != store.ActorSystem || logs[0].TargetID != f.endpoint.ID ||
				logs[0].Metadata["reason"] != "failing" {
				t.Fatalf("audit entries %+v, %v", logs, err)
			}
		})
	}
}

func setFailingSince(t *testing.T, f *fixture, at time.Time) {
	t.Helper()
	ctx := context.Background()
	err := f.st.InTx(ctx, func(tx *store.Tx) error {
		e, err := tx.WebhookEndpointForUpdate(ctx, f.endpoint.ProjectID, f.endpoint.ID)
		if err != nil {
			return err
		}
		e.FailingSince = &at
		return tx.UpdateWebhookEndpoint(ctx, &e)
	})
	if err != nil {
		t.Fatal(err)
	}
}
