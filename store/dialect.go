package store

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
	"unicode/utf8"

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
// time encoding, row-lock clauses, the classification of driver errors, and
// lists of strings passed as one parameter.
// Queries elsewhere are written once, with ? placeholders that sqlx rebinds,
// and call these helpers where the dialects differ. Two paths keep a
// statement per dialect beside the code that runs it, where one text cannot
// serve both engines well: usage ingest (usage_postgres.go) and the
// who-holds walk (rbac_decisions.go: LATERAL on PostgreSQL, a recursive walk
// on SQLite).

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
func (t sqlTime) Value() (driver.Value, error) { return t.text(), nil }

// text is t in UTC with sqliteTimeLayout (RFC 3339 with microseconds).
func (t sqlTime) text() string { return time.Time(t).UTC().Format(sqliteTimeLayout) }

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

// skipLockedClause returns the clause that, appended to the SELECT of a claim, locks the
// rows it picks and skips those another transaction holds, so that concurrent claimers
// (outbox workers on several replicas) take disjoint rows without waiting. On SQLite it is
// empty: the one writer connection serialises claims.
func (d Dialect) skipLockedClause() string {
	if d != Postgres {
		return ""
	}
	return " FOR UPDATE SKIP LOCKED"
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
// PostgreSQL's connection exception (08), operator intervention (57: admin_shutdown 57P01,
// crash_shutdown 57P02, cannot_connect_now 57P03 while a server starts or is promoted) and
// insufficient resources (53: too many connections) classes, read_only_sql_transaction (25006:
// the address still leads to a standby, or a primary demoted during a failover), SQLite's busy
// file. docs/failover.md describes the switch these errors come from.
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
		return pqErr.Code == "25006"
	}
	if liteErr, ok := errors.AsType[*sqlite.Error](err); ok {
		code := liteErr.Code() & 0xff // primary result code
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// isRecoveryAtBegin reports whether err, returned by BEGIN, is PostgreSQL refusing a read-write
// transaction because the server is in recovery (a standby not yet promoted, reached through
// an address that moved early during a failover): SQLSTATE 0A000 feature_not_supported, which
// a plain BEGIN raises for nothing else. Callers treat it as the database being unavailable.
func isRecoveryAtBegin(err error) bool {
	if pqErr, ok := errors.AsType[*pq.Error](err); ok {
		return pqErr.Code == "0A000"
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

// ---- Usage ingest and analytics ----

// containsClause is a WHERE condition true when column contains the (next) parameter as a
// case-sensitive substring, with no LIKE wildcards to escape.
func (d Dialect) containsClause(column string) string {
	if d == Postgres {
		return "strpos(" + column + ", ?) > 0"
	}
	return "instr(" + column + ", ?) > 0"
}

// ---- Lists as one parameter ----

// stringList is a subquery listing the strings of one parameter made by stringListArg: on
// SQLite a JSON array read by json_each, on PostgreSQL a text[] read by unnest. It is the same
// for every list, so a statement using it is prepared once whatever the list's length. Write
// `column IN ` + d.stringList().
func (d Dialect) stringList() string {
	if d == Postgres {
		return "(SELECT unnest(CAST(? AS text[])))"
	}
	return "(SELECT value FROM json_each(?))"
}

// decodeStringArray reads a column holding a JSON array of strings, such as
// project_roles.permissions (nil or empty: no strings). An array without escapes is split
// where its quotes are; any other is decoded by encoding/json.
//
// Written by hand because a 100-check batch reads hundreds of these strings per request and
// encoding/json's reflective decoding of each array showed in the batch's profile; the input
// is the store's own encoding of validated permission strings (or PostgreSQL's json_agg of
// them, from the migration that made the column), anything unusual falls back to
// encoding/json, and TestDecodeStringArray holds both paths to the same answers.
func decodeStringArray(raw []byte) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if out, ok := splitPlainStringArray(raw); ok {
		return out, nil
	}
	var out []string
	err := json.Unmarshal(raw, &out)
	return out, err
}

// splitPlainStringArray reads a JSON array of strings none of which holds an escape (every
// quote in raw then delimits a string); ok is false for anything else.
func splitPlainStringArray(raw []byte) (out []string, ok bool) {
	if bytes.IndexByte(raw, '\\') >= 0 {
		return nil, false
	}
	var text string
	i := 0
	space := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	space()
	if i == len(raw) || raw[i] != '[' {
		return nil, false
	}
	i++
	space()
	if i < len(raw) && raw[i] == ']' {
		i++
		space()
		return []string{}, i == len(raw)
	}
	for {
		space()
		if i == len(raw) || raw[i] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(raw[i+1:], '"')
		if end < 0 {
			return nil, false
		}
		s := raw[i+1 : i+1+end]
		for _, c := range s {
			if c < 0x20 {
				return nil, false
			}
		}
		if !utf8.Valid(s) {
			return nil, false
		}
		if text == "" {
			// One string for every element: each is a substring of it.
			text = string(raw)
		}
		out = append(out, text[i+1:i+1+end])
		i += end + 2
		space()
		if i == len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i++
		case ']':
			i++
			space()
			return out, i == len(raw)
		default:
			return nil, false
		}
	}
}

// stringListArg is the parameter of stringList holding values.
func (d Dialect) stringListArg(values []string) (any, error) {
	if d == Postgres {
		return pq.StringArray(values), nil
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	return string(raw), nil
}
