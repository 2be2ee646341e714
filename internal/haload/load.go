package haload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind names one kind of request the load sends.
type Kind string

// The kinds of request of the mixed load.
const (
	SignIn      Kind = "sign-in"
	Authorize   Kind = "authorize"
	ConfigWrite Kind = "config-write"
	UsageSingle Kind = "usage-single"
	UsageBatch  Kind = "usage-batch"
)

// Kinds lists every kind, in the order the load's workers are started.
var Kinds = []Kind{SignIn, Authorize, ConfigWrite, UsageSingle, UsageBatch}

// Outcome is one answer (or transport failure, Status 0) the load saw.
type Outcome struct {
	Kind   Kind
	Status int
	// RetryAfter is the Retry-After header (503s must have one).
	RetryAfter string
	// Problem is the problem type of an error answer, Err a transport error.
	Problem, Err string
	Start, End   time.Time
}

// Failed reports whether the answer is no success: a transport error or a status of 500 or
// more. (4xx answers are the load's own doing and count as answers.)
func (o Outcome) Failed() bool { return o.Status == 0 || o.Status >= 500 }

// Ledger records what the server acknowledged and everything it answered. Safe for concurrent
// use.
type Ledger struct {
	mu sync.Mutex
	// Sessions are the token hashes of acknowledged sign-ins (sessions.token_hash).
	Sessions []string
	// Configs maps an acknowledged config key to its acknowledged versions.
	Configs map[string][]int
	// Events are the eventIds of acknowledged usage events (201 single, accepted in a batch,
	// and duplicates: 200 means the event is stored).
	Events   []string
	Outcomes []Outcome
}

func (l *Ledger) record(o Outcome) {
	l.mu.Lock()
	l.Outcomes = append(l.Outcomes, o)
	l.mu.Unlock()
}

// Load is a mixed load against a Fixture.
type Load struct {
	F *Fixture
	// Workers per kind (default 2); Pause between one worker's requests (default 5 ms).
	Workers int
	Pause   time.Duration
	Ledger  Ledger
	seq     atomic.Int64
}

// Run sends the load until ctx ends and returns when every worker has stopped. Each request
// gives up after the client's timeout; a worker never waits on another.
func (l *Load) Run(ctx context.Context) {
	if l.Workers == 0 {
		l.Workers = 2
	}
	if l.Pause == 0 {
		l.Pause = 5 * time.Millisecond
	}
	if l.Ledger.Configs == nil {
		l.Ledger.Configs = map[string][]int{}
	}
	var wg sync.WaitGroup
	for _, k := range Kinds {
		for w := range l.Workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					l.one(k, w)
					select {
					case <-ctx.Done():
					case <-time.After(l.Pause):
					}
				}
			})
		}
	}
	wg.Wait()
}

// one sends one request of kind k for worker w and records the answer.
func (l *Load) one(k Kind, w int) {
	f := l.F
	n := l.seq.Add(1)
	key := map[string]string{"X-API-Key": f.APIKey}
	var method, path, body string
	headers := key
	var batchIDs []string
	switch k {
	case SignIn:
		method, path = http.MethodPost, "/api/auth/sign-in/email"
		body = jsonBody(map[string]string{"email": f.Users[int(n)%len(f.Users)], "password": Password})
		headers = map[string]string{"Origin": f.Origin}
	case Authorize:
		method, path = http.MethodPost, "/api/v1/authorize"
		body = jsonBody(map[string]string{"projectId": f.ProjectID, "principalType": "user",
			"principalId": fmt.Sprintf("p-%d", n%20), "permission": "document:write"})
	case ConfigWrite:
		method, path = http.MethodPut, fmt.Sprintf("/api/v1/environments/%s/configs/LOAD_%d", f.EnvID, w)
		body = jsonBody(map[string]any{"value": n})
	case UsageSingle:
		method, path = http.MethodPost, "/api/v1/projects/"+f.ProjectID+"/usage-events"
		body = jsonBody(map[string]string{"eventId": fmt.Sprintf("s-%d", n), "subjectId": fmt.Sprintf("sub-%d", n%50),
			"environmentId": f.EnvID, "meter": "api_call"})
	case UsageBatch:
		method, path = http.MethodPost, "/api/v1/projects/"+f.ProjectID+"/usage-events/batch"
		events := make([]map[string]string, 20)
		for i := range events {
			id := fmt.Sprintf("b-%d-%d", n, i)
			batchIDs = append(batchIDs, id)
			events[i] = map[string]string{"eventId": id, "subjectId": fmt.Sprintf("sub-%d", i), "meter": "api_call"}
		}
		body = jsonBody(map[string]any{"environmentId": f.EnvID, "events": events})
	}
	o := Outcome{Kind: k, Start: time.Now()}
	code, h, raw, err := call(method, f.Base+path, body, headers)
	o.End, o.Status = time.Now(), code
	if err != nil {
		o.Err = err.Error()
	} else {
		o.RetryAfter = h.Get("Retry-After")
		if strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			var p struct{ Type string }
			_ = json.Unmarshal(raw, &p)
			o.Problem = p.Type
		}
	}
	l.Ledger.record(o)
	if code != http.StatusOK && code != http.StatusCreated {
		return
	}
	l.Ledger.mu.Lock()
	defer l.Ledger.mu.Unlock()
	switch k {
	case SignIn:
		var r struct{ Token string }
		if json.Unmarshal(raw, &r) == nil && r.Token != "" {
			sum := sha256.Sum256([]byte(r.Token))
			l.Ledger.Sessions = append(l.Ledger.Sessions, hex.EncodeToString(sum[:]))
		}
	case ConfigWrite:
		var r struct {
			Data struct {
				Key     string
				Version int
			}
		}
		if json.Unmarshal(raw, &r) == nil {
			l.Ledger.Configs[r.Data.Key] = append(l.Ledger.Configs[r.Data.Key], r.Data.Version)
		}
	case UsageSingle:
		l.Ledger.Events = append(l.Ledger.Events, fmt.Sprintf("s-%d", n))
	case UsageBatch:
		l.Ledger.Events = append(l.Ledger.Events, batchIDs...)
	}
}

// Window is the unavailability the load saw: from the start of the first failed request to
// the end of the first successful request after the last failure (zero when nothing failed).
type Window struct {
	FirstFailure, Recovered time.Time
	Failed, Total           int
}

// Duration is Recovered − FirstFailure.
func (w Window) Duration() time.Duration { return w.Recovered.Sub(w.FirstFailure) }

// Unavailability computes the Window over every outcome recorded.
func (l *Ledger) Unavailability() Window {
	l.mu.Lock()
	out := append([]Outcome(nil), l.Outcomes...)
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].End.Before(out[j].End) })
	var w Window
	w.Total = len(out)
	var lastFail time.Time
	for _, o := range out {
		if o.Failed() {
			w.Failed++
			if w.FirstFailure.IsZero() || o.Start.Before(w.FirstFailure) {
				w.FirstFailure = o.Start
			}
			if o.End.After(lastFail) {
				lastFail = o.End
			}
		}
	}
	if w.Failed == 0 {
		return w
	}
	for _, o := range out {
		if !o.Failed() && o.End.After(lastFail) {
			w.Recovered = o.End
			break
		}
	}
	return w
}

// Statuses counts the answers by kind and status ("usage-single 201": 812), for the test log.
func (l *Ledger) Statuses() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for _, o := range l.Outcomes {
		m[fmt.Sprintf("%s %d", o.Kind, o.Status)]++
	}
	return m
}
