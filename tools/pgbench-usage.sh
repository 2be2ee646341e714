#!/bin/sh
# The raw PostgreSQL limit for usage ingest, printed beside BenchmarkUsageLoad's figures by
# `make bench`: pgbench (-M prepared, 16 clients) inserting into a table shaped like
# usage_events (same columns, primary key (project_id, event_id), no rollups), with
#   single/new        one-row INSERT … ON CONFLICT DO NOTHING of a new event per transaction;
#   single/duplicate  the same insert of an event already stored (10,000 stored, drawn at random);
#   batch100/new      100-row INSERT … SELECT … ON CONFLICT DO NOTHING per transaction;
# and the limit of the durable shape every new event has in Gatehouse on PostgreSQL, the two
# writes no hot-path change removes (the rollups left out): its id in a table shaped like
# usage_event_ids (primary key, BRIN index on received_at) and the event in one partitioned
# like usage_events (by month of received_at, subject index), in one statement, as ingest
# writes them (migrations/postgres/0032_usage_partitions.up.sql):
#   durable-single-new       one new event per transaction;
#   durable-batch100-new     100 new events per transaction.
# Each run lasts GATEHOUSE_BENCH_DURATION seconds (a bare number; default 5). It works in a
# scratch schema of the database of GATEHOUSE_TEST_POSTGRES_URL (or $1), dropped at the end.
# Pin it like the server for comparable figures, e.g. `taskset -c 0 tools/pgbench-usage.sh`.
# With PGBENCH_USAGE_SETUP_ONLY=1 it creates the scratch tables, prints the schema's name and
# exits without running pgbench or dropping the schema: store.TestPgbenchScratchTables compares
# its tables with the migrated ones, since the DDL below is a copy kept in step by hand.
set -eu
url=${1:-${GATEHOUSE_TEST_POSTGRES_URL:-}}
if [ -z "$url" ]; then
	echo "pgbench-usage: set GATEHOUSE_TEST_POSTGRES_URL (or pass a URL)" >&2
	exit 2
