// Package store is Gatehouse's persistence layer: sqlx over PostgreSQL
// (lib/pq) or an embedded SQLite file (modernc.org/sqlite), with the schema in
// package migrations.
//
// Queries are written once with ? placeholders and rebound for PostgreSQL
// (sqlx Rebind). Because Rebind rewrites every ?, PostgreSQL's jsonb ?
// operators cannot be used; use jsonb_exists and friends instead. The few
// dialect differences live in two places: the schema (column types, one
// migrations folder per dialect) and dialect.go (pool settings, time
// encoding, row-lock clauses, driver error classification).
//
// Writes happen only inside Store.InTx; on SQLite they all go through one
// writer connection, and reads outside a transaction use a separate pool.
//
// Errors: every error is wrapped as "store: <operation>: ..." and callers
// test it with errors.Is against ErrNotFound, ErrConflict and ErrInvalid.
// Any other error is internal (the database is unreachable, a bug, ...).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jmoiron/sqlx"

	"github.com/gatehouse-dev/gatehouse/migrations"
)

// Sentinel errors. Store methods wrap them with %w; test with errors.Is.
var (
	// ErrNotFound: the addressed row does not exist (or is not visible to
	// the caller's filter). Methods never return a nil value with a nil error
	// for a missing row.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write would violate a uniqueness constraint (a
	// duplicate ID, slug, key, ...). Nothing was written.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the caller passed a value the store refuses before (or
	// instead of) touching the database: an unsupported database URL, a
	// malformed entry. Nothing was written.
	ErrInvalid = errors.New("invalid")
	// ErrLimit: the write would exceed a fixed count limit (for example
	// MaxOrgRoles dynamic roles per organization). Nothing was written.
	ErrLimit = errors.New("limit exceeded")
	// ErrUnavailable: the database could not be reached or stopped answering
	// (connection refused or lost, a connect or wait timeout, the server
	// shutting down). Retry later; whether a write in flight committed is unknown.
	ErrUnavailable = errors.New("database unavailable")
	// ErrClientChanged: a token row written on condition that its client is still as it was
	// read (OAuthToken.ClientVersion) was not written, because the client has changed, been
	// deleted or disabled, or its project or organization archived since. Read the client again.
	ErrClientChanged = errors.New("oidc client changed")
)

// Store is a handle on the database. It is safe for concurrent use.
type Store struct {
	reads
	dialect Dialect
	// writer runs every transaction. On SQLite it holds one connection.
	writer *sqlx.DB
	// reader runs reads outside transactions. On PostgreSQL it is writer.
	reader *sqlx.DB
	// sqliteDSN opens the separate connection migrations run on.
	sqliteDSN string
	clock     func() time.Time
	// statements caches the prepared hot queries (statementKey → *sqlx.Stmt); see
	// readStatement and writeStatement. Close closes them.
	statements sync.Map
	// usageQueue groups concurrent single usage events into shared transactions.
	usageQueue usageQueue
	// tokenQueue groups concurrent OAuth token rows into shared transactions.
	tokenQueue tokenQueue
	// epochReads groups concurrent decision-epoch reads into shared statements.
	epochReads epochReads
	// epochsRead, when set (by tests), is called after each shared epoch read's statement
	// returned and before its callers are answered.
	epochsRead func()
	// usageRetention and usageReplayWindow are WithUsageRetention and WithUsageReplayWindow;
	// usageLegacy is whether usage_events_legacy exists (a conversion under way, PostgreSQL:
	// usage_partitions.go).
	usageRetention, usageReplayWindow time.Duration
	usageLegacy                       atomic.Bool
	// auditHook, when set (OnAudit), runs after each audit entry is written, in its
	// transaction.
	auditHook AuditHook
	// replicaURLs, replicaMaxLag and replicaEvery are WithReadReplicas and
	// WithReplicaCheckInterval; replicas are their pools and checker (replicas.go).
	replicaURLs                 []string
	replicaMaxLag, replicaEvery time.Duration
	replicas                    *replicaSet
}

// Option configures Open.
type Option func(*Store)

// WithClock replaces time.Now as the source of the timestamps the store
// assigns (created, occurred, ...). Tests use it to pin time.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.clock = now }
}

