#!/usr/bin/env bash
# Names what Postgres does for one execution: runs the Baton half of the side-by-side
# benchmark (BENCH_DIR, default ../shared/bench) against a private Postgres 15 that loads
# pg_stat_statements, resets the statistics once the warm-up run is over, and prints per
# execution of the measured run:
#   - every statement: calls, rows, WAL records and bytes, and the milliseconds Postgres
#     spent planning and executing it (timings depend on the build and the load);
#   - every table: rows inserted, updated (and how many of those were HOT), deleted, and the
#     index entries those writes touched (each insert and each non-HOT update writes one
#     entry in every index of the table);
#   - commits, WAL bytes and fsyncs of the database as a whole.
# Counts do not depend on the build, so a debug binary will do; timings would.
#   MODE=mcp C=1 N=1000 scripts/count-per-execution.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-../shared/bench}
WORK=${WORK:-/tmp/baton-count}; PORT=${PORT:-55434}
MODE=${MODE:-mcp}; C=${C:-1}; N=${N:-1000}
BIN=${BATON_BIN:-${CARGO_TARGET_DIR:-target}/debug/baton}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
[ -x "$BIN" ] || { echo "no baton binary at $BIN (cargo build, or set BATON_BIN)" >&2; exit 1; }
mkdir -p "$WORK/node"; chmod 777 "$WORK"
if [ ! -f "$WORK/pgdata/PG_VERSION" ]; then
  mkdir -p "$WORK/pgdata"; chown postgres "$WORK/pgdata"
  su postgres -c "$PGBIN/initdb -D $WORK/pgdata -A trust -U postgres" >/dev/null
  cat >> "$WORK/pgdata/postgresql.conf" <<CONF
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$WORK'
shared_buffers = 512MB
max_connections = 200
synchronous_commit = on
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.max = 2000
pg_stat_statements.track_planning = on
CONF
fi
pg_isready -h "$WORK" -p "$PORT" -q || su postgres -c "$PGBIN/pg_ctl -D $WORK/pgdata -l $WORK/pg.log -w start" >/dev/null
q() { psql -h "$WORK" -p "$PORT" -U postgres -d "${2:-postgres}" -AtF $'\t' -c "$1"; }
q "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null

out=$WORK/bench.txt
BATON_BIN=$BIN PB_PGHOST=$WORK PB_PGPORT=$PORT NODE_WORK=$WORK/node OUT=$WORK/bench.jsonl \
  MODES=$MODE RUNS=1 C=$C N=$N python3 "$BENCH_DIR/baton/run_baton.py" > "$out" 2>&1 &
bench=$!
until grep -q warmup "$out" 2>/dev/null; do kill -0 $bench; sleep 0.2; done
db=baton_peer
TABLES="SELECT t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del,
          (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) FROM pg_stat_user_tables t ORDER BY 1"
q "SELECT pg_stat_statements_reset()" >/dev/null
q "$TABLES" $db > "$WORK/tables.before"
wait $bench
q "$TABLES" $db > "$WORK/tables.after"
grep -E '^\{"run"' "$out" | tail -1
grep SUMMARY "$out"

echo; echo "Statements, per execution (calls < 0.005 per execution left out):"
echo "calls  rows  wal_records  wal_bytes  plan_ms  exec_ms  statement"
q "SELECT round(s.calls::numeric / $N, 3) AS calls, round(s.rows::numeric / $N, 2) AS rows,
          round(s.wal_records::numeric / $N, 2) AS wal_records, round(s.wal_bytes::numeric / $N) AS wal_bytes,
          round((s.total_plan_time / $N)::numeric, 3) AS plan_ms, round((s.total_exec_time / $N)::numeric, 3) AS exec_ms,
          left(regexp_replace(s.query, '\s+', ' ', 'g'), 150) AS statement
     FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
    WHERE d.datname = '$db' AND s.calls::numeric / $N >= 0.005
    ORDER BY s.calls DESC, s.wal_bytes DESC" | column -t -s $'\t'

echo; echo "Tables, per execution (index entries = indexes x (inserts + non-HOT updates)):"
python3 - "$WORK/tables.before" "$WORK/tables.after" "$N" <<'PY'
import sys
def read(path):
    return {f[0]: [int(x) for x in f[1:]] for f in (l.rstrip("\n").split("\t") for l in open(path)) if len(f) == 6}
before, after, n = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
print(f"{'table':32} {'ins':>6} {'upd':>6} {'hot':>6} {'del':>6} {'indexes':>7} {'entries':>7}")
rows = []
for name, a in after.items():
    b = before.get(name, [0, 0, 0, 0, a[4]])
    ins, upd, hot, dele = (a[k] - b[k] for k in range(4))
    if ins + upd + dele:
        rows.append((a[4] * (ins + upd - hot) / n, name, ins / n, upd / n, hot / n, dele / n, a[4]))
for entries, name, ins, upd, hot, dele, idx in sorted(rows, reverse=True):
    print(f"{name:32} {ins:6.2f} {upd:6.2f} {hot:6.2f} {dele:6.2f} {idx:7d} {entries:7.2f}")
PY
