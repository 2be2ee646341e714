package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity/mail/mailtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// mailOutage is how long the mail server is down in the middle of the sign-up burst.
const mailOutage = 30 * time.Second

// TestMailSurvivesOutageAndSIGKILL builds the real binary and, on each backend, signs up 50
// users while the mail server goes down for 30 s after the first 25; in between, Gatehouse is
// killed with SIGKILL and started again (and, in a second run, it keeps running). When the mail
// server is back, every sign-up's
// verification message arrives exactly once, and none arrives while it is down.
//
// The worker runs with its defaults (poll every second, first retry 15–30 s after a failure).
// The kill comes two seconds after the last sign-up, when every message sent during the outage
// has failed its first attempt and waits for its retry: no claim is in flight, so nothing waits
// for a dead process's lease (a message that had been sent but not recorded would be sent twice;
// the test would see it).
func TestMailSurvivesOutageAndSIGKILL(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gatehouse")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i + 7)
	}
	for _, b := range storetest.Backends(t) {
		for _, kill := range []bool{false, true} {
			name := b.Name
			if kill {
				name += "/sigkill"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				mailOutageBurst(t, bin, secret, b, kill)
			})
		}
	}
}

// mailOutageBurst is one run of TestMailSurvivesOutageAndSIGKILL on backend b, killing the
// server in the outage when kill is set.
func mailOutageBurst(t *testing.T, bin string, secret []byte, b storetest.Backend, kill bool) {
	dbURL := b.URL(t)
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	smtp := mailtest.Start(t, mailtest.Options{})
	dataDir := t.TempDir()
	port := freePort(t)
	base := "http://127.0.0.1:" + port
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir,
		"GATEHOUSE_LISTEN_ADDR=127.0.0.1:" + port, "GATEHOUSE_DATA_DIR=" + dataDir, "GATEHOUSE_BASE_URL=" + base,
		"GATEHOUSE_DATABASE_URL=" + dbURL, "GATEHOUSE_SECRET_KEY=" + base64.StdEncoding.EncodeToString(secret),
		"GATEHOUSE_SMTP_URL=" + smtp.URL(), "GATEHOUSE_MAIL_FROM=Gatehouse <no-reply@gatehouse.test>",
		"GATEHOUSE_TRUSTED_PROXIES=127.0.0.1", "GATEHOUSE_LOG_LEVEL=error"}
	client := &http.Client{Timeout: 10 * time.Second}
	signUp := func(i int) {
		t.Helper()
		body := fmt.Sprintf(`{"name":"User %d","email":"user%d@example.com","password":"correct-horse-battery"}`, i, i)
		req, _ := http.NewRequest(http.MethodPost, base+"/api/auth/sign-up/email", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base)
		// Each sign-up from its own client IP: 30 messages per IP per hour is a send limit.
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i+1))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("sign-up %d: %v", i, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("sign-up %d: %d", i, res.StatusCode)
		}
	}

	cmd := startBinary(t, bin, env, base)
	for i := range 25 {
		signUp(i)
	}
	// The server stops once the worker has recorded the 25 as sent: one stopped between
	// taking a message and acknowledging it would get it again (SMTP's at-least-once).
	smtp.Wait(t, 25, 30*time.Second)
	outboxSettled(t, dbURL)
	smtp.Stop()
	down := time.Now()
	for i := 25; i < 50; i++ {
		signUp(i)
	}
	if kill {
		time.Sleep(2 * time.Second)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		cmd = startBinary(t, bin, env, base)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()

	time.Sleep(time.Until(down.Add(mailOutage)))
	if n := len(smtp.Messages()); n != 25 {
		t.Fatalf("%d messages by the end of the outage, want the 25 sent before it", n)
	}
	smtp.Restart()
	defer func() {
		if t.Failed() {
			t.Log(outboxState(t, dbURL))
		}
	}()
	deadline := time.Now().Add(150 * time.Second)
	for i := 0; i < 50; {
		if len(smtp.To(fmt.Sprintf("user%d@example.com", i))) > 0 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message to user%d@example.com within 150 s after the mail server came back", i)
		}
		time.Sleep(100 * time.Millisecond)
	}
	outboxSettled(t, dbURL)
	time.Sleep(2 * time.Second) // time for a duplicate to show
	msgs := smtp.Messages()
	if len(msgs) != 50 {
		t.Errorf("%d messages arrived, want 50", len(msgs))
	}
	for i := range 50 {
		addr := fmt.Sprintf("user%d@example.com", i)
		if got := smtp.To(addr); len(got) != 1 || got[0].Subject != "Confirm your email address for Gatehouse" {
			t.Errorf("%s received %d messages, want exactly 1", addr, len(got))
		}
	}
	t.Logf("all 50 arrived %s after the mail server came back", time.Since(down.Add(mailOutage)).Round(time.Second))
}

// outboxState lists the outbox's rows (without payloads), for a failure's message.
func outboxState(t *testing.T, dbURL string) string {
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		return err.Error()
	}
	defer st.Close()
	var out strings.Builder
	for _, db := range st.Pools() {
		rows, err := db.Query(`SELECT id, attempts, CAST(next_attempt_at AS TEXT), COALESCE(CAST(sent_at AS TEXT), ''), COALESCE(last_error, '') FROM outbox ORDER BY created_at`)
		if err != nil {
			return err.Error()
		}
		for rows.Next() {
			var id, next, sent, lastErr string
			var attempts int
			_ = rows.Scan(&id, &attempts, &next, &sent, &lastErr)
			fmt.Fprintf(&out, "%s attempts=%d next=%s sent=%s err=%s\n", id, attempts, next, sent, lastErr)
		}
		rows.Close()
		break
	}
	return out.String()
}

// outboxSettled waits until no message is pending in the outbox at dbURL: each is recorded as
// sent (or given up).
func outboxSettled(t *testing.T, dbURL string) {
	t.Helper()
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := st.OutboxDue(context.Background(), time.Now().Add(24*time.Hour), []string{"mail"})
		if err != nil {
			t.Fatal(err)
		}
		if !pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mail still pending after 30 s:\n%s", outboxState(t, dbURL))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