// Open connects to the database named by databaseURL and pings it; ctx bounds
// the ping. It does not migrate (see Migrate).
//
// Accepted URLs:
//   - postgres://… or postgresql://… (lib/pq; connect_timeout=2 is added
//     when absent);
//   - SQLite: sqlite:PATH, sqlite://PATH, file:PATH or a bare PATH. The parent
//     directory is created (0700). In-memory databases and query parameters
//     are not supported.
//
// Open returns an error wrapping ErrInvalid for an unsupported URL, and the
// driver's error when the database cannot be reached.
func Open(ctx context.Context, databaseURL string, opts ...Option) (*Store, error) {
	s := &Store{clock: time.Now}
	for _, opt := range opts {
		opt(s)
	}
	if err := s.open(ctx, databaseURL); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if err := s.openReplicas(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	s.reads = reads{q: s.reader, store: s}
	return s, nil
}

func (s *Store) open(ctx context.Context, databaseURL string) error {
	dialect, target, err := parseURL(databaseURL)
	if err != nil {
		return err
	}
	s.dialect = dialect

	if dialect == Postgres {
		db, err := sqlx.Open("postgres", target)
		if err != nil {
			return err
		}
		dialect.configurePool(db, true)
		s.writer, s.reader = db, db
		return ping(ctx, db)
	}

	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return err
	}
	s.sqliteDSN = sqliteWriterDSN(target)
	if s.writer, err = sqlx.Open("sqlite", s.sqliteDSN); err != nil {
		return err
	}
	dialect.configurePool(s.writer, true)
	// The writer connects first so that it switches the file to WAL before
	// any reader opens it.
	if err := ping(ctx, s.writer); err != nil {
		return err
	}
	if s.reader, err = sqlx.Open("sqlite", sqliteReaderDSN(target)); err != nil {
		return err
	}
	dialect.configurePool(s.reader, false)
	return ping(ctx, s.reader)
}

// parseURL returns the dialect of databaseURL and what to hand its driver:
// the URL itself for PostgreSQL, the file path for SQLite.
func parseURL(databaseURL string) (Dialect, string, error) {
	lower := strings.ToLower(databaseURL)
	var path string
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		u, err := url.Parse(databaseURL)
		if err != nil {
			return "", "", fmt.Errorf("%w: database url: %v", ErrInvalid, err)
		}
		q := u.Query()
		if !q.Has("connect_timeout") {
			q.Set("connect_timeout", "2")
			u.RawQuery = q.Encode()
		}
		return Postgres, u.String(), nil
	case strings.HasPrefix(lower, "sqlite://"):
		path = databaseURL[len("sqlite://"):]
	case strings.HasPrefix(lower, "sqlite:"):
		path = databaseURL[len("sqlite:"):]
	case strings.HasPrefix(lower, "file:"):
		path = strings.TrimPrefix(databaseURL[len("file:"):], "//")
	case strings.Contains(databaseURL, "://"):
		return "", "", fmt.Errorf("%w: database url: unsupported scheme (want postgres://, sqlite: or a file path)", ErrInvalid)
	default:
		path = databaseURL
	}
	switch {
	case path == "":
		return "", "", fmt.Errorf("%w: database url: empty sqlite path", ErrInvalid)
	case strings.Contains(path, "?"):
		return "", "", fmt.Errorf("%w: database url: sqlite query parameters are not supported", ErrInvalid)
	case strings.HasPrefix(path, ":memory:"):
		return "", "", fmt.Errorf("%w: database url: in-memory sqlite is not supported (use a file)", ErrInvalid)
	}
	return SQLite, path, nil
}

