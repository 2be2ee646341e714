package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Usage analytics: reads of the rollups that IngestUsage maintains (store/usage.go) and of
// revenue_daily (AddRevenue). None scans raw events except SubjectActivity's most recent ones,
// read through the (project_id, subject_id, occurred_at) index. They run on the read replica
// that ctx carries, if any (ReplicaReads, replicas.go).

// AnalyticsScope is what an analytics read covers: a project, and one of its environments or
// all of them (EnvironmentID "").
type AnalyticsScope struct {
	ProjectID     string
	EnvironmentID string
}

// subjectTable is the table holding one row per subject of the scope, with the condition and
// arguments that select the scope's environment in it: usage_subject_totals (the subject over
// every environment) when the scope names none, usage_subjects (per environment) otherwise.
// Both have the columns subject_id, first_seen, last_seen, events, quantity and revenue.
func subjectTable(a AnalyticsScope) (table, cond string, args []any) {
	cond, args = a.envFilter("environment_id")
	if a.EnvironmentID == "" {
		return "usage_subject_totals", cond, args
	}
	return "usage_subjects", cond, args
}

// envFilter is " AND <column> = ?" with its argument when the scope names an environment.
func (a AnalyticsScope) envFilter(column string) (string, []any) {
	if a.EnvironmentID == "" {
		return "", nil
	}
	return " AND " + column + " = ?", []any{a.EnvironmentID}
}

// MeterUsage is one meter's events and summed quantity.
type MeterUsage struct {
	Meter    string  `db:"meter"`
	Events   int64   `db:"events"`
	Quantity float64 `db:"quantity"`
}

// Revenue maps a currency (lower case, ISO 4217) to an amount in minor units.
type Revenue map[string]int64

// UsageSummary is a project's headline figures.
type UsageSummary struct {
	// Active subjects: those whose last event falls on today (UTC), the last 7 and the last 30
	// days (today included), counted once however many environments they used.
	ActiveToday, Active7Days, Active30Days int64
	// Meters are the last 30 days' events and quantity by meter, by meter name.
	Meters []MeterUsage
	// Revenue is the last 30 days' revenue.
	Revenue Revenue
}

// windowStart is the first day of the window of days days ending on today's UTC date.
func windowStart(today time.Time, days int) time.Time {
	y, m, d := today.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1-days)
}

// UsageSummary returns the summary of a project (or one environment) as of now.
func (s *Store) UsageSummary(ctx context.Context, scope AnalyticsScope, now time.Time) (UsageSummary, error) {
	const op = "usage summary"
	today, from7, from30 := windowStart(now, 1), windowStart(now, 7), windowStart(now, 30)
	var out UsageSummary
	var counts struct {
		Today int64 `db:"today"`
		Week  int64 `db:"week"`
		Month int64 `db:"month"`
	}
	// Over every environment a subject is one usage_subject_totals row; in one environment,
	// one usage_subjects row. Either way one scan of the project's rows, nothing to fold.
	table, env, envArgs := subjectTable(scope)
	err := s.readerFor(ctx).GetContext(ctx, &counts, s.reader.Rebind(`SELECT
		COALESCE(SUM(CASE WHEN last_seen >= ? THEN 1 ELSE 0 END), 0) AS today,
		COALESCE(SUM(CASE WHEN last_seen >= ? THEN 1 ELSE 0 END), 0) AS week,
		COUNT(*) AS month
		FROM `+table+` WHERE project_id = ?`+env+` AND last_seen >= ?`),
		append([]any{sqlTime(today), sqlTime(from7), scope.ProjectID}, append(envArgs, sqlTime(from30))...)...)
	if err != nil {
		return out, wrapError(op, err)
	}
	out.ActiveToday, out.Active7Days, out.Active30Days = counts.Today, counts.Week, counts.Month
	err = s.readerFor(ctx).SelectContext(ctx, &out.Meters, s.reader.Rebind(`SELECT meter, SUM(events) AS events, SUM(quantity) AS quantity
		FROM usage_totals WHERE project_id = ? AND day >= ?`+env+` GROUP BY meter ORDER BY meter`),
		append([]any{scope.ProjectID, UsageDay(from30)}, envArgs...)...)
	if err != nil {
		return out, wrapError(op, err)
	}
	if out.Meters == nil {
		out.Meters = []MeterUsage{}
	}
	var rev []struct {
		Currency string `db:"currency"`
		Amount   int64  `db:"amount"`
	}
	err = s.readerFor(ctx).SelectContext(ctx, &rev, s.reader.Rebind(`SELECT currency, SUM(amount) AS amount
		FROM revenue_daily WHERE project_id = ? AND day >= ?`+env+` GROUP BY currency`),
		append([]any{scope.ProjectID, UsageDay(from30)}, envArgs...)...)
	if err != nil {
		return out, wrapError(op, err)
	}
	out.Revenue = Revenue{}
	for _, r := range rev {
		out.Revenue[r.Currency] = r.Amount
	}
	return out, nil
}

