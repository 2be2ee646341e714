package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// usageApp is a test app whose store clock is pinned at usageNow, so that days are known.
var usageNow = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func newUsageApp(t *testing.T, b storetest.Backend) (*testApp, tenancy) {
	t.Helper()
	st := openURL(t, b.URL(t), store.WithClock(storetest.NewClock(usageNow).Now))
	app := newTestApp(t, st, testConfig())
	return app, app.newTenancy(t)
}

type usageAck struct {
	Data struct {
		Accepted  bool   `json:"accepted"`
		Duplicate bool   `json:"duplicate"`
		ID        string `json:"id"`
	} `json:"data"`
}

func postEvent(app *testApp, key, projectID, body string) response {
	return app.do(withKey(key, request{method: http.MethodPost, path: "/api/v1/projects/" + projectID + "/usage-events", body: body}))
}

func TestUsageIngest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		envA, envB := ten.project.Environments[0].ID, ten.project.Environments[1].ID
		_, _, key := app.createKey(t, ten, `{"name":"sender","scopes":["usage:write","usage:read","billing:read"]}`)
		prj := ten.project.ID

		var first, again usageAck
		body := `{"eventId":"e-1","subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"}`
		postEvent(app, key, prj, body).decode(t, http.StatusCreated, &first)
		if !first.Data.Accepted || first.Data.Duplicate || !strings.HasPrefix(first.Data.ID, "uev_") {
			t.Fatalf("first: %+v", first.Data)
		}
		// A replay with other fields is still a duplicate of the original.
		postEvent(app, key, prj, `{"eventId":"e-1","subjectId":"bob","environmentId":"`+envB+`","meter":"other","quantity":9}`).decode(t, http.StatusOK, &again)
		if again.Data.Accepted || !again.Data.Duplicate || again.Data.ID != first.Data.ID {
			t.Fatalf("replay: %+v, want duplicate of %s", again.Data, first.Data.ID)
		}
		// The same eventId in another project is another event.
		other := app.newTenancy(t)
		_, _, otherKey := app.createKey(t, other, `{"name":"sender","scopes":["usage:write"]}`)
		postEvent(app, otherKey, other.project.ID, `{"eventId":"e-1","subjectId":"alice","environmentId":"`+other.project.Environments[0].ID+`","meter":"api_call"}`).decode(t, http.StatusCreated, &again)

		future := usageNow.Add(5*time.Minute + time.Second).Format(time.RFC3339)
		edge := usageNow.Add(5 * time.Minute).Format(time.RFC3339)
		ev := func(fields string) string {
			return `{"eventId":"e-x","subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"` + fields + `}`
		}
		for _, tc := range []struct {
			name, body string
			path       []string
		}{
			{"no eventId", `{"subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"}`, []string{"body", "eventId"}},
			{"empty eventId", `{"eventId":"","subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"}`, []string{"body", "eventId"}},
			{"eventId 256", `{"eventId":"` + strings.Repeat("e", 256) + `","subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"}`, []string{"body", "eventId"}},
			{"no subjectId", `{"eventId":"e","environmentId":"` + envA + `","meter":"api_call"}`, []string{"body", "subjectId"}},
			{"no environmentId", `{"eventId":"e","subjectId":"alice","meter":"api_call"}`, []string{"body", "environmentId"}},
			{"bad meter", ev(`,"meter":"api call"`), []string{"body", "meter"}},
			{"negative quantity", ev(`,"quantity":-1`), []string{"body", "quantity"}},
			{"string quantity", ev(`,"quantity":"1"`), []string{"body", "quantity"}},
			{"bad timestamp", ev(`,"timestamp":"yesterday"`), []string{"body", "timestamp"}},
			{"timestamp too far ahead", ev(`,"timestamp":"` + future + `"`), []string{"body", "timestamp"}},
			{"properties not an object", ev(`,"properties":[1]`), []string{"body", "properties"}},
			{"properties too big", ev(`,"properties":{"k":"` + strings.Repeat("x", 4097) + `"}`), []string{"body", "properties"}},
			{"environment of another project", `{"eventId":"e","subjectId":"alice","environmentId":"` + other.project.Environments[0].ID + `","meter":"api_call"}`, []string{"body", "environmentId"}},
			{"unknown environment", `{"eventId":"e","subjectId":"alice","environmentId":"env_nope","meter":"api_call"}`, []string{"body", "environmentId"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := postEvent(app, key, prj, tc.body).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				if len(p.Errors) == 0 || strings.Join(p.Errors[0].Path, ".") != strings.Join(tc.path, ".") {
					t.Fatalf("errors = %+v, want path %v", p.Errors, tc.path)
				}
			})
		}
		// Exactly 5 minutes ahead is allowed; backfill too.
		postEvent(app, key, prj, `{"eventId":"edge","subjectId":"alice","environmentId":"`+envA+`","meter":"api_call","timestamp":"`+edge+`"}`).decode(t, http.StatusCreated, &again)
		postEvent(app, key, prj, `{"eventId":"old","subjectId":"alice","environmentId":"`+envA+`","meter":"api_call","timestamp":"2020-01-01T00:00:00Z"}`).decode(t, http.StatusCreated, &again)

		// Permissions: a key without usage:write; a key pinned to environment A sending B.
		_, _, reader := app.createKey(t, ten, `{"name":"reader","scopes":["usage:read"]}`)
		postEvent(app, reader, prj, body).wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
		_, _, pinned := app.createKey(t, ten, `{"name":"pinned","scopes":["usage:write"],"environmentId":"`+envA+`"}`)
		postEvent(app, pinned, prj, `{"eventId":"p-1","subjectId":"alice","environmentId":"`+envB+`","meter":"api_call"}`).
			wantProblem(t, http.StatusForbidden, "http-403", "Service account is scoped to another environment")
		postEvent(app, pinned, prj, `{"eventId":"p-1","subjectId":"alice","environmentId":"`+envA+`","meter":"api_call"}`).decode(t, http.StatusCreated, &again)
		batch := `{"environmentId":"` + envB + `","events":[{"eventId":"p-2","subjectId":"alice","meter":"api_call"}]}`
		app.do(withKey(pinned, request{method: http.MethodPost, path: "/api/v1/projects/" + prj + "/usage-events/batch", body: batch})).
			wantProblem(t, http.StatusForbidden, "http-403", "Service account is scoped to another environment")
		// A user with usage:write (developer) may send; a viewer may not.
		app.do(ten.members[RoleDeveloper].as(request{method: http.MethodPost, path: "/api/v1/projects/" + prj + "/usage-events",
			body: `{"eventId":"dev-1","subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"}`})).decode(t, http.StatusCreated, &again)
		app.do(ten.members[RoleViewer].as(request{method: http.MethodPost, path: "/api/v1/projects/" + prj + "/usage-events",
			body: `{"eventId":"dev-2","subjectId":"alice","environmentId":"` + envA + `","meter":"api_call"}`})).wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
	})
}

