package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	migratepostgres "github.com/golang-migrate/migrate/v4/database/postgres"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file holds everything the store does differently on SQLite and on
// PostgreSQL, apart from the schema (the migrations have one folder per
// dialect): pool settings and connection parameters, the migration driver,
// time encoding, row-lock clauses and the classification of driver errors.
// Queries elsewhere are written once, with ? placeholders that sqlx rebinds,
// and call these helpers where the dialects differ.

// Dialect names a supported database engine.
type Dialect string

// The supported dialects. Their values name the folders of package
// migrations.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

func init() {
	// sqlx knows lib/pq's "postgres" but not modernc's "sqlite".
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// ---- Pools and connections ----

// Pool sizes. SQLite allows one writer at a time, so the store holds exactly
// one writer connection and serialises writes in Go instead of on
// SQLITE_BUSY.
const (
	sqliteReaders      = 4
	postgresMaxOpen    = 20
	postgresMaxIdle    = 20
	postgresMaxIdleAge = 5 * time.Minute
)

// sqlitePragmas apply to every SQLite connection (modernc _pragma DSN
// parameters run on each new connection).
const sqlitePragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
	"&_pragma=foreign_keys(ON)&_pragma=synchronous(NORMAL)"

// sqliteWriterDSN and sqliteReaderDSN are the data source names of the SQLite
// file at path: the writer begins every transaction IMMEDIATE (taking the
// write lock up front), the readers cannot write.
func sqliteWriterDSN(path string) string { return path + "?" + sqlitePragmas + "&_txlock=immediate" }
func sqliteReaderDSN(path string) string {
	return path + "?" + sqlitePragmas + "&_pragma=query_only(1)"
}

// CombinesKeyDecision reports whether APIKeyDecision costs less than
// APIKeyByPublicID followed by Decide on this store: on PostgreSQL it saves two
// round trips; on SQLite the queries are in-process calls that cost less than
// scanning the key's columns repeated in every row of the combined query.
func (s *Store) CombinesKeyDecision() bool { return s.dialect == Postgres }

// configurePool applies the dialect's pool settings to db. On PostgreSQL one
// pool serves reads and writes; on SQLite the writer pool (writer true) holds
// a single connection and the reader pool sqliteReaders.
func (d Dialect) configurePool(db *sqlx.DB, writer bool) {
	switch {
	case d == Postgres:
		db.SetMaxOpenConns(postgresMaxOpen)
		db.SetMaxIdleConns(postgresMaxIdle)
		db.SetConnMaxIdleTime(postgresMaxIdleAge)
	case writer:
		db.SetMaxOpenConns(1)
	default:
		db.SetMaxOpenConns(sqliteReaders)
		db.SetMaxIdleConns(sqliteReaders)
	}
}

// migrateDriver returns a golang-migrate driver that owns a connection of
// its own, so that closing it leaves the store's pools open: on PostgreSQL a
// connection borrowed from the pool (returned on close), on SQLite a separate
// single-connection handle on the same file. ctx bounds getting the
// connection.
func (s *Store) migrateDriver(ctx context.Context) (database.Driver, error) {
	if s.dialect == Postgres {
		conn, err := s.writer.Conn(ctx)
		if err != nil {
			return nil, err
		}
		driver, err := migratepostgres.WithConnection(ctx, conn, &migratepostgres.Config{})
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		return driver, nil
	}
	db, err := sql.Open("sqlite", s.sqliteDSN)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	driver, err := migratesqlite.WithInstance(db, &migratesqlite.Config{})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return driver, nil
}

// ---- Time encoding ----

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

// ---- Row locks ----

// rowLock is a row-level lock a SELECT takes until its transaction ends.
type rowLock int

const (
	// lockForUpdate excludes other lockers, updates and deletes of the row,
	// and inserts of rows whose foreign key references it.
	lockForUpdate rowLock = iota + 1
	// lockForNoKeyUpdate excludes other lockers and updates of the row, but
	// not inserts of rows that reference it.
	lockForNoKeyUpdate
)

// lockClause returns the clause that, appended to a SELECT, takes lock on the
// rows it reads. On SQLite it is empty: transactions are serialised (BEGIN
// IMMEDIATE on the one writer connection), so a read inside one already
// sees no concurrent write.
func (d Dialect) lockClause(lock rowLock) string {
	if d != Postgres {
		return ""
	}
	switch lock {
	case lockForUpdate:
		return " FOR UPDATE"
	case lockForNoKeyUpdate:
		return " FOR NO KEY UPDATE"
	}
	return ""
}

// ---- Error classification ----

// isUniqueViolation reports whether err is a PRIMARY KEY or UNIQUE violation:
// SQLSTATE 23505 from PostgreSQL, SQLITE_CONSTRAINT_UNIQUE or
// SQLITE_CONSTRAINT_PRIMARYKEY from SQLite (modernc enables extended result
// codes). Each driver only produces its own error type.
func isUniqueViolation(err error) bool {
	if pqErr, ok := errors.AsType[*pq.Error](err); ok {
		return pqErr.SQLState() == "23505"
	}
	if liteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		code := liteErr.Code()
		return code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// isMissingReference reports whether err is a FOREIGN KEY violation: a row
// referring to one that does not exist. SQLSTATE 23503 from PostgreSQL,
// SQLITE_CONSTRAINT_FOREIGNKEY from SQLite.
func isMissingReference(err error) bool {
	if pqErr, ok := errors.AsType[*pq.Error](err); ok {
		return pqErr.SQLState() == "23503"
	}
	if liteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		return liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	}
	return false
}

// isUnavailable reports whether err means the database could not be reached or stopped
// answering, rather than refusing the statement: a network error or timeout (including a
// deadline that passed while waiting for a connection), a connection the driver gave up on,
// PostgreSQL's connection exception (08), operator intervention (57: shutting down) and
// insufficient resources (53: too many connections) classes, SQLite's busy file.
func isUnavailable(err error) bool {
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	if pqErr, ok := errors.AsType[*pq.Error](err); ok {
		switch pqErr.Code.Class() {
		case "08", "53", "57":
			return true
		}
		return false
	}
	if liteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		code := liteErr.Code() & 0xff // primary result code
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// isRetryableWrite reports whether a write failed only because of concurrent writers and may
// simply run again: PostgreSQL's deadlock_detected (40P01) and serialization_failure (40001).
func isRetryableWrite(err error) bool {
	if pqErr, ok := errors.AsType[*pq.Error](err); ok {
		return pqErr.Code == "40P01" || pqErr.Code == "40001"
	}
	return false
}

// isNoRows reports whether err is database/sql's "no rows in result set".
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// ---- Usage ingest and analytics ----

// postgresIngestOne records one usage event on PostgreSQL in one statement, committed on its
// own: the insert, and the four rollup upserts fed by its RETURNING (so they write only when
// the event is new; usage_totals counts a new subject-day when the subject-day upsert left 1).
// It returns (id, true) for a new event; (original id, false) for a replay of an event
// committed before the statement began; no row when a racing transaction inserted the event
// while this one waited on the unique index (read the id again then). Parameters: project,
// event id, id, environment, subject, meter, quantity, timestamp, received at, properties,
// day, shard. SQLite has no data-modifying WITH; it runs Tx.ingestUsage's statements instead.
const postgresIngestOne = `WITH ev AS (
	INSERT INTO usage_events (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
	ON CONFLICT (project_id, event_id) DO NOTHING RETURNING id
), sd AS (
	INSERT INTO usage_subject_days (project_id, subject_id, day, environment_id, events)
	SELECT $1::text, $5::text, $11::text, $4::text, 1 FROM ev
	ON CONFLICT (project_id, subject_id, day, environment_id) DO UPDATE SET events = usage_subject_days.events + 1
	RETURNING events
), ud AS (
	INSERT INTO usage_daily (project_id, subject_id, day, meter, environment_id, events, quantity)
	SELECT $1::text, $5::text, $11::text, $6::text, $4::text, 1, $7::double precision FROM ev
	ON CONFLICT (project_id, subject_id, day, meter, environment_id) DO UPDATE SET
		events = usage_daily.events + 1, quantity = usage_daily.quantity + excluded.quantity
), us AS (
	INSERT INTO usage_subjects (project_id, subject_id, environment_id, first_seen, last_seen, events, quantity)
	SELECT $1::text, $5::text, $4::text, $8::timestamptz, $8::timestamptz, 1, $7::double precision FROM ev
	ON CONFLICT (project_id, subject_id, environment_id) DO UPDATE SET
		first_seen = LEAST(usage_subjects.first_seen, excluded.first_seen),
		last_seen = GREATEST(usage_subjects.last_seen, excluded.last_seen),
		events = usage_subjects.events + 1, quantity = usage_subjects.quantity + excluded.quantity
), ut AS (
	INSERT INTO usage_totals (project_id, day, environment_id, meter, shard, events, quantity, new_subjects)
	SELECT $1::text, $11::text, $4::text, $6::text, $12::smallint, 1, $7::double precision, CASE WHEN sd.events = 1 THEN 1 ELSE 0 END FROM sd
	ON CONFLICT (project_id, day, environment_id, meter, shard) DO UPDATE SET
		events = usage_totals.events + 1, quantity = usage_totals.quantity + excluded.quantity,
		new_subjects = usage_totals.new_subjects + excluded.new_subjects
)
SELECT id, true AS inserted FROM ev
UNION ALL
SELECT id, false FROM usage_events WHERE project_id = $1 AND event_id = $2`

// containsClause is a WHERE condition true when column contains the (next) parameter as a
// case-sensitive substring, with no LIKE wildcards to escape.
func (d Dialect) containsClause(column string) string {
	if d == Postgres {
		return "strpos(" + column + ", ?) > 0"
	}
	return "instr(" + column + ", ?) > 0"
}