// UsagePoint is one day of a series.
type UsagePoint struct {
	Day string
	// ActiveSubjects counts the subjects with an event that day (per environment: a subject
	// active in two environments counts in each). Zero in a subject's own series.
	ActiveSubjects int64
	Events         int64
	Quantity       float64
	Revenue        Revenue
}

// usageSeries returns one zero-filled point per day of the window of days days ending on
// now's UTC date, oldest first, and an index of them by day.
func usageSeries(now time.Time, days int) ([]UsagePoint, map[string]*UsagePoint) {
	start := windowStart(now, days)
	points := make([]UsagePoint, days)
	byDay := make(map[string]*UsagePoint, days)
	for i := range points {
		points[i] = UsagePoint{Day: UsageDay(start.AddDate(0, 0, i)), Revenue: Revenue{}}
		byDay[points[i].Day] = &points[i]
	}
	return points, byDay
}

// UsageActivity returns the daily series of the days days ending today (UTC): active subjects,
// events, quantity and revenue, with a zero point for each day without any.
func (s *Store) UsageActivity(ctx context.Context, scope AnalyticsScope, now time.Time, days int) ([]UsagePoint, error) {
	const op = "usage activity"
	points, byDay := usageSeries(now, days)
	env, envArgs := scope.envFilter("environment_id")
	var rows []struct {
		Day      string  `db:"day"`
		Active   int64   `db:"active"`
		Events   int64   `db:"events"`
		Quantity float64 `db:"quantity"`
	}
	err := s.readerFor(ctx).SelectContext(ctx, &rows, s.reader.Rebind(`SELECT day, SUM(new_subjects) AS active, SUM(events) AS events, SUM(quantity) AS quantity
		FROM usage_totals WHERE project_id = ? AND day >= ?`+env+` GROUP BY day`),
		append([]any{scope.ProjectID, points[0].Day}, envArgs...)...)
	if err != nil {
		return nil, wrapError(op, err)
	}
	for _, r := range rows {
		if p := byDay[r.Day]; p != nil {
			p.ActiveSubjects, p.Events, p.Quantity = r.Active, r.Events, r.Quantity
		}
	}
	if err := s.addRevenue(ctx, `SELECT day, currency, SUM(amount) AS amount FROM revenue_daily
		WHERE project_id = ? AND day >= ?`+env+` GROUP BY day, currency`,
		append([]any{scope.ProjectID, points[0].Day}, envArgs...), byDay); err != nil {
		return nil, wrapError(op, err)
	}
	return points, nil
}

// addRevenue runs query (columns day, currency, amount) and adds its rows to the points.
func (s *Store) addRevenue(ctx context.Context, query string, args []any, byDay map[string]*UsagePoint) error {
	var rows []struct {
		Day      string `db:"day"`
		Currency string `db:"currency"`
		Amount   int64  `db:"amount"`
	}
	if err := s.readerFor(ctx).SelectContext(ctx, &rows, s.reader.Rebind(query), args...); err != nil {
		return err
	}
	for _, r := range rows {
		if p := byDay[r.Day]; p != nil {
			p.Revenue[r.Currency] += r.Amount
		}
	}
	return nil
}

// SubjectUsage is one subject's lifetime totals (over the scope's environments).
type SubjectUsage struct {
	SubjectID string
	FirstSeen time.Time
	LastSeen  time.Time
	Events    int64
	Quantity  float64
	Revenue   Revenue
}

// The orders UsageSubjects accepts, by their wire names.
var subjectOrders = map[string]string{
	"lastSeen":  "last_seen",
	"events":    "events",
	"quantity":  "quantity",
	"revenue":   "revenue",
	"subjectId": "subject_id",
}

// IsSubjectOrder reports whether sort names an order of UsageSubjects (without its "-").
func IsSubjectOrder(sort string) bool { _, ok := subjectOrders[sort]; return ok }

// SubjectQuery selects a page of the subject directory.
type SubjectQuery struct {
	AnalyticsScope
	// Since: only subjects last seen at or after it.
	Since time.Time
	// Contains: only subject ids containing it (case-sensitive); "" for all.
	Contains string
	// Sort is one of the subjectOrders names; Desc reverses it. Ties are broken by subject id,
	// ascending. revenue sorts by the sum of minor units over every currency.
	Sort   string
	Desc   bool
	Limit  int
	Offset int
}

