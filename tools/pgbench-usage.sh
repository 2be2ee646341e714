#!/bin/sh
# The raw PostgreSQL limit for usage ingest, printed beside BenchmarkUsageLoad's figures by
# `make bench`: pgbench (-M prepared, 16 clients) inserting into a table shaped like
# usage_events (same columns, primary key (project_id, event_id), no rollups), with
#   single/new        one-row INSERT … ON CONFLICT DO NOTHING of a new event per transaction;
#   single/duplicate  the same insert of an event already stored (10,000 stored, drawn at random);
#   batch100/new      100-row INSERT … SELECT … ON CONFLICT DO NOTHING per transaction.
# Each run lasts GATEHOUSE_BENCH_DURATION seconds (a bare number; default 5). It works in a
# scratch schema of the database of GATEHOUSE_TEST_POSTGRES_URL (or $1), dropped at the end.
# Pin it like the server for comparable figures, e.g. `taskset -c 0 tools/pgbench-usage.sh`.
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
cleanup() {
	psql -q "$url" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

psql -q -v ON_ERROR_STOP=1 "$url" >/dev/null <<SQL
CREATE SCHEMA $schema;
CREATE TABLE $schema.usage_events_raw (
    project_id     TEXT COLLATE "C" NOT NULL,
    event_id       TEXT COLLATE "C" NOT NULL,
    id             TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    meter          TEXT NOT NULL,
    quantity       DOUBLE PRECISION NOT NULL CHECK (quantity >= 0),
    occurred_at    TIMESTAMPTZ NOT NULL,
    received_at    TIMESTAMPTZ NOT NULL,
    properties     JSONB,
    PRIMARY KEY (project_id, event_id)
);
INSERT INTO $schema.usage_events_raw
SELECT 'prj_bench', 'dup-' || g, 'uev_dup' || g, 'env_bench', 'load_' || (g % 5000), 'api_call', 1, now(), now(), NULL
FROM generate_series(1, 10000) g;
SQL

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

run() { # name, rows per transaction
	tps=$(PGOPTIONS="-c search_path=$schema" pgbench -n -M prepared -c "$clients" -j 2 -T "$secs" -f "$dir/$1.sql" "$url" 2>&1 |
		awk '/^tps = / { print $3; exit }')
	awk -v n="$1" -v t="$tps" -v r="$2" -v c="$clients" -v s="$secs" \
		'BEGIN { printf "pgbench raw limit %-17s %10.0f events/s  (%.0f tps x %d rows, -M prepared -c%d, %ds)\n", n, t * r, t, r, c, s }'
}
run single-new 1
run single-duplicate 1
run batch100-new 100
