package server

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/oapi-codegen/nullable"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Usage analytics: thin handlers over the store's rollup reads (store/analytics.go). The
// validator has checked every parameter's range; a named environment must be one of the
// project's (400), and a pinned service account's pin was checked by authorize (403).

// Analytics defaults, as the spec states them.
const (
	defaultActivityDays = 30
	defaultSubjectsDays = 30
	defaultSubjectsSort = "-lastSeen"
	defaultSubjectLimit = 50
)

// analyticsScope resolves the optional environmentId query parameter.
func (s *Server) analyticsScope(ctx context.Context, projectID string, env *string) (store.AnalyticsScope, error) {
	scope := store.AnalyticsScope{ProjectID: projectID}
	if env != nil {
		if err := s.checkUsageEnvironment(ctx, projectID, *env, []string{"query", "environmentId"}); err != nil {
			return scope, err
		}
		scope.EnvironmentID = *env
	}
	return scope, nil
}

func orDefault(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

// date is a rollup day (YYYY-MM-DD, as the store keeps it) on the wire.
func date(day string) openapi_types.Date {
	t, _ := time.Parse(time.DateOnly, day)
	return openapi_types.Date{Time: t}
}

func revenueJSON(r store.Revenue) gen.Revenue {
	out := gen.Revenue{}
	for c, a := range r {
		out[c] = a
	}
	return out
}

func metersJSON(ms []store.MeterUsage) []gen.MeterUsage {
	out := make([]gen.MeterUsage, len(ms))
	for i, m := range ms {
		out[i] = gen.MeterUsage{Meter: m.Meter, Events: m.Events, Quantity: m.Quantity}
	}
	return out
}

// GetAnalyticsSummary returns active subjects, usage by meter and revenue.
func (s *Server) GetAnalyticsSummary(ctx context.Context, req gen.GetAnalyticsSummaryRequestObject) (gen.GetAnalyticsSummaryResponseObject, error) {
	scope, err := s.analyticsScope(ctx, req.ProjectId, req.Params.EnvironmentId)
	if err != nil {
		return nil, err
	}
	now := s.store.Now()
	sum, err := s.store.UsageSummary(ctx, scope, now)
	if err != nil {
		return nil, err
	}
	var data gen.AnalyticsSummary
	data.ActiveSubjects.Today, data.ActiveSubjects.Last7Days, data.ActiveSubjects.Last30Days = sum.ActiveToday, sum.Active7Days, sum.Active30Days
	data.Meters = metersJSON(sum.Meters)
	data.Revenue = revenueJSON(sum.Revenue)
	data.From, data.To = date(store.UsageDay(now.AddDate(0, 0, -29))), date(store.UsageDay(now))
	return gen.GetAnalyticsSummary200JSONResponse{Data: data}, nil
}

// GetAnalyticsActivity returns the zero-filled daily series.
func (s *Server) GetAnalyticsActivity(ctx context.Context, req gen.GetAnalyticsActivityRequestObject) (gen.GetAnalyticsActivityResponseObject, error) {
	scope, err := s.analyticsScope(ctx, req.ProjectId, req.Params.EnvironmentId)
	if err != nil {
		return nil, err
	}
	points, err := s.store.UsageActivity(ctx, scope, s.store.Now(), orDefault(req.Params.Days, defaultActivityDays))
	if err != nil {
		return nil, err
	}
	out := make([]gen.ActivityPoint, len(points))
	for i, p := range points {
		out[i] = gen.ActivityPoint{Day: date(p.Day), ActiveSubjects: p.ActiveSubjects, Events: p.Events,
			Quantity: p.Quantity, Revenue: revenueJSON(p.Revenue)}
	}
	return gen.GetAnalyticsActivity200JSONResponse{Data: out}, nil
}

func subjectJSON(u store.SubjectUsage) gen.SubjectSummary {
	return gen.SubjectSummary{SubjectId: u.SubjectID, FirstSeen: u.FirstSeen, LastSeen: u.LastSeen,
		Events: u.Events, Quantity: u.Quantity, Revenue: revenueJSON(u.Revenue)}
}

// ListAnalyticsSubjects returns a page of the subject directory.
func (s *Server) ListAnalyticsSubjects(ctx context.Context, req gen.ListAnalyticsSubjectsRequestObject) (gen.ListAnalyticsSubjectsResponseObject, error) {
	p := req.Params
	scope, err := s.analyticsScope(ctx, req.ProjectId, p.EnvironmentId)
	if err != nil {
		return nil, err
	}
	sort := defaultSubjectsSort
	if p.Sort != nil {
		sort = string(*p.Sort)
	}
	q := store.SubjectQuery{AnalyticsScope: scope, Limit: orDefault(p.Limit, defaultSubjectLimit), Offset: orDefault(p.Offset, 0)}
	q.Sort, q.Desc = strings.TrimPrefix(sort, "-"), strings.HasPrefix(sort, "-")
	since := s.store.Now().AddDate(0, 0, 1-orDefault(p.Days, defaultSubjectsDays))
	q.Since = time.Date(since.Year(), since.Month(), since.Day(), 0, 0, 0, 0, time.UTC)
	if p.Q != nil {
		q.Contains = *p.Q
	}
	total, subjects, err := s.store.UsageSubjects(ctx, q)
	if err != nil {
		return nil, err
	}
	data := gen.SubjectDirectory{Total: total, Limit: q.Limit, Offset: q.Offset, Subjects: make([]gen.SubjectSummary, len(subjects))}
	for i, u := range subjects {
		data.Subjects[i] = subjectJSON(u)
	}
	return gen.ListAnalyticsSubjects200JSONResponse{Data: data}, nil
}

// subjectBillingNone is the billing status of a subject that never subscribed.
const subjectBillingNone = "none"

// GetSubjectActivity returns one subject's totals, series, meters and recent events.
func (s *Server) GetSubjectActivity(ctx context.Context, req gen.GetSubjectActivityRequestObject) (gen.GetSubjectActivityResponseObject, error) {
	scope, err := s.analyticsScope(ctx, req.ProjectId, req.Params.EnvironmentId)
	if err != nil {
		return nil, err
	}
	a, err := s.store.SubjectActivity(ctx, scope, req.SubjectId, s.store.Now(), orDefault(req.Params.Days, defaultActivityDays))
	if err != nil {
		return nil, err
	}
	sum := subjectJSON(a.SubjectUsage)
	data := gen.SubjectActivity{SubjectId: sum.SubjectId, FirstSeen: sum.FirstSeen, LastSeen: sum.LastSeen,
		Events: sum.Events, Quantity: sum.Quantity, Revenue: sum.Revenue, Meters: metersJSON(a.Meters),
		Series: make([]gen.SubjectActivityPoint, len(a.Series)), RecentEvents: make([]gen.UsageEventRecord, len(a.Recent))}
	state, subscribed, err := s.store.SubjectBillingState(ctx, scope.ProjectID, req.SubjectId, scope.EnvironmentID)
	if err != nil {
		return nil, err
	}
	data.Billing.Status = subjectBillingNone
	data.Billing.Plan, data.Billing.CurrentPeriodEnd, data.Billing.EnvironmentId =
		nullable.NewNullNullable[string](), nullable.NewNullNullable[time.Time](), nullable.NewNullNullable[string]()
	if subscribed {
		data.Billing.Status = state.Status
		data.Billing.Plan = nullable.NewNullableWithValue(state.PlanKey)
		data.Billing.EnvironmentId = nullable.NewNullableWithValue(state.EnvironmentID)
		if state.CurrentPeriodEnd != nil {
			data.Billing.CurrentPeriodEnd = nullable.NewNullableWithValue(state.CurrentPeriodEnd.UTC())
		}
	}
	for i, p := range a.Series {
		data.Series[i] = gen.SubjectActivityPoint{Day: date(p.Day), Events: p.Events, Quantity: p.Quantity, Revenue: revenueJSON(p.Revenue)}
	}
	for i, e := range a.Recent {
		r := gen.UsageEventRecord{Id: e.ID, EventId: e.EventID, EnvironmentId: e.EnvironmentID, Meter: e.Meter,
			Quantity: e.Quantity, Timestamp: e.Timestamp, ReceivedAt: e.ReceivedAt}
		if e.Properties != "" {
			var props map[string]any
			if err := json.Unmarshal([]byte(e.Properties), &props); err != nil {
				return nil, err
			}
			r.Properties = nullable.NewNullableWithValue(props)
		} else {
			r.Properties = nullable.NewNullNullable[map[string]any]()
		}
		data.RecentEvents[i] = r
	}
	return gen.GetSubjectActivity200JSONResponse{Data: data}, nil
}
