package server

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

type subjectJSONT struct {
	SubjectID string           `json:"subjectId"`
	FirstSeen string           `json:"firstSeen"`
	LastSeen  string           `json:"lastSeen"`
	Events    int64            `json:"events"`
	Quantity  float64          `json:"quantity"`
	Revenue   map[string]int64 `json:"revenue"`
}

type subjectDirectoryJSON struct {
	Data struct {
		Total    int            `json:"total"`
		Limit    int            `json:"limit"`
		Offset   int            `json:"offset"`
		Subjects []subjectJSONT `json:"subjects"`
	} `json:"data"`
}

type pointJSON struct {
	Day            string           `json:"day"`
	ActiveSubjects int64            `json:"activeSubjects"`
	Events         int64            `json:"events"`
	Quantity       float64          `json:"quantity"`
	Revenue        map[string]int64 `json:"revenue"`
}

type meterJSON struct {
	Meter    string  `json:"meter"`
	Events   int64   `json:"events"`
	Quantity float64 `json:"quantity"`
}

type subjectActivityJSON struct {
	Data struct {
		subjectJSONT
		Billing      map[string]any `json:"billing"`
		Series       []pointJSON    `json:"series"`
		Meters       []meterJSON    `json:"meters"`
		RecentEvents []struct {
			ID            string         `json:"id"`
			EventID       string         `json:"eventId"`
			EnvironmentID string         `json:"environmentId"`
			Meter         string         `json:"meter"`
			Quantity      float64        `json:"quantity"`
			Timestamp     string         `json:"timestamp"`
			Properties    map[string]any `json:"properties"`
		} `json:"recentEvents"`
	} `json:"data"`
}

type summaryJSON struct {
	Data struct {
		ActiveSubjects struct {
			Today      int64 `json:"today"`
			Last7Days  int64 `json:"last7Days"`
			Last30Days int64 `json:"last30Days"`
		} `json:"activeSubjects"`
		Meters  []meterJSON      `json:"meters"`
		Revenue map[string]int64 `json:"revenue"`
		From    string           `json:"from"`
		To      string           `json:"to"`
	} `json:"data"`
}