// Close closes every connection. Close returns the first errors the pools
// report; the store must not be used afterwards.
func (s *Store) Close() error {
	s.closeUsage()
	s.closeTokens()
	s.closeEpochs()
	errs := s.closeReplicas()
	s.statements.Range(func(query, stmt any) bool {
		errs = append(errs, stmt.(*sqlx.Stmt).Close())
		s.statements.Delete(query)
		return true
	})
	if s.reader != nil && s.reader != s.writer {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Dialect reports which database engine the store talks to.
func (s *Store) Dialect() Dialect { return s.dialect }

// Now returns the store clock's current time in UTC, truncated to the
// microsecond: the precision both dialects keep, so a time written and read
// back compares equal.
func (s *Store) Now() time.Time {
	return s.clock().UTC().Truncate(time.Microsecond)
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

// Ping checks that the database answers SELECT 1 on the read path. It returns
// when ctx is done even if the driver is stuck (lib/pq does not abandon a
// read from a server that stopped answering), with an error wrapping
// ctx.Err().
func (s *Store) Ping(ctx context.Context) error {
	if err := ping(ctx, s.reader); err != nil {
		return wrapError("ping", err)
	}
	return nil
}

// ping runs SELECT 1 on db, giving up when ctx is done. The query goroutine
// may outlive the call; it ends when the driver gives up on the connection.
func ping(ctx context.Context, db *sqlx.DB) error {
	result := make(chan error, 1)
	go func() {
		var one int
		result <- db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Migrate applies every migration that is not applied yet. An up-to-date
// database is not an error. It returns golang-migrate's error when a
// migration fails (the database is then marked dirty at that version).
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.MigrateApplied(ctx)
	return err
}

// MigrateApplied is Migrate, and reports whether this call applied any migration: false when
// the database was current, including when another process (a replica starting at the same
// time) migrated it first. On PostgreSQL golang-migrate holds an advisory lock for the whole
// run, so of several processes migrating one database at once exactly one applies the
// migrations while the others wait for the lock, then find nothing to do.
func (s *Store) MigrateApplied(ctx context.Context) (applied bool, err error) {
	err = s.migrate(ctx, "migrate", func(m *migrate.Migrate) error {
		err := m.Up()
		applied = err == nil
		return err
	})
	if err == nil && s.dialect == Postgres {
		// The usage partitions of this month and the next exist before the first event.
		if _, err = s.maintainUsage(ctx, false); err == nil {
			err = s.refreshUsageLegacy(ctx)
		}
	}
	return applied, err
}

// MigrateDown reverts every applied migration, dropping the whole schema.
// An empty database is not an error.
func (s *Store) MigrateDown(ctx context.Context) error {
	return s.migrate(ctx, "migrate down", func(m *migrate.Migrate) error { return m.Down() })
}

// Version returns the version of the last applied migration and whether it
// failed half-way (dirty). A database without migrations reports 0, false.
func (s *Store) Version(ctx context.Context) (version uint, dirty bool, err error) {
	err = s.migrate(ctx, "version", func(m *migrate.Migrate) error {
		var err error
		version, dirty, err = m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			return nil
		}
		return err
	})
	return version, dirty, err
}

// migrate runs fn on a golang-migrate instance over this store's database.
// migrate.Close closes its database driver, so the driver never owns one of
// the store's pools: on PostgreSQL it gets a connection borrowed from the
// pool (returned on close); on SQLite a separate single-connection handle on
// the same file. ctx bounds getting that connection only: golang-migrate
// runs migrations without a context.
func (s *Store) migrate(ctx context.Context, op string, fn func(*migrate.Migrate) error) (err error) {
	src, err := iofs.New(migrations.FS, string(s.dialect))
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	driver, err := s.migrateDriver(ctx)
	if err != nil {
		_ = src.Close()
		return fmt.Errorf("store: %s: %w", op, err)
	}

	m, err := migrate.NewWithInstance("iofs", src, string(s.dialect), driver)
	if err != nil {
		_ = src.Close()
		_ = driver.Close()
		return fmt.Errorf("store: %s: %w", op, err)
	}
	defer func() {
		if srcErr, dbErr := m.Close(); err == nil && (srcErr != nil || dbErr != nil) {
			err = fmt.Errorf("store: %s: close: %w", op, errors.Join(srcErr, dbErr))
		}
	}()
	if err := fn(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return nil
}

// Tx is a transaction opened by InTx. Store methods with a *Tx receiver run
// inside it. A Tx is valid only until InTx's fn returns and must not be used
// from several goroutines at once.
type Tx struct {
	reads
	tx    *sqlx.Tx
	store *Store
	// unprepared are the queries exec ran unprepared, for prepareLater.
	unprepared []string
}

// exec runs query (? placeholders) in tx as a prepared statement of the writer pool
// (writeStatement), bound to tx's connection: database/sql reuses the connection's prepared
// handle. A query not prepared yet runs unprepared this once and is prepared when tx ends
// (prepareLater): on SQLite tx holds the writer pool's only connection, so preparing on the
// pool now would wait for tx itself. For the hot writes (an OAuth token's insert), on which
// SQLite spent more parsing the statement than running it.
func (tx *Tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st, ok := tx.store.statements.Load(statementKey{tx.store.writer, query}); ok {
		return tx.tx.StmtxContext(ctx, st.(*sqlx.Stmt)).ExecContext(ctx, args...)
	}
	tx.unprepared = append(tx.unprepared, query)
	return tx.tx.ExecContext(ctx, tx.tx.Rebind(query), args...)
}

// prepareLater prepares, on the writer pool, the queries exec ran unprepared in tx, once tx
// has committed and its connection is free (not after a rollback, which may be a database
// that cannot be reached). A failure only leaves the query unprepared for the next
// transaction to try again.
func (tx *Tx) prepareLater(ctx context.Context) {
	for _, q := range tx.unprepared {
		_, _ = tx.store.writeStatement(context.WithoutCancel(ctx), q)
	}
	tx.unprepared = nil
}

// Pools names the store's connection pools, for their statistics: "postgres" (the one pool) on
// PostgreSQL, and "postgres-replica-N" for each read replica (WithReadReplicas); "sqlite-writer" (one connection, every transaction) and "sqlite-reader" on SQLite.
func (s *Store) Pools() map[string]*sql.DB {
	if s.reader == s.writer {
		out := map[string]*sql.DB{"postgres": s.writer.DB}
		s.replicaPools(out)
		return out
	}
	return map[string]*sql.DB{"sqlite-writer": s.writer.DB, "sqlite-reader": s.reader.DB}
}

// readStatement returns query (written with ? placeholders) prepared on the reader pool,
// preparing it on first use. It is for the hot read paths (authentication, authorization,
// decisions): preparing costs SQLite more than running them, and a prepared statement saves
// PostgreSQL a round trip. database/sql re-prepares it on each pooled connection that runs it.
func (s *Store) readStatement(ctx context.Context, query string) (*sqlx.Stmt, error) {
	return s.prepared(ctx, s.reader, query)
}

// writeStatement is readStatement on the writer pool, for statements that run in transactions
// (Tx.exec); on SQLite never call it while holding a transaction. On PostgreSQL, where both
// pools are one, it is readStatement.
func (s *Store) writeStatement(ctx context.Context, query string) (*sqlx.Stmt, error) {
	return s.prepared(ctx, s.writer, query)
}

// statementKey names a prepared statement of s.statements: its pool and its query.
type statementKey struct {
	pool  *sqlx.DB
	query string
}

// prepared returns query prepared on pool, from s.statements or prepared now and kept there.
func (s *Store) prepared(ctx context.Context, pool *sqlx.DB, query string) (*sqlx.Stmt, error) {
	key := statementKey{pool, query}
	if stmt, ok := s.statements.Load(key); ok {
		return stmt.(*sqlx.Stmt), nil
	}
	stmt, err := pool.PreparexContext(ctx, pool.Rebind(query))
	if err != nil {
		return nil, err
	}
	if prior, loaded := s.statements.LoadOrStore(key, stmt); loaded {
		_ = stmt.Close()
		return prior.(*sqlx.Stmt), nil
	}
	return stmt, nil
}

// InTx runs fn in a transaction on the writer connection. It commits when fn
// returns nil and rolls back when fn returns an error (which InTx returns
// unchanged, so errors.Is still sees the sentinels), panics (the panic
// continues after the rollback) or exits the goroutine (t.FailNow). A failed
// begin or commit returns a "store: begin/commit" error; a commit that breaks
// a uniqueness constraint wraps ErrConflict.
//
// On SQLite transactions are serialised (BEGIN IMMEDIATE on one connection),
// so keep fn short and never call InTx from inside fn: it would deadlock.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	sqlTx, err := s.writer.BeginTxx(ctx, nil)
	if err != nil {
		return wrapError("begin", err)
	}
	finished := false
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit.
			_ = sqlTx.Rollback()
		}
	}()

	tx := &Tx{reads: reads{q: sqlTx, store: s}, tx: sqlTx, store: s}
	err = fn(tx)
	finished = true
	if err != nil {
		if rbErr := sqlTx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, fmt.Errorf("store: rollback: %w", rbErr))
		}
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return wrapError("commit", err)
	}
	tx.prepareLater(ctx)
	return nil
}

// IsUnavailable reports whether err means the database could not be reached or stopped
// answering (a connection lost, refused or timed out, a server shutting down or still a
// standby) rather than refusing the statement: either an error the store already wrapped as
// ErrUnavailable, or a driver error that reached the caller unwrapped. The server answers
// these 503 with Retry-After, never 500.
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || isUnavailable(err)
}

// wrapError prefixes err with "store: op:" and maps driver errors onto the
// sentinels: sql.ErrNoRows becomes ErrNotFound, a unique violation
// ErrConflict (the driver's message stays in the text, not in the chain), an
// outage (isUnavailable, or a BEGIN refused by a server in recovery)
// ErrUnavailable.
func wrapError(op string, err error) error {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: %s: %w", op, ErrNotFound)
	case isUniqueViolation(err):
		return fmt.Errorf("store: %s: %w: %v", op, ErrConflict, err)
	case isUnavailable(err), op == "begin" && isRecoveryAtBegin(err):
		return fmt.Errorf("store: %s: %w: %w", op, ErrUnavailable, err)
	default:
		return fmt.Errorf("store: %s: %w", op, err)
	}
}