type subjectRow struct {
	SubjectID string  `db:"subject_id"`
	FirstSeen sqlTime `db:"first_seen"`
	LastSeen  sqlTime `db:"last_seen"`
	Events    int64   `db:"events"`
	Quantity  float64 `db:"quantity"`
	Revenue   int64   `db:"revenue"`
	Total     int     `db:"total"`
}

// UsageSubjects returns the total number of subjects q matches and the page of them it asks
// for, with each subject's lifetime totals and revenue by currency. It reads the subject
// summary only (subjectTable: one row per subject) and revenue_daily for the page.
func (s *Store) UsageSubjects(ctx context.Context, q SubjectQuery) (int, []SubjectUsage, error) {
	const op = "usage subjects"
	col, ok := subjectOrders[q.Sort]
	if !ok || q.Limit < 1 || q.Offset < 0 {
		return 0, nil, fmt.Errorf("store: %s: %w: sort %q, limit %d, offset %d", op, ErrInvalid, q.Sort, q.Limit, q.Offset)
	}
	dir := " ASC"
	if q.Desc {
		dir = " DESC"
	}
	table, where, args := subjectTable(q.AnalyticsScope)
	where = " WHERE project_id = ?" + where + " AND last_seen >= ?"
	args = append([]any{q.ProjectID}, append(args, sqlTime(q.Since))...)
	if q.Contains != "" {
		where += " AND " + s.dialect.containsClause("subject_id")
		args = append(args, q.Contains)
	}
	// One row per subject: the page is a top-N of the project's rows, and the total a count
	// of the same rows, run once (an uncorrelated subquery) whatever the page holds.
	query := `SELECT subject_id, first_seen, last_seen, events, quantity, revenue,
		(SELECT COUNT(*) FROM ` + table + where + `) AS total
		FROM ` + table + where + ` ORDER BY ` + col + dir + `, subject_id ASC LIMIT ? OFFSET ?`
	var rows []subjectRow
	err := s.readerFor(ctx).SelectContext(ctx, &rows, s.reader.Rebind(query), append(append(args, args...), q.Limit, q.Offset)...)
	if err != nil {
		return 0, nil, wrapError(op, err)
	}
	total := 0
	if len(rows) > 0 {
		total = rows[0].Total
	} else if q.Offset > 0 { // past the end: count on its own
		err := s.readerFor(ctx).GetContext(ctx, &total, s.reader.Rebind(`SELECT COUNT(*) FROM `+table+where), args...)
		if err != nil {
			return 0, nil, wrapError(op, err)
		}
	}
	out := make([]SubjectUsage, len(rows))
	ids := make([]any, len(rows))
	index := make(map[string]*SubjectUsage, len(rows))
	for i, r := range rows {
		out[i] = SubjectUsage{SubjectID: r.SubjectID, FirstSeen: time.Time(r.FirstSeen), LastSeen: time.Time(r.LastSeen),
			Events: r.Events, Quantity: r.Quantity, Revenue: Revenue{}}
		ids[i] = r.SubjectID
		index[r.SubjectID] = &out[i]
	}
	if len(rows) > 0 && hasRevenue(rows) {
		env, envArgs := q.envFilter("environment_id")
		var rev []struct {
			SubjectID string `db:"subject_id"`
			Currency  string `db:"currency"`
			Amount    int64  `db:"amount"`
		}
		err := s.readerFor(ctx).SelectContext(ctx, &rev, s.reader.Rebind(`SELECT subject_id, currency, SUM(amount) AS amount
			FROM revenue_daily WHERE project_id = ?`+env+` AND subject_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)
			GROUP BY subject_id, currency`), append(append([]any{q.ProjectID}, envArgs...), ids...)...)
		if err != nil {
			return 0, nil, wrapError(op, err)
		}
		for _, r := range rev {
			index[r.SubjectID].Revenue[r.Currency] = r.Amount
		}
	}
	return total, out, nil
}

func hasRevenue(rows []subjectRow) bool {
	for _, r := range rows {
		if r.Revenue != 0 {
			return true
		}
	}
	return false
}

// SubjectActivity is one subject's page: lifetime totals, a daily series, usage by meter over
// the series' days and the most recent events.
type SubjectActivity struct {
	SubjectUsage
	Series []UsagePoint
	Meters []MeterUsage
	Recent []UsageEvent
}

// RecentSubjectEvents is how many of a subject's latest events SubjectActivity returns.
const RecentSubjectEvents = 50

