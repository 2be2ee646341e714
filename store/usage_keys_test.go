package store

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
)

// TestIngestConfirmsKeysOncePerCall: the PostgreSQL ingest statement (postgresIngest) refuses
// an event whose key is revoked, expired, of a disabled account, or of an archived project or
// organization, and it reads each key it confirms once per call, whatever the number of service
// accounts and projects. Measured under the pinned load, the generic plan PostgreSQL cached for
// the old form (a plain join, usableKeyJoin) joined every service account to every project
// first, as the tables' statistics were older than their rows, and probed api_keys once per
// service account: 1.75 ms of a 2.1 ms flush with 111 accounts. The fixture reproduces that: 60
// projects and accounts made in a new schema, never analyzed, and a plan forced generic.
func TestIngestConfirmsKeysOncePerCall(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC)}
	s := openUsagePostgres(t, clock)
	ctx := t.Context()

	const accounts = 60
	keys := make([]*APIKey, accounts)
	projects := make([]string, accounts)
	accountIDs := make([]string, accounts)
	err := s.InTx(ctx, func(tx *Tx) error {
		u := User{Name: "Owner", Email: "keys-once@example.com"}
		if err := tx.CreateUser(ctx, &u, ""); err != nil {
			return err
		}
		for i := range accounts {
			p, err := projectOwnedBy(ctx, tx, u.ID, fmt.Sprintf("metered-%d", i))
			if err != nil {
				return err
			}
			sum := sha256.Sum256([]byte(NewID("secret")))
			keys[i] = &APIKey{PublicID: fmt.Sprintf("k%0*d", APIKeyPublicIDLen-1, i), SecretHash: sum[:]}
			sa := ServiceAccount{ProjectID: p.ID, Name: "ingest", Scopes: []string{"usage:write"}}
			if err := tx.CreateServiceAccount(ctx, &sa, keys[i]); err != nil {
				return err
			}
			projects[i], accountIDs[i] = p.ID, sa.ID
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Keys 1 to 5 refused, each for one reason; key 0 and keys 6 on usable.
	past := clock.Now().Add(-time.Second)
	for _, q := range []struct {
		query string
		arg   string
	}{
		{`UPDATE api_keys SET revoked_at = $1 WHERE id = $2`, keys[1].ID},
		{`UPDATE api_keys SET expires_at = $1 WHERE id = $2`, keys[2].ID},
		{`UPDATE service_accounts SET disabled_at = $1 WHERE id = $2`, accountIDs[3]},
		{`UPDATE projects SET archived_at = $1 WHERE id = $2`, projects[4]},
		{`UPDATE organizations SET archived_at = $1 WHERE id = (SELECT organization_id FROM projects WHERE id = $2)`, projects[5]},
	} {
		if _, err := s.writer.ExecContext(ctx, q.query, past, q.arg); err != nil {
			t.Fatal(err)
		}
	}

	// One event per key of keys 0 to 6, then one without a key.
	var events []UsageEvent
	for i := range 8 {
		e := UsageEvent{ProjectID: projects[i%accounts], EventID: fmt.Sprintf("e%d", i), ID: fmt.Sprintf("uev_%d", i),
			EnvironmentID: "env_1", SubjectID: "s1", Meter: "m1", Quantity: 1, Timestamp: clock.Now()}
		if i < 7 {
			e.KeyID = keys[i].ID
		}
		if err := prepareUsageEvent(&e, clock.Now()); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	got, err := s.ingestPostgres(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	refused := IngestResult{KeyRefused: true}
	want := []IngestResult{{ID: "uev_0"}, refused, refused, refused, refused, refused, {ID: "uev_6"}, {ID: "uev_7"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("results:\n got %+v\nwant %+v", got, want)
	}

	// The plan: one event with key 0, the statement prepared on one connection with a generic
	// plan, as the pool's statements are after their fifth run.
	conn, err := s.writer.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `PREPARE ingest_plan AS `+postgresIngest); err != nil {
		t.Fatal(err)
	}
	array := func(v ...string) string {
		text, err := pq.Array(v).Value()
		if err != nil {
			t.Fatal(err)
		}
		return pq.QuoteLiteral(text.(string))
	}
	at := pq.QuoteLiteral(clock.Now().Format(time.RFC3339Nano))
	args := []string{array(projects[0]), array("plan-1"), array("uev_plan_1"), array("env_1"), array("s1"), array("m1"),
		`'{1}'`, array(clock.Now().Format(time.RFC3339Nano)), array(clock.Now().Format(time.RFC3339Nano)), `'{NULL}'`,
		array(UsageDay(clock.Now())), "0", array(keys[0].ID), at}
	var plan []byte
	if err := conn.GetContext(ctx, &plan, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ingest_plan(`+strings.Join(args, ", ")+`)`); err != nil {
		t.Fatal(err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal(plan, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	loops := map[string]float64{}
	doc[0].Plan.walk(func(n planNode) {
		if n.Relation != "" {
			loops[n.Relation] += n.Loops
		}
	})
	for _, table := range []string{"api_keys", "service_accounts", "projects", "organizations"} {
		if loops[table] != 1 {
			t.Errorf("%s scanned %v times for one key, want 1 (scans by table: %v)", table, loops[table], loops)
		}
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON): the table it scans, if any, how many times it
// ran, and its children.
type planNode struct {
	Relation string     `json:"Relation Name"`
	Loops    float64    `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}
