package haload

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
)

// CheckAnswers fails t for any answer that breaks the failover contract: a status of 500 or
// more other than 503, a 503 without Retry-After or not of the unavailable problem type, or a
// request that got no answer at all. It returns the unavailability window.
func (l *Load) CheckAnswers(t testing.TB) Window {
	t.Helper()
	l.Ledger.mu.Lock()
	bad := 0
	for _, o := range l.Ledger.Outcomes {
		var why string
		switch {
		case o.Status == 0:
			why = "no answer: " + o.Err
		case o.Status == http.StatusServiceUnavailable && o.RetryAfter == "":
			why = "503 without Retry-After"
		case o.Status == http.StatusServiceUnavailable && !strings.HasSuffix(o.Problem, "/problems/unavailable"):
			why = "503 of problem type " + o.Problem
		case o.Status >= 500 && o.Status != http.StatusServiceUnavailable:
			why = fmt.Sprintf("status %d (%s)", o.Status, o.Problem)
		default:
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s at %s: %s", o.Kind, o.Start.Format("15:04:05.000"), why)
		}
	}
	l.Ledger.mu.Unlock()
	if bad > 10 {
		t.Errorf("… %d answers broke the contract in all", bad)
	}
	return l.Ledger.Unavailability()
}

// CheckDurable fails t unless every write the ledger holds as acknowledged is in the
// PostgreSQL database at dbURL (the primary the server writes to after the switch): each
// signed-in session, each configuration version, each usage event. It returns how many
// acknowledged writes it found.
func (l *Load) CheckDurable(t testing.TB, dbURL string) int {
	t.Helper()
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l.Ledger.mu.Lock()
	defer l.Ledger.mu.Unlock()
	found := 0
	missing := func(what, query string, want []string, args ...any) {
		t.Helper()
		have := map[string]bool{}
		rows, err := db.QueryContext(ctx, query, append([]any{pq.Array(want)}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			have[s] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		var lost []string
		for _, w := range want {
			if !have[w] {
				lost = append(lost, w)
			}
		}
		found += len(want) - len(lost)
		if len(lost) > 0 {
			t.Errorf("%d of %d acknowledged %s missing, e.g. %v", len(lost), len(want), what, lost[:min(5, len(lost))])
		}
	}
	missing("sessions", `SELECT token_hash FROM sessions WHERE token_hash = ANY($1)`, l.Ledger.Sessions)
	var versions []string
	for key, vs := range l.Ledger.Configs {
		for _, v := range vs {
			versions = append(versions, fmt.Sprintf("%s@%d", key, v))
		}
	}
	missing("config versions", `SELECT e.key || '@' || v.version FROM config_versions v
		JOIN config_entries e ON e.id = v.entry_id
		WHERE e.environment_id = $2 AND e.key || '@' || v.version = ANY($1)`, versions, l.F.EnvID)
	missing("usage events", `SELECT event_id FROM usage_events WHERE project_id = $2 AND event_id = ANY($1)`,
		l.Ledger.Events, l.F.ProjectID)
	return found
}

// WaitEventsDelivered waits up to timeout until the webhook receiver got, for every
// config.update audit entry of the project in the database at dbURL (each committed config
// write, the acknowledged ones among them), a delivery naming it; it fails t with the count
// still undelivered otherwise. It returns how many events it waited for.
func (l *Load) WaitEventsDelivered(t testing.TB, dbURL string, timeout time.Duration) int {
	t.Helper()
	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []string
	rows, err := db.Query(`SELECT id FROM audit_logs WHERE project_id = $1 AND action = 'config.update'`, l.F.ProjectID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	deadline := time.Now().Add(timeout)
	for {
		all := strings.Join(l.F.Hooks.Bodies(), "\n")
		var undelivered []string
		for _, id := range ids {
			if !strings.Contains(all, id) {
				undelivered = append(undelivered, id)
			}
		}
		if len(undelivered) == 0 {
			return len(ids)
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d config.update events not delivered after %v, e.g. %v", len(undelivered), len(ids),
				timeout, undelivered[:min(5, len(undelivered))])
			return len(ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
