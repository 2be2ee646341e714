package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// RevenueEntry is one paid invoice's amount, as billing reports it to the analytics.
type RevenueEntry struct {
	ProjectID, EnvironmentID, SubjectID string
	// At is when the invoice was paid; its UTC date is the revenue_daily day.
	At time.Time
	// Currency is an ISO 4217 code, stored in lower case ("usd").
	Currency string
	// Amount is in the currency's minor units (cents), at least 0.
	Amount int64
}

var currencyCode = regexp.MustCompile(`^[a-z]{3}$`)

// AddRevenue adds a paid invoice to revenue_daily (amount and one invoice on the row of its
// project, environment, day, subject and currency) and to the subject summary's revenue total
// (the sum over currencies that the directory sorts by), per environment and over all of them.
// A subject with no usage yet gets a summary row with 0 events, first and last seen at e.At.
// It runs in the caller's transaction, so the revenue commits with the payment that earned it.
//
// It returns ErrInvalid for a missing id, a currency that is not three letters, a negative
// amount or a zero At.
func (tx *Tx) AddRevenue(ctx context.Context, e RevenueEntry) error {
	const op = "add revenue"
	e.Currency = strings.ToLower(e.Currency)
	if e.ProjectID == "" || e.EnvironmentID == "" || e.SubjectID == "" || !currencyCode.MatchString(e.Currency) || e.Amount < 0 || e.At.IsZero() {
		return fmt.Errorf("store: %s: %w: %+v", op, ErrInvalid, e)
	}
	at := e.At.UTC().Truncate(time.Microsecond)
	_, err := tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO revenue_daily (project_id, environment_id, day, subject_id, currency, amount, invoices)
		VALUES (?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT (project_id, environment_id, day, subject_id, currency) DO UPDATE SET
			amount = revenue_daily.amount + excluded.amount, invoices = revenue_daily.invoices + 1`),
		e.ProjectID, e.EnvironmentID, UsageDay(at), e.SubjectID, e.Currency, e.Amount)
	if err != nil {
		return wrapError(op, err)
	}
	// The environment's row as it now stands (new, with first and last seen at e.At, or as it
	// was) is what the totals fold in: a row that already existed is within them already.
	var row struct {
		FirstSeen sqlTime `db:"first_seen"`
		LastSeen  sqlTime `db:"last_seen"`
	}
	err = tx.tx.GetContext(ctx, &row, tx.tx.Rebind(`INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity, revenue)
		VALUES (?, ?, ?, ?, ?, 0, 0, ?)
		ON CONFLICT (project_id, subject_id, environment_id) DO UPDATE SET revenue = usage_subjects.revenue + excluded.revenue
		RETURNING first_seen, last_seen`),
		e.ProjectID, e.SubjectID, e.EnvironmentID, sqlTime(at), sqlTime(at), e.Amount)
	if err != nil {
		return wrapError(op, err)
	}
	_, err = tx.tx.ExecContext(ctx, tx.tx.Rebind(`INSERT INTO usage_subject_totals (project_id, subject_id, first_seen, last_seen, events, quantity, revenue)
		VALUES (?, ?, ?, ?, 0, 0, ?)
		ON CONFLICT (project_id, subject_id) DO UPDATE SET revenue = usage_subject_totals.revenue + excluded.revenue,
			first_seen = CASE WHEN excluded.first_seen < usage_subject_totals.first_seen THEN excluded.first_seen ELSE usage_subject_totals.first_seen END,
			last_seen = CASE WHEN excluded.last_seen > usage_subject_totals.last_seen THEN excluded.last_seen ELSE usage_subject_totals.last_seen END`),
		e.ProjectID, e.SubjectID, row.FirstSeen, row.LastSeen, e.Amount)
	if err != nil {
		return wrapError(op, err)
	}
	return nil
}

// RevenueDay is one revenue_daily row.
type RevenueDay struct {
	EnvironmentID string `db:"environment_id"`
	Day           string `db:"day"`
	SubjectID     string `db:"subject_id"`
	Currency      string `db:"currency"`
	Amount        int64  `db:"amount"`
	Invoices      int    `db:"invoices"`
}

// RevenueDays returns a project's revenue_daily rows ordered by day, environment, subject and
// currency.
func (s *Store) RevenueDays(ctx context.Context, projectID string) ([]RevenueDay, error) {
	var rows []RevenueDay
	err := s.reader.SelectContext(ctx, &rows, s.reader.Rebind(`SELECT environment_id, day, subject_id, currency, amount, invoices
		FROM revenue_daily WHERE project_id = ? ORDER BY day, environment_id, subject_id, currency`), projectID)
	if err != nil {
		return nil, wrapError("revenue days", err)
	}
	return rows, nil
}
