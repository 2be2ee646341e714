package store

import (
	"database/sql/driver"
	"fmt"
	"time"
)

// sqliteTimeLayout is how timestamps are stored on SQLite: fixed-width
// RFC 3339 in UTC with microseconds, so that text order is time order.
// PostgreSQL stores the same values in TIMESTAMPTZ columns (which also keep
// microseconds), and parses this layout when it arrives as a parameter.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// sqlTime is a time.Time as the store writes and reads it, on both dialects.
// Write it as a query argument (sqlTime(t)) and scan into it; use *sqlTime for
// nullable columns (database/sql stores nil for NULL).
type sqlTime time.Time

// Value formats t in UTC with sqliteTimeLayout.
func (t sqlTime) Value() (driver.Value, error) {
	return time.Time(t).UTC().Format(sqliteTimeLayout), nil
}

// Scan accepts a time.Time (PostgreSQL) or RFC 3339 text (SQLite) and keeps
// it in UTC.
func (t *sqlTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*t = sqlTime(v.UTC())
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	default:
		return fmt.Errorf("store: scan time: unsupported type %T", src)
	}
}

func (t *sqlTime) parse(s string) error {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("store: scan time: %w", err)
	}
	*t = sqlTime(v.UTC())
	return nil
}

// stamps returns the creation and update times to store for a new row: the given ones, or
// Store.Now when created is zero and the creation time when updated is zero, in UTC at
// microsecond precision.
func (tx *Tx) stamps(created, updated time.Time) (time.Time, time.Time) {
	if created.IsZero() {
		created = tx.store.Now()
	}
	created = created.UTC().Truncate(time.Microsecond)
	if updated.IsZero() {
		updated = created
	}
	return created, updated.UTC().Truncate(time.Microsecond)
}