type batchAck struct {
	Data struct {
		Accepted   int `json:"accepted"`
		Duplicates int `json:"duplicates"`
		Results    []struct {
			EventID   string `json:"eventId"`
			Accepted  bool   `json:"accepted"`
			Duplicate bool   `json:"duplicate"`
			ID        string `json:"id"`
		} `json:"results"`
	} `json:"data"`
}

func TestUsageBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		envA := ten.project.Environments[0].ID
		_, _, key := app.createKey(t, ten, `{"name":"sender","scopes":["usage:write","usage:read","billing:read"]}`)
		prj := ten.project.ID
		post := func(body string) response {
			return app.do(withKey(key, request{method: http.MethodPost, path: "/api/v1/projects/" + prj + "/usage-events/batch", body: body}))
		}
		var single usageAck
		postEvent(app, key, prj, `{"eventId":"b-0","subjectId":"alice","environmentId":"`+envA+`","meter":"api_call"}`).decode(t, http.StatusCreated, &single)

		var out batchAck
		post(`{"environmentId":"`+envA+`","events":[
			{"eventId":"b-1","subjectId":"alice","meter":"api_call"},
			{"eventId":"b-0","subjectId":"alice","meter":"api_call"},
			{"eventId":"b-2","subjectId":"bob","meter":"storage_gb","quantity":2.5},
			{"eventId":"b-1","subjectId":"alice","meter":"api_call"}]}`).decode(t, http.StatusOK, &out)
		r := out.Data.Results
		if out.Data.Accepted != 2 || out.Data.Duplicates != 2 || len(r) != 4 {
			t.Fatalf("batch: %+v", out.Data)
		}
		want := []struct {
			eventID   string
			duplicate bool
		}{{"b-1", false}, {"b-0", true}, {"b-2", false}, {"b-1", true}}
		for i, w := range want {
			if r[i].EventID != w.eventID || r[i].Duplicate != w.duplicate || r[i].Accepted == w.duplicate {
				t.Errorf("result %d = %+v, want %s duplicate=%v", i, r[i], w.eventID, w.duplicate)
			}
		}
		if r[1].ID != single.Data.ID || r[3].ID != r[0].ID || r[0].ID == r[2].ID {
			t.Errorf("ids: %+v (b-0 was %s)", r, single.Data.ID)
		}
		// alice: b-0 and b-1 only once each.
		var act subjectActivityJSON
		app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/projects/" + prj + "/subjects/alice/activity"})).decode(t, http.StatusOK, &act)
		if act.Data.Events != 2 || len(act.Data.RecentEvents) != 2 {
			t.Fatalf("alice after the batch: %d events, %d recent; want 2", act.Data.Events, len(act.Data.RecentEvents))
		}

		// One invalid event fails the whole batch, with its index in the path, and records nothing.
		future := usageNow.Add(time.Hour).Format(time.RFC3339)
		p := post(`{"environmentId":"`+envA+`","events":[
			{"eventId":"c-1","subjectId":"carol","meter":"api_call"},
			{"eventId":"c-2","subjectId":"carol","meter":"api_call","timestamp":"`+future+`"}]}`).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		if len(p.Errors) != 1 || strings.Join(p.Errors[0].Path, ".") != "body.events.1.timestamp" {
			t.Fatalf("errors = %+v", p.Errors)
		}
		app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/projects/" + prj + "/subjects/carol/activity"})).
			wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		p = post(`{"environmentId":"`+envA+`","events":[{"eventId":"c-1","subjectId":"carol","meter":"api call"}]}`).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		if strings.Join(p.Errors[0].Path, ".") != "body.events.0.meter" {
			t.Fatalf("errors = %+v", p.Errors)
		}
		// Several issues come back ordered by path, indices as numbers, the same on every call.
		var several []string
		for i := range 11 {
			switch i {
			case 0:
				several = append(several, `{"eventId":"d-0","meter":"api_call"}`)
			case 2:
				several = append(several, `{"eventId":"","subjectId":"s","meter":"api_call","quantity":-1}`)
			case 10:
				several = append(several, `{"eventId":"d-10","subjectId":"s","meter":"bad meter"}`)
			default:
				several = append(several, fmt.Sprintf(`{"eventId":"d-%d","subjectId":"s","meter":"api_call"}`, i))
			}
		}
		wantPaths := []string{"body.events.0.subjectId", "body.events.2.eventId", "body.events.2.quantity", "body.events.10.meter"}
		for range 10 {
			p := post(`{"environmentId":"`+envA+`","events":[`+strings.Join(several, ",")+`]}`).
				wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
			var paths []string
			for _, e := range p.Errors {
				paths = append(paths, strings.Join(e.Path, "."))
			}
			if !slices.Equal(paths, wantPaths) {
				t.Fatalf("error paths = %q, want %q", paths, wantPaths)
			}
		}
		for name, tc := range map[string]struct{ body, path string }{
			"empty":        {`{"environmentId":"` + envA + `","events":[]}`, "body.events"},
			"1001 events":  {`{"environmentId":"` + envA + `","events":[` + strings.TrimSuffix(strings.Repeat(`{"eventId":"x","subjectId":"s","meter":"m"},`, 1001), ",") + `]}`, "body.events"},
			"no env":       {`{"events":[{"eventId":"x","subjectId":"s","meter":"m"}]}`, "body.environmentId"},
			"unknown env":  {`{"environmentId":"env_nope","events":[{"eventId":"x","subjectId":"s","meter":"m"}]}`, "body.environmentId"},
			"not an array": {`{"environmentId":"` + envA + `","events":{}}`, "body.events"},
		} {
			t.Run(name, func(t *testing.T) {
				p := post(tc.body).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				if len(p.Errors) == 0 || strings.Join(p.Errors[0].Path, ".") != tc.path {
					t.Fatalf("errors = %+v, want path %s", p.Errors, tc.path)
				}
			})
		}
		// 1,000 events are accepted.
		var events []string
		for i := range 1000 {
			events = append(events, fmt.Sprintf(`{"eventId":"k-%d","subjectId":"s-%d","meter":"api_call"}`, i, i%37))
		}
		post(`{"environmentId":"`+envA+`","events":[`+strings.Join(events, ",")+`]}`).decode(t, http.StatusOK, &out)
		if out.Data.Accepted != 1000 {
			t.Fatalf("1,000 events: %d accepted", out.Data.Accepted)
		}
	})
}

