package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// usageSender is one project of TestUsageGroupCommitProjects with its own API key.
type usageSender struct {
	project, env, accountID, keyID, key string
}

// TestUsageGroupCommitProjects: single events sent at once from 10 projects with 10 keys share
// group commits (store/usage_batch.go) and keep every rule of one project per commit: each
// event is acknowledged only once stored, stored exactly once, replays answer 200 with the
// original id, a key revoked between two rounds is refused at the next one while the other
// projects' events are recorded, and a failing event (a trigger rejects it) fails only the
// events of its own project's transaction: every other project's events are acknowledged,
// and every event answered 500 is absent.
func TestUsageGroupCommitProjects(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		url := b.URL(t)
		st := openURL(t, url, store.WithClock(storetest.NewClock(usageNow).Now))
		app := newTestApp(t, st, testConfig())
		ten := app.newTenancy(t)
		db := rawDB(t, url)

		senders := make([]usageSender, 10)
		for i := range senders {
			pt := ten
			if i > 0 {
				pt.project = store.Project{Name: "Shop " + strconv.Itoa(i), Slug: "shop-" + strconv.Itoa(i), OrganizationID: ten.org.ID}
				if err := st.InTx(ctx, func(tx *store.Tx) error { return tx.CreateProject(ctx, &pt.project) }); err != nil {
					t.Fatal(err)
				}
			}
			s := &senders[i]
			s.project, s.env = pt.project.ID, pt.project.Environments[0].ID
			s.accountID, s.keyID, s.key = app.createKey(t, pt, `{"name":"sender","scopes":["usage:write"]}`)
		}

		// round sends perProject single events from every sender at once, event ids
		// prefix-<project>-<n>, subject of event n "sub-<n>" (or "poison" for poisoned), and
		// returns each response's status and acknowledged id, by sender and event.
		round := func(prefix string, perProject int, poisoned string) ([][]int, [][]string) {
			codes, ids := make([][]int, len(senders)), make([][]string, len(senders))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, s := range senders {
				codes[i], ids[i] = make([]int, perProject), make([]string, perProject)
				for n := range perProject {
					wg.Go(func() {
						eventID := fmt.Sprintf("%s-%d-%d", prefix, i, n)
						subject := "sub-" + strconv.Itoa(n)
						if eventID == poisoned {
							subject = "poison"
						}
						<-start
						res := postEvent(app, s.key, s.project, `{"eventId":"`+eventID+`","subjectId":"`+subject+
							`","environmentId":"`+s.env+`","meter":"api_call"}`)
						var a usageAck
						_ = json.Unmarshal(res.Body.Bytes(), &a)
						codes[i][n], ids[i][n] = res.Code, a.Data.ID
					})
				}
			}
			close(start)
			wg.Wait()
			return codes, ids
		}
		// stored returns the stored id of every event of prefix, by event id.
		stored := func(prefix string) map[string][]string {
			var rows []struct {
				EventID string `db:"event_id"`
				ID      string `db:"id"`
			}
			if err := db.Select(&rows, db.Rebind(`SELECT event_id, id FROM usage_events WHERE event_id LIKE ?`), prefix+"-%"); err != nil {
				t.Fatal(err)
			}
			out := map[string][]string{}
			for _, r := range rows {
				out[r.EventID] = append(out[r.EventID], r.ID)
			}
			return out
		}

		// Every event new, acknowledged with 201 and stored once under the acknowledged id.
		codes, ids := round("a", 20, "")
		rows := stored("a")
		if len(rows) != 200 {
			t.Fatalf("%d events stored, want 200", len(rows))
		}
		for i := range senders {
			for n := range 20 {
				eventID := fmt.Sprintf("a-%d-%d", i, n)
				if codes[i][n] != http.StatusCreated || len(rows[eventID]) != 1 || rows[eventID][0] != ids[i][n] {
					t.Fatalf("%s: status %d, id %q, stored %v", eventID, codes[i][n], ids[i][n], rows[eventID])
				}
			}
		}
		// The same events again: all replays, 200 with the original ids, nothing stored.
		again, againIDs := round("a", 20, "")
		for i := range senders {
			for n := range 20 {
				if again[i][n] != http.StatusOK || againIDs[i][n] != ids[i][n] {
					t.Fatalf("replay a-%d-%d: status %d, id %q, want 200 and %q", i, n, again[i][n], againIDs[i][n], ids[i][n])
				}
			}
		}
		if n := len(stored("a")); n != 200 {
			t.Fatalf("%d events stored after the replays, want 200", n)
		}

		// Project 3's key revoked: its next events are refused (401) and not stored; the others
		// are recorded.
		s3 := senders[3]
		app.do(ten.members[RoleOwner].as(request{method: http.MethodPost, path: "/api/v1/projects/" + s3.project +
			"/service-accounts/" + s3.accountID + "/keys/" + s3.keyID + "/revoke"})).decode(t, http.StatusOK, &map[string]any{})
		codes, _ = round("r", 5, "")
		rows = stored("r")
		for i := range senders {
			for n := range 5 {
				eventID := fmt.Sprintf("r-%d-%d", i, n)
				want, wantRows := http.StatusCreated, 1
				if i == 3 {
					want, wantRows = http.StatusUnauthorized, 0
				}
				if codes[i][n] != want || len(rows[eventID]) != wantRows {
					t.Fatalf("%s: status %d with %d rows, want %d with %d", eventID, codes[i][n], len(rows[eventID]), want, wantRows)
				}
			}
		}

		// A trigger rejects the subject "poison": p-0-0 fails with 500; the events of project 0
		// that shared its transaction may fail with it, never those of another project.
		poison := []string{
			`CREATE TRIGGER usage_poison BEFORE INSERT ON usage_events WHEN NEW.subject_id = 'poison'
				BEGIN SELECT RAISE(ABORT, 'poisoned event'); END`,
		}
		if b.Name == string(store.Postgres) {
			poison = []string{
				`CREATE FUNCTION usage_poison() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN IF NEW.subject_id = 'poison' THEN RAISE EXCEPTION 'poisoned event'; END IF; RETURN NEW; END $$`,
				`CREATE TRIGGER usage_poison BEFORE INSERT ON usage_events FOR EACH ROW EXECUTE FUNCTION usage_poison()`,
			}
		}
		for _, q := range poison {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		codes, ids = round("p", 10, "p-0-0")
		rows = stored("p")
		if codes[0][0] != http.StatusInternalServerError || len(rows["p-0-0"]) != 0 {
			t.Fatalf("poisoned event: status %d, %d rows; want 500 and none", codes[0][0], len(rows["p-0-0"]))
		}
		for i := range senders {
			for n := range 10 {
				eventID := fmt.Sprintf("p-%d-%d", i, n)
				switch {
				case i == 3:
					if codes[i][n] != http.StatusUnauthorized || len(rows[eventID]) != 0 {
						t.Fatalf("%s: status %d with %d rows, want 401 and none", eventID, codes[i][n], len(rows[eventID]))
					}
				case codes[i][n] == http.StatusCreated:
					if len(rows[eventID]) != 1 || rows[eventID][0] != ids[i][n] {
						t.Fatalf("%s: acknowledged %q, stored %v", eventID, ids[i][n], rows[eventID])
					}
				case i == 0 && codes[i][n] == http.StatusInternalServerError:
					if len(rows[eventID]) != 0 {
						t.Fatalf("%s: failed yet stored %v", eventID, rows[eventID])
					}
				default:
					t.Fatalf("%s: status %d", eventID, codes[i][n])
				}
			}
		}
	})
}
