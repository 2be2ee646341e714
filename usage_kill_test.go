package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestUsageSurvivesSIGKILL builds the real binary and, on each backend, sends uniquely keyed
// usage events from 8 connections while the server is killed with SIGKILL and restarted, three
// times. Afterwards every acknowledged event is a duplicate when sent again (it is stored, and
// only once: the unique key), every other event sent is stored at most once, and the rollups
// agree with the events: the subjects' event counts sum to the number of distinct events sent.
func TestUsageSurvivesSIGKILL(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i + 1)
	}
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			dbURL := b.URL(t)
			projectID, envID, key := seedKillFixture(t, dbURL, secret)
			dataDir := t.TempDir()
			port := freePort(t)
			base := "http://127.0.0.1:" + port
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir,
				"GATEHOUSE_LISTEN_ADDR=127.0.0.1:" + port, "GATEHOUSE_DATA_DIR=" + dataDir,
				"GATEHOUSE_DATABASE_URL=" + dbURL, "GATEHOUSE_SECRET_KEY=" + base64.StdEncoding.EncodeToString(secret),
				"GATEHOUSE_LOG_LEVEL=error"}
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}}
			send := func(id string) (int, error) {
				body := fmt.Sprintf(`{"eventId":%q,"subjectId":"s-%d","environmentId":%q,"meter":"api_call"}`, id, len(id)%50, envID)
				req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/projects/"+projectID+"/usage-events", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", key)
				res, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				res.Body.Close()
				return res.StatusCode, nil
			}

			var mu sync.Mutex
			acked := map[string]bool{}
			var sent []string
			for round := range 3 {
				cmd := startBinary(t, bin, env, base)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						for n := 0; ; n++ {
							select {
							case <-stop:
								return
							default:
							}
							id := fmt.Sprintf("r%d-w%d-%d", round, w, n)
							mu.Lock()
							sent = append(sent, id)
							mu.Unlock()
							code, err := send(id)
							if err != nil {
								return // the server died under the request: not acknowledged
							}
							if code != http.StatusCreated {
								t.Errorf("%s: status %d, want 201", id, code)
								return
							}
							mu.Lock()
							acked[id] = true
							mu.Unlock()
						}
					})
				}
				// Kill once this round has had some events acknowledged (however slow the
				// machine), a little later each round.
				before := ackedCount(&mu, acked)
				for deadline := time.Now().Add(time.Minute); ackedCount(&mu, acked) < before+25 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(time.Duration(50*round) * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				close(stop)
				wg.Wait()
			}
			if len(acked) < 75 {
				t.Fatalf("only %d events acknowledged: the load did not run", len(acked))
			}
			cmd := startBinary(t, bin, env, base)
			defer func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }()
			replayed, recorded := 0, 0
			for _, id := range sent {
				code, err := send(id)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case acked[id] && code != http.StatusOK:
					t.Errorf("acknowledged %s sent again: %d, want 200 (duplicate)", id, code)
				case code == http.StatusOK:
					replayed++
				case code == http.StatusCreated:
					recorded++ // sent, but the kill came before it committed
				default:
					t.Errorf("%s: %d", id, code)
				}
			}
			t.Logf("%d sent, %d acknowledged, %d stored before the kills, %d only on the resend", len(sent), len(acked), replayed, recorded)
			// The rollups count each stored event exactly once.
			st, err := store.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			total, subjects, err := st.UsageSubjects(context.Background(), store.SubjectQuery{
				AnalyticsScope: store.AnalyticsScope{ProjectID: projectID}, Since: time.Now().AddDate(0, 0, -1), Sort: "subjectId", Limit: 200})
			if err != nil {
				t.Fatal(err)
			}
			var events int64
			for _, s := range subjects {
				events += s.Events
			}
			if events != int64(len(sent)) || total == 0 {
				t.Fatalf("rollups count %d events over %d subjects, want %d", events, total, len(sent))
			}
		})
	}
}

func ackedCount(mu *sync.Mutex, acked map[string]bool) int {
	mu.Lock()
	defer mu.Unlock()
	return len(acked)
}

// seedKillFixture creates a project and a service account with usage:write directly in the
// database, and returns the project, its first environment and the API key.
func seedKillFixture(t *testing.T, dbURL string, secret []byte) (projectID, envID, key string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	publicID, keySecret, full, err := identity.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	owner := store.User{Name: "Owner", Email: "owner@kill.example.com"}
	org := store.Organization{Name: "Kill", Slug: "kill"}
	prj := store.Project{Name: "Usage", Slug: "usage"}
	err = st.InTx(ctx, func(tx *store.Tx) error {
		if err := storetest.CreateOwnedProject(ctx, tx, &owner, "!no-password", &org, &prj); err != nil {
			return err
		}
		sa := store.ServiceAccount{ProjectID: prj.ID, Name: "sender", Scopes: []string{"usage:write"}}
		return tx.CreateServiceAccount(ctx, &sa, &store.APIKey{PublicID: publicID,
			SecretHash: identity.HashAPIKeySecret(seal.DeriveKey(secret, "api-key"), keySecret)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return prj.ID, prj.Environments[0].ID, full
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// startBinary starts `gatehouse serve` and waits until /api/v1/health answers.
func startBinary(t *testing.T, bin string, env []string, base string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(base + "/api/v1/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return cmd
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	t.Fatalf("server did not start: %s", stderr.String())
	return nil
}