fi
secs=${GATEHOUSE_BENCH_DURATION:-5}
clients=16
schema=gh_pgbench_$$
dir=$(mktemp -d)
setup_only=${PGBENCH_USAGE_SETUP_ONLY:-}
keep= # set once the setup-only schema is complete: it is then the caller's to drop
cleanup() {
	if [ -z "$keep" ]; then
		psql -q "$url" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

psql -q -v ON_ERROR_STOP=1 "$url" >/dev/null <<SQL
CREATE SCHEMA $schema;
CREATE TABLE $schema.usage_events_raw (
    project_id     TEXT COLLATE "C" NOT NULL,
    event_id       TEXT COLLATE "C" NOT NULL,
    id             TEXT COLLATE "C" NOT NULL,
    environment_id TEXT COLLATE "C" NOT NULL,
    subject_id     TEXT COLLATE "C" NOT NULL,
    meter          TEXT COLLATE "C" NOT NULL,
    quantity       DOUBLE PRECISION NOT NULL CHECK (quantity >= 0),
    occurred_at    TIMESTAMPTZ NOT NULL,
    received_at    TIMESTAMPTZ NOT NULL,
    properties     TEXT,
    PRIMARY KEY (project_id, event_id)
);
INSERT INTO $schema.usage_events_raw
SELECT 'prj_bench', 'dup-' || g, 'uev_dup' || g, 'env_bench', 'load_' || (g % 5000), 'api_call', 1, now(), now(), NULL
FROM generate_series(1, 10000) g;
CREATE TABLE $schema.usage_event_ids (
    project_id  TEXT COLLATE "C" NOT NULL,
    event_id    TEXT COLLATE "C" NOT NULL,
    id          TEXT COLLATE "C" NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (project_id, event_id)
);
CREATE INDEX ON $schema.usage_event_ids USING brin (received_at);
CREATE TABLE $schema.usage_events (
    project_id     TEXT COLLATE "C" NOT NULL,
    event_id       TEXT COLLATE "C" NOT NULL,
    id             TEXT COLLATE "C" NOT NULL,
    environment_id TEXT COLLATE "C" NOT NULL,
    subject_id     TEXT COLLATE "C" NOT NULL,
    meter          TEXT COLLATE "C" NOT NULL,
    quantity       DOUBLE PRECISION NOT NULL CHECK (quantity >= 0),
    occurred_at    TIMESTAMPTZ NOT NULL,
    received_at    TIMESTAMPTZ NOT NULL,
    properties     TEXT
) PARTITION BY RANGE (received_at);
CREATE INDEX ON $schema.usage_events (project_id, subject_id, occurred_at);
CREATE TABLE $schema.usage_events_default PARTITION OF $schema.usage_events DEFAULT;
SQL
# This month's partition (UTC), as the maintenance creates it: a run lasts seconds.
bounds=$(psql -qAt -F ' ' "$url" -c "SELECT to_char(m, 'YYYY_MM'), to_char(m, 'YYYY-MM-DD'), to_char(m + interval '1 month', 'YYYY-MM-DD')
	FROM (SELECT date_trunc('month', now() AT TIME ZONE 'UTC') AS m) t")
set -- $bounds
psql -q -v ON_ERROR_STOP=1 "$url" >/dev/null <<SQL
CREATE TABLE $schema.usage_events_$1 PARTITION OF $schema.usage_events
    FOR VALUES FROM ('$2 00:00:00+00') TO ('$3 00:00:00+00');
SQL
if [ -n "$setup_only" ]; then
	keep=1
	echo "$schema"
	exit 0
fi

cat >"$dir/single-new.sql" <<'SQL'
\set e random(1, 9000000000000000000)
\set s :e % 5000
INSERT INTO usage_events_raw (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
VALUES ('prj_bench', :e, 'uev_' || :e, 'env_bench', 'load_' || :s, 'api_call', 1, now(), now(), NULL)
ON CONFLICT (project_id, event_id) DO NOTHING;
SQL
cat >"$dir/single-duplicate.sql" <<'SQL'
\set e random(1, 10000)
\set s :e % 5000
INSERT INTO usage_events_raw (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
VALUES ('prj_bench', 'dup-' || :e, 'uev_x' || :e, 'env_bench', 'load_' || :s, 'api_call', 1, now(), now(), NULL)
ON CONFLICT (project_id, event_id) DO NOTHING;
SQL
cat >"$dir/batch100-new.sql" <<'SQL'
\set e random(1, 90000000000000000)
\set b :e * 100
\set s :e % 5000
INSERT INTO usage_events_raw (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
SELECT 'prj_bench', (:b::bigint + g)::text, 'uev_' || (:b::bigint + g), 'env_bench', 'load_' || ((:s::int + g) % 5000), 'api_call', 1, now(), now(), NULL
FROM generate_series(1, 100) g
ON CONFLICT (project_id, event_id) DO NOTHING;
SQL

# The durable writes, as the ingest statement makes them: the ids first (the replay detection),
# then the events they inserted.
cat >"$dir/durable-single-new.sql" <<'SQL'
\set e random(1, 9000000000000000000)
\set s :e % 5000
WITH input AS (
	SELECT 'prj_bench'::text AS project_id, :e::text AS event_id, 'uev_' || :e AS id, now() AS received_at
), ids AS (
	INSERT INTO usage_event_ids (project_id, event_id, id, received_at)
	SELECT project_id, event_id, id, received_at FROM input
	ON CONFLICT (project_id, event_id) DO NOTHING
	RETURNING project_id, event_id, id, received_at
)
INSERT INTO usage_events (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
SELECT project_id, event_id, id, 'env_bench', 'load_' || :s, 'api_call', 1, received_at, received_at, NULL FROM ids;
SQL
cat >"$dir/durable-batch100-new.sql" <<'SQL'
\set e random(1, 90000000000000000)
\set b :e * 100
\set s :e % 5000
WITH input AS (
	SELECT 'prj_bench'::text AS project_id, (:b::bigint + g)::text AS event_id, 'uev_' || (:b::bigint + g) AS id,
		'load_' || ((:s::int + g) % 5000) AS subject_id, now() AS received_at
	FROM generate_series(1, 100) g
), ids AS (
	INSERT INTO usage_event_ids (project_id, event_id, id, received_at)
	SELECT project_id, event_id, id, received_at FROM input ORDER BY project_id, event_id
	ON CONFLICT (project_id, event_id) DO NOTHING
	RETURNING id
)
INSERT INTO usage_events (project_id, event_id, id, environment_id, subject_id, meter, quantity, occurred_at, received_at, properties)
SELECT project_id, event_id, id, 'env_bench', subject_id, 'api_call', 1, received_at, received_at, NULL
FROM input JOIN ids USING (id);
SQL

run() { # name, rows per transaction
	tps=$(PGOPTIONS="-c search_path=$schema" pgbench -n -M prepared -c "$clients" -j 2 -T "$secs" -f "$dir/$1.sql" "$url" 2>&1 |
		awk '/^tps = / { print $3; exit }')
	awk -v n="$1" -v t="$tps" -v r="$2" -v c="$clients" -v s="$secs" \
		'BEGIN { printf "pgbench raw limit %-17s %10.0f events/s  (%.0f tps x %d rows, -M prepared -c%d, %ds)\n", n, t * r, t, r, c, s }'
}
run single-new 1
run single-duplicate 1
run batch100-new 100
run durable-single-new 1
run durable-batch100-new 100