// analyticsFixture is a fresh project of the tenancy's organization (no fixture events) with
// the hand-written events and revenue below, at usageNow = 2026-11-20T12:00Z:
//
//	e1 alice api_call   1   2026-11-20T08:00 A      e5 bob   api_call   3  2026-11-10T00:00 B
//	e2 alice api_call   2   2026-11-20T09:00 A      e6 carol api_call   4  2026-10-01T12:00 A
//	e3 alice storage_gb 1.5 2026-11-18T10:00 A      e7 malik storage_gb 10 2026-11-19T23:59:59 B
//	e4 bob   api_call   1   2026-11-18T11:00 A
//	revenue (env A): alice usd 4900 on 11-20; bob eur 1000 and usd 500 on 11-18
func analyticsFixture(t *testing.T, app *testApp, ten tenancy) (prj tenancy, key string) {
	t.Helper()
	ctx := context.Background()
	prj = ten
	prj.project = store.Project{OrganizationID: ten.org.ID, Name: "Analytics", Slug: "analytics"}
	if err := app.store.InTx(ctx, func(tx *store.Tx) error { return tx.CreateProject(ctx, &prj.project) }); err != nil {
		t.Fatal(err)
	}
	_, _, key = app.createKey(t, prj, `{"name":"analyst","scopes":["usage:write","usage:read","billing:read"]}`)
	envA, envB := prj.project.Environments[0].ID, prj.project.Environments[1].ID
	for _, e := range []struct{ id, subject, meter, quantity, ts, env string }{
		{"e1", "alice", "api_call", "", "2026-11-20T08:00:00Z", envA},
		{"e2", "alice", "api_call", "2", "2026-11-20T09:00:00Z", envA},
		{"e3", "alice", "storage_gb", "1.5", "2026-11-18T10:00:00Z", envA},
		{"e4", "bob", "api_call", "1", "2026-11-18T11:00:00Z", envA},
		{"e5", "bob", "api_call", "3", "2026-11-10T00:00:00Z", envB},
		{"e6", "carol", "api_call", "4", "2026-10-01T12:00:00Z", envA},
		{"e7", "malik", "storage_gb", "10", "2026-11-19T23:59:59Z", envB},
	} {
		q := ""
		if e.quantity != "" {
			q = `,"quantity":` + e.quantity
		}
		var ack usageAck
		postEvent(app, key, prj.project.ID, `{"eventId":"`+e.id+`","subjectId":"`+e.subject+`","environmentId":"`+e.env+`","meter":"`+e.meter+`","timestamp":"`+e.ts+`"`+q+`,"properties":{"n":"`+e.id+`"}}`).decode(t, http.StatusCreated, &ack)
	}
	err := app.store.InTx(ctx, func(tx *store.Tx) error {
		for _, r := range []store.RevenueEntry{
			{ProjectID: prj.project.ID, EnvironmentID: envA, SubjectID: "alice", At: usageNow.Add(-2 * 3600e9), Currency: "USD", Amount: 4900},
			{ProjectID: prj.project.ID, EnvironmentID: envA, SubjectID: "bob", At: usageNow.AddDate(0, 0, -2), Currency: "eur", Amount: 1000},
			{ProjectID: prj.project.ID, EnvironmentID: envA, SubjectID: "bob", At: usageNow.AddDate(0, 0, -2), Currency: "usd", Amount: 500},
		} {
			if err := tx.AddRevenue(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return prj, key
}

func TestAnalytics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		prj, key := analyticsFixture(t, app, ten)
		envA, envB := prj.project.Environments[0].ID, prj.project.Environments[1].ID
		base := "/api/v1/projects/" + prj.project.ID
		get := func(path string, v any) {
			t.Helper()
			// Decode into a zero value: json.Unmarshal merges into existing maps and slices.
			reflect.ValueOf(v).Elem().Set(reflect.Zero(reflect.TypeOf(v).Elem()))
			app.do(withKey(key, request{method: http.MethodGet, path: base + path})).decode(t, http.StatusOK, v)
		}

		t.Run("summary", func(t *testing.T) {
			var s summaryJSON
			get("/analytics/summary", &s)
			a := s.Data.ActiveSubjects
			if a.Today != 1 || a.Last7Days != 3 || a.Last30Days != 3 {
				t.Errorf("active = %+v, want 1, 3, 3", a)
			}
			wantMeters := []meterJSON{{"api_call", 4, 7}, {"storage_gb", 2, 11.5}}
			if !reflect.DeepEqual(s.Data.Meters, wantMeters) {
				t.Errorf("meters = %+v, want %+v", s.Data.Meters, wantMeters)
			}
			if !reflect.DeepEqual(s.Data.Revenue, map[string]int64{"usd": 5400, "eur": 1000}) || s.Data.From != "2026-10-22" || s.Data.To != "2026-11-20" {
				t.Errorf("revenue %v, window %s..%s", s.Data.Revenue, s.Data.From, s.Data.To)
			}
			get("/analytics/summary?environmentId="+envA, &s)
			a = s.Data.ActiveSubjects
			if a.Today != 1 || a.Last7Days != 2 || a.Last30Days != 2 {
				t.Errorf("env A active = %+v, want 1, 2, 2", a)
			}
			wantMeters = []meterJSON{{"api_call", 3, 4}, {"storage_gb", 1, 1.5}}
			if !reflect.DeepEqual(s.Data.Meters, wantMeters) {
				t.Errorf("env A meters = %+v, want %+v", s.Data.Meters, wantMeters)
			}
		})

		t.Run("activity", func(t *testing.T) {
			var out struct{ Data []pointJSON }
			get("/analytics/activity?days=7", &out)
			zero := map[string]int64{}
			want := []pointJSON{
				{"2026-11-14", 0, 0, 0, zero}, {"2026-11-15", 0, 0, 0, zero}, {"2026-11-16", 0, 0, 0, zero},
				{"2026-11-17", 0, 0, 0, zero},
				{"2026-11-18", 2, 2, 2.5, map[string]int64{"eur": 1000, "usd": 500}},
				{"2026-11-19", 1, 1, 10, zero},
				{"2026-11-20", 1, 2, 3, map[string]int64{"usd": 4900}},
			}
			if !reflect.DeepEqual(out.Data, want) {
				t.Errorf("activity =\n%+v\nwant\n%+v", out.Data, want)
			}
			get("/analytics/activity?days=7&environmentId="+envB, &out)
			want = []pointJSON{
				{"2026-11-14", 0, 0, 0, zero}, {"2026-11-15", 0, 0, 0, zero}, {"2026-11-16", 0, 0, 0, zero},
				{"2026-11-17", 0, 0, 0, zero}, {"2026-11-18", 0, 0, 0, zero},
				{"2026-11-19", 1, 1, 10, zero}, {"2026-11-20", 0, 0, 0, zero},
			}
			if !reflect.DeepEqual(out.Data, want) {
				t.Errorf("env B activity =\n%+v\nwant\n%+v", out.Data, want)
			}
			get("/analytics/activity", &out)
			if len(out.Data) != 30 || out.Data[0].Day != "2026-10-22" || out.Data[20].Day != "2026-11-11" || out.Data[19].Events != 1 {
				t.Errorf("default activity: %d points, first %+v, 11-10 %+v", len(out.Data), out.Data[0], out.Data[19])
			}
		})

		t.Run("directory", func(t *testing.T) {
			alice := subjectJSONT{"alice", "2026-11-18T10:00:00Z", "2026-11-20T09:00:00Z", 3, 4.5, map[string]int64{"usd": 4900}}
			bob := subjectJSONT{"bob", "2026-11-10T00:00:00Z", "2026-11-18T11:00:00Z", 2, 4, map[string]int64{"eur": 1000, "usd": 500}}
			carol := subjectJSONT{"carol", "2026-10-01T12:00:00Z", "2026-10-01T12:00:00Z", 1, 4, map[string]int64{}}
			malik := subjectJSONT{"malik", "2026-11-19T23:59:59Z", "2026-11-19T23:59:59Z", 1, 10, map[string]int64{}}
			bobB := subjectJSONT{"bob", "2026-11-10T00:00:00Z", "2026-11-10T00:00:00Z", 1, 3, map[string]int64{}}
			for _, tc := range []struct {
				query        string
				total, limit int
				offset       int
				want         []subjectJSONT
			}{
				{"", 3, 50, 0, []subjectJSONT{alice, malik, bob}},
				{"?days=90", 4, 50, 0, []subjectJSONT{alice, malik, bob, carol}},
				{"?days=90&sort=-events", 4, 50, 0, []subjectJSONT{alice, bob, carol, malik}},
				{"?days=90&sort=events", 4, 50, 0, []subjectJSONT{carol, malik, bob, alice}},
				{"?days=90&sort=-revenue", 4, 50, 0, []subjectJSONT{alice, bob, carol, malik}},
				{"?days=90&sort=quantity", 4, 50, 0, []subjectJSONT{bob, carol, alice, malik}},
				{"?days=90&sort=subjectId", 4, 50, 0, []subjectJSONT{alice, bob, carol, malik}},
				{"?days=90&sort=-subjectId", 4, 50, 0, []subjectJSONT{malik, carol, bob, alice}},
				{"?days=90&sort=lastSeen", 4, 50, 0, []subjectJSONT{carol, bob, malik, alice}},
				{"?days=90&q=ali", 2, 50, 0, []subjectJSONT{alice, malik}},
				{"?days=90&q=ALI", 0, 50, 0, []subjectJSONT{}},
				{"?days=90&sort=subjectId&limit=2&offset=1", 4, 2, 1, []subjectJSONT{bob, carol}},
				{"?days=90&sort=subjectId&limit=2&offset=10", 4, 2, 10, []subjectJSONT{}},
				{"?environmentId=" + envB, 2, 50, 0, []subjectJSONT{malik, bobB}},
				{"?days=7", 3, 50, 0, []subjectJSONT{alice, malik, bob}},
			} {
				t.Run(tc.query, func(t *testing.T) {
					var d subjectDirectoryJSON
					get("/analytics/subjects"+tc.query, &d)
					if d.Data.Total != tc.total || d.Data.Limit != tc.limit || d.Data.Offset != tc.offset || !reflect.DeepEqual(d.Data.Subjects, tc.want) {
						t.Errorf("got total %d limit %d offset %d\n%+v\nwant total %d\n%+v", d.Data.Total, d.Data.Limit, d.Data.Offset, d.Data.Subjects, tc.total, tc.want)
					}
				})
			}
		})

		t.Run("subject activity", func(t *testing.T) {
			var a subjectActivityJSON
			get("/subjects/alice/activity?days=7", &a)
			d := a.Data
			if d.SubjectID != "alice" || d.Events != 3 || d.Quantity != 4.5 || d.FirstSeen != "2026-11-18T10:00:00Z" || d.LastSeen != "2026-11-20T09:00:00Z" ||
				!reflect.DeepEqual(d.Revenue, map[string]int64{"usd": 4900}) || !reflect.DeepEqual(d.Billing, map[string]any{"status": "none", "plan": nil, "currentPeriodEnd": nil, "environmentId": nil}) {
				t.Errorf("totals: %+v", d)
			}
			zero := map[string]int64{}
			wantSeries := []pointJSON{
				{"2026-11-14", 0, 0, 0, zero}, {"2026-11-15", 0, 0, 0, zero}, {"2026-11-16", 0, 0, 0, zero},
				{"2026-11-17", 0, 0, 0, zero}, {"2026-11-18", 0, 1, 1.5, zero}, {"2026-11-19", 0, 0, 0, zero},
				{"2026-11-20", 0, 2, 3, map[string]int64{"usd": 4900}},
			}
			if !reflect.DeepEqual(d.Series, wantSeries) {
				t.Errorf("series =\n%+v\nwant\n%+v", d.Series, wantSeries)
			}
			if want := []meterJSON{{"api_call", 2, 3}, {"storage_gb", 1, 1.5}}; !reflect.DeepEqual(d.Meters, want) {
				t.Errorf("meters = %+v, want %+v", d.Meters, want)
			}
			var recent []string
			for _, e := range d.RecentEvents {
				recent = append(recent, e.EventID+"@"+e.Timestamp+"/"+e.Properties["n"].(string))
			}
			if want := "e2@2026-11-20T09:00:00Z/e2 e1@2026-11-20T08:00:00Z/e1 e3@2026-11-18T10:00:00Z/e3"; strings.Join(recent, " ") != want {
				t.Errorf("recent = %s, want %s", strings.Join(recent, " "), want)
			}
			get("/subjects/bob/activity?environmentId="+envB, &a)
			if a.Data.Events != 1 || len(a.Data.Series) != 30 || len(a.Data.RecentEvents) != 1 || a.Data.RecentEvents[0].EventID != "e5" || len(a.Data.Revenue) != 0 {
				t.Errorf("bob in B: %+v", a.Data)
			}
			app.do(withKey(key, request{method: http.MethodGet, path: base + "/subjects/carol/activity?environmentId=" + envB})).
				wantProblem(t, http.StatusNotFound, "http-404", "Not found")
			app.do(withKey(key, request{method: http.MethodGet, path: base + "/subjects/nobody/activity"})).
				wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		})

		t.Run("recent events are the latest 50", func(t *testing.T) {
			var events []string
			for i := range 60 {
				ts := usageNow.Add(-time.Duration(60-i) * time.Minute).Format(time.RFC3339)
				events = append(events, `{"eventId":"many-`+strconv.Itoa(i)+`","subjectId":"many","meter":"api_call","timestamp":"`+ts+`"}`)
			}
			var ack batchAck
			app.do(withKey(key, request{method: http.MethodPost, path: base + "/usage-events/batch",
				body: `{"environmentId":"` + envA + `","events":[` + strings.Join(events, ",") + `]}`})).decode(t, http.StatusOK, &ack)
			var a subjectActivityJSON
			get("/subjects/many/activity", &a)
			if len(a.Data.RecentEvents) != 50 || a.Data.RecentEvents[0].EventID != "many-59" || a.Data.RecentEvents[49].EventID != "many-10" || a.Data.Events != 60 {
				t.Fatalf("%d recent, first %s, last %s, events %d", len(a.Data.RecentEvents), a.Data.RecentEvents[0].EventID, a.Data.RecentEvents[len(a.Data.RecentEvents)-1].EventID, a.Data.Events)
			}
		})
	})
}

// TestAnalyticsValidationAndPermissions: out-of-range parameters are 400 with their path; a
// key without billing:read is 403 on every analytics route; a pinned key naming another
// environment is 403 with the environment title.
func TestAnalyticsValidationAndPermissions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		envA, envB := ten.project.Environments[0].ID, ten.project.Environments[1].ID
		_, _, key := app.createKey(t, ten, `{"name":"analyst","scopes":["usage:read","billing:read"]}`)
		base := "/api/v1/projects/" + ten.project.ID
		other := app.newTenancy(t)
		for _, tc := range []struct{ path, param string }{
			{"/analytics/activity?days=6", "days"},
			{"/analytics/activity?days=91", "days"},
			{"/analytics/activity?days=x", "days"},
			{"/analytics/subjects?days=6", "days"},
			{"/analytics/subjects?days=366", "days"},
			{"/analytics/subjects?limit=0", "limit"},
			{"/analytics/subjects?limit=201", "limit"},
			{"/analytics/subjects?offset=-1", "offset"},
			{"/analytics/subjects?sort=name", "sort"},
			{"/analytics/subjects?sort=-", "sort"},
			{"/subjects/alice/activity?days=91", "days"},
			{"/subjects/alice/activity?days=6", "days"},
			{"/analytics/summary?environmentId=" + other.project.Environments[0].ID, "environmentId"},
			{"/analytics/activity?environmentId=env_nope", "environmentId"},
			{"/analytics/subjects?environmentId=" + other.project.Environments[0].ID, "environmentId"},
			{"/subjects/alice/activity?environmentId=env_nope", "environmentId"},
		} {
			t.Run(tc.path, func(t *testing.T) {
				p := app.do(withKey(key, request{method: http.MethodGet, path: base + tc.path})).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				if len(p.Errors) == 0 || strings.Join(p.Errors[0].Path, ".") != "query."+tc.param {
					t.Fatalf("errors = %+v, want path query.%s", p.Errors, tc.param)
				}
			})
		}
		// Boundaries are accepted.
		for _, path := range []string{"/analytics/activity?days=7", "/analytics/activity?days=90", "/analytics/subjects?days=7&limit=1",
			"/analytics/subjects?days=365&limit=200&offset=0", "/subjects/" + ten.subjectID + "/activity?days=90"} {
			if res := app.do(withKey(key, request{method: http.MethodGet, path: base + path})); res.Code != http.StatusOK {
				t.Errorf("%s: %d %s", path, res.Code, res.Body)
			}
		}
		routes := []string{"/analytics/summary", "/analytics/activity", "/analytics/subjects", "/subjects/" + ten.subjectID + "/activity"}
		_, _, usageOnly := app.createKey(t, ten, `{"name":"usage-only","scopes":["usage:read"]}`)
		_, _, billingOnly := app.createKey(t, ten, `{"name":"billing-only","scopes":["billing:read"]}`)
		_, _, pinned := app.createKey(t, ten, `{"name":"pinned","scopes":["usage:read","billing:read"],"environmentId":"`+envA+`"}`)
		for _, r := range routes {
			app.do(withKey(usageOnly, request{method: http.MethodGet, path: base + r})).wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
			app.do(withKey(billingOnly, request{method: http.MethodGet, path: base + r})).wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
			app.do(withKey(pinned, request{method: http.MethodGet, path: base + r + "?environmentId=" + envB})).
				wantProblem(t, http.StatusForbidden, "http-403", "Service account is scoped to another environment")
			if res := app.do(withKey(pinned, request{method: http.MethodGet, path: base + r + "?environmentId=" + envA})); res.Code != http.StatusOK {
				t.Errorf("pinned key, own environment, %s: %d %s", r, res.Code, res.Body)
			}
			if res := app.do(ten.members[RoleViewer].as(request{method: http.MethodGet, path: base + r})); res.Code != http.StatusOK {
				t.Errorf("viewer %s: %d %s", r, res.Code, res.Body)
			}
		}
	})
}

var _ = json.Marshal