// SubjectActivity returns a subject's activity over the days days ending today (UTC). A
// subject with no event or revenue in the scope is ErrNotFound.
func (s *Store) SubjectActivity(ctx context.Context, scope AnalyticsScope, subjectID string, now time.Time, days int) (SubjectActivity, error) {
	const op = "subject activity"
	var out SubjectActivity
	env, envArgs := scope.envFilter("environment_id")
	base := append([]any{scope.ProjectID, subjectID}, envArgs...)
	var rows []subjectRow
	err := s.readerFor(ctx).SelectContext(ctx, &rows, s.reader.Rebind(`SELECT subject_id, MIN(first_seen) AS first_seen, MAX(last_seen) AS last_seen,
		SUM(events) AS events, SUM(quantity) AS quantity, SUM(revenue) AS revenue, 0 AS total
		FROM usage_subjects WHERE project_id = ? AND subject_id = ?`+env+` GROUP BY subject_id`), base...)
	if err != nil {
		return out, wrapError(op, err)
	}
	if len(rows) == 0 {
		return out, fmt.Errorf("store: %s: %w", op, ErrNotFound)
	}
	r := rows[0]
	out.SubjectUsage = SubjectUsage{SubjectID: r.SubjectID, FirstSeen: time.Time(r.FirstSeen), LastSeen: time.Time(r.LastSeen),
		Events: r.Events, Quantity: r.Quantity, Revenue: Revenue{}}
	var rev []struct {
		Currency string `db:"currency"`
		Amount   int64  `db:"amount"`
	}
	err = s.readerFor(ctx).SelectContext(ctx, &rev, s.reader.Rebind(`SELECT currency, SUM(amount) AS amount FROM revenue_daily
		WHERE project_id = ? AND subject_id = ?`+env+` GROUP BY currency`), base...)
	if err != nil {
		return out, wrapError(op, err)
	}
	for _, r := range rev {
		out.Revenue[r.Currency] = r.Amount
	}

	points, byDay := usageSeries(now, days)
	from := points[0].Day
	var daily []struct {
		Day      string  `db:"day"`
		Meter    string  `db:"meter"`
		Events   int64   `db:"events"`
		Quantity float64 `db:"quantity"`
	}
	err = s.readerFor(ctx).SelectContext(ctx, &daily, s.reader.Rebind(`SELECT day, meter, SUM(events) AS events, SUM(quantity) AS quantity
		FROM usage_daily WHERE project_id = ? AND subject_id = ? AND day >= ?`+env+` GROUP BY day, meter ORDER BY meter`),
		append([]any{scope.ProjectID, subjectID, from}, envArgs...)...)
	if err != nil {
		return out, wrapError(op, err)
	}
	meters := map[string]*MeterUsage{}
	out.Meters = []MeterUsage{}
	for _, d := range daily {
		if p := byDay[d.Day]; p != nil {
			p.Events += d.Events
			p.Quantity += d.Quantity
		}
		m := meters[d.Meter]
		if m == nil {
			out.Meters = append(out.Meters, MeterUsage{Meter: d.Meter})
			m = &out.Meters[len(out.Meters)-1]
			meters[d.Meter] = m
		}
		m.Events += d.Events
		m.Quantity += d.Quantity
	}
	if err := s.addRevenue(ctx, `SELECT day, currency, SUM(amount) AS amount FROM revenue_daily
		WHERE project_id = ? AND subject_id = ? AND day >= ?`+env+` GROUP BY day, currency`,
		append([]any{scope.ProjectID, subjectID, from}, envArgs...), byDay); err != nil {
		return out, wrapError(op, err)
	}
	out.Series = points

	var recent []struct {
		UsageEvent
		OccurredAt sqlTime `db:"occurred_at"`
		Received   sqlTime `db:"received_at"`
		Props      *string `db:"properties"`
	}
	recentEvents := func(legacy bool) error {
		// While a conversion is under way (usage_partitions.go) the events not yet moved are
		// read from the legacy table too; each event is in exactly one of the two.
		from := `usage_events`
		if legacy {
			from = `(SELECT * FROM usage_events UNION ALL SELECT * FROM usage_events_legacy) e`
		}
		return s.readerFor(ctx).SelectContext(ctx, &recent, s.reader.Rebind(`SELECT id, project_id, environment_id, event_id, subject_id, meter, quantity,
		occurred_at, received_at, properties FROM `+from+` WHERE project_id = ? AND subject_id = ?`+env+`
		ORDER BY occurred_at DESC, event_id DESC LIMIT ?`), append(base, RecentSubjectEvents)...)
	}
	err = recentEvents(s.usageLegacy.Load())
	if isUndefinedTable(err) {
		recent = recent[:0]
		err = recentEvents(false)
	}
	if err != nil {
		return out, wrapError(op, err)
	}
	out.Recent = make([]UsageEvent, len(recent))
	for i, e := range recent {
		out.Recent[i] = e.UsageEvent
		out.Recent[i].Timestamp, out.Recent[i].ReceivedAt = time.Time(e.OccurredAt), time.Time(e.Received)
		if e.Props != nil {
			out.Recent[i].Properties = *e.Props
		}
	}
	return out, nil
}