// TestUsageReplayRace: 50 concurrent sends of one event leave one row: one 201, 49 replays with
// its id.
func TestUsageReplayRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		envA := ten.project.Environments[0].ID
		_, _, key := app.createKey(t, ten, `{"name":"sender","scopes":["usage:write","usage:read","billing:read"]}`)
		for _, path := range []string{"usage-events", "usage-events/batch"} {
			t.Run(path, func(t *testing.T) {
				body := `{"eventId":"race-` + path + `","subjectId":"racer-` + path + `","environmentId":"` + envA + `","meter":"api_call"}`
				if path != "usage-events" {
					body = `{"environmentId":"` + envA + `","events":[{"eventId":"race-batch","subjectId":"racer-batch","meter":"api_call"}]}`
				}
				var wg sync.WaitGroup
				codes := make([]int, 50)
				ids := make([]string, 50)
				start := make(chan struct{})
				for i := range 50 {
					wg.Go(func() {
						<-start
						res := app.do(withKey(key, request{method: http.MethodPost, path: "/api/v1/projects/" + ten.project.ID + "/" + path, body: body}))
						codes[i] = res.Code
						if path == "usage-events" {
							var a usageAck
							_ = json.Unmarshal(res.Body.Bytes(), &a)
							ids[i] = a.Data.ID
							if res.Code == http.StatusOK && !a.Data.Duplicate {
								codes[i] = -1
							}
						} else {
							var a batchAck
							_ = json.Unmarshal(res.Body.Bytes(), &a)
							if len(a.Data.Results) == 1 {
								ids[i] = a.Data.Results[0].ID
								if !a.Data.Results[0].Duplicate {
									codes[i] = http.StatusCreated // the one that recorded it
								}
							}
						}
					})
				}
				close(start)
				wg.Wait()
				created := 0
				for i, c := range codes {
					switch {
					case c == http.StatusCreated:
						created++
					case c != http.StatusOK:
						t.Fatalf("request %d: status %d", i, c)
					}
					if ids[i] == "" || ids[i] != ids[0] {
						t.Fatalf("request %d: id %q, want %q", i, ids[i], ids[0])
					}
				}
				if created != 1 {
					t.Fatalf("%d requests recorded the event, want 1", created)
				}
				subject := "racer-" + path
				if path != "usage-events" {
					subject = "racer-batch"
				}
				var act subjectActivityJSON
				app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID + "/subjects/" + subject + "/activity"})).decode(t, http.StatusOK, &act)
				if act.Data.Events != 1 || len(act.Data.RecentEvents) != 1 {
					t.Fatalf("%d events, %d rows; want 1", act.Data.Events, len(act.Data.RecentEvents))
				}
			})
		}
	})
}

// TestSubjectDeletionKeepsUsage: deleting a subject's identity keeps its usage events and rollups.
func TestSubjectDeletionKeepsUsage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		envA := ten.project.Environments[0].ID
		_, _, key := app.createKey(t, ten, `{"name":"sender","scopes":["usage:write","usage:read","billing:read"]}`)
		var ack usageAck
		postEvent(app, key, ten.project.ID, `{"eventId":"del-1","subjectId":"`+ten.subjectID+`","environmentId":"`+envA+`","meter":"api_call","quantity":3}`).decode(t, http.StatusCreated, &ack)
		res := app.do(ten.members[RoleOwner].as(request{method: http.MethodDelete, path: "/api/v1/projects/" + ten.project.ID + "/subjects/" + ten.subjectID}))
		if res.Code != http.StatusOK {
			t.Fatalf("delete subject: %d %s", res.Code, res.Body)
		}
		var act subjectActivityJSON
		app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID + "/subjects/" + ten.subjectID + "/activity?days=7"})).decode(t, http.StatusOK, &act)
		// The tenancy fixture's own event of the subject (quantity 0) plus this one.
		if act.Data.Events != 2 || act.Data.Quantity != 3 || len(act.Data.RecentEvents) != 2 || act.Data.Series[6].Events != 2 {
			t.Fatalf("after deletion: %+v", act.Data)
		}
		var dir subjectDirectoryJSON
		app.do(withKey(key, request{method: http.MethodGet, path: "/api/v1/projects/" + ten.project.ID + "/analytics/subjects?q=" + ten.subjectID})).decode(t, http.StatusOK, &dir)
		if dir.Data.Total != 1 || dir.Data.Subjects[0].Events != 2 {
			t.Fatalf("directory after deletion: %+v", dir.Data)
		}
		postEvent(app, key, ten.project.ID, `{"eventId":"del-1","subjectId":"`+ten.subjectID+`","environmentId":"`+envA+`","meter":"api_call"}`).decode(t, http.StatusOK, &ack)
	})
}
