#!/usr/bin/env bash
# Reproduces the issue #8 benchmark on one machine: builds the release binary,
# creates a fresh Postgres database and Redis key prefix, starts the cluster
# topology on loopback (1 coordinator, 1 gateway, 1 worker with the example
# tools, and a second gateway with a zero foreground budget for mcp-task), runs
# `baton bench --scenario all` against it and prints its tables, then stops
# everything and drops the database.
#
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Redis on
# 127.0.0.1:6379; BENCH_POSTGRES_URL and BENCH_REDIS_URL override them.
# Knobs: BENCH_N (executions per scenario, 5000), BENCH_C (concurrency, 64),
# BENCH_WAITERS (parked long polls, 1000), BENCH_WORKER_CAPACITY (256), BENCH_SCENARIO (all),
# BENCH_RUST_LOG (log filter of the roles, info), BENCH_KEEP=1 keeps the logs.
# Extra arguments are passed to `baton bench`; BATON_… variables reach the roles.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

PG_ADMIN_URL="${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379/}"
N="${BENCH_N:-5000}"
C="${BENCH_C:-64}"
W="${BENCH_WAITERS:-1000}"
CAPACITY="${BENCH_WORKER_CAPACITY:-256}"
ROLE_LOG="${BENCH_RUST_LOG:-info}"
# Generous admission bounds: the benchmark measures the engine, not rejections.
BOUND=1000000
PAYLOAD_BOUND=$((1 << 34))

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'bench.sh: %s\n' "$*" >&2; exit 1; }
for tool in psql redis-cli curl od base64; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done

step "cargo build --release --workspace"
cargo build --release --workspace
BIN="$CARGO_TARGET_DIR/release/baton"
[ -x "$BIN" ] || die "no binary at $BIN"

SUFFIX="$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
DB="bt_bench_$SUFFIX"
PREFIX="bt_bench_$SUFFIX"
DB_URL="${PG_ADMIN_URL%/*}/$DB"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")"
ROLE_PIDS=()
DB_CREATED=0

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  step "stopping the cluster"
  for pid in "${ROLE_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${ROLE_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${ROLE_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [ "$DB_CREATED" = 1 ]; then
    psql "$PG_ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null || true
    echo "dropped database $DB" >&2
  fi
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null || true
  if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$status" != 0 ]; then
    echo "logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Up to W client connections and as many gateway streams: lift the soft limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

step "fresh database $DB and Redis prefix $PREFIX"
psql "$PG_ADMIN_URL" -qc "CREATE DATABASE $DB" >/dev/null
DB_CREATED=1
echo "synchronous_commit = $(psql "$DB_URL" -Atc 'SHOW synchronous_commit')"

CONFIG="$WORK/baton.yaml"
cat >"$CONFIG" <<EOF
features:
  native_mcp_tasks: true
  mcp_tasks_compatibility: true
  mcp_tasks_principal_concurrency: $BOUND
  mcp_tasks_project_concurrency: $BOUND
  mcp_tasks_organization_concurrency: $BOUND
  mcp_tasks_backlog: $BOUND
  mcp_tasks_retained_payload_bytes: $PAYLOAD_BOUND
security:
  execution_payload_keys:
    - {id: k1, key: "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"}
database: {url: "$DB_URL", max_connections: 32}
redis: {url: "$REDIS_URL", key_prefix: "$PREFIX"}
worker: {capacity: $CAPACITY}
# One bench token parks every waiter: lift the per-credential wait cap.
gateway: {max_waits_per_principal: 100000, max_waits: 100000}
# The webhooks scenario's receiver listens on loopback.
webhooks: {allow_loopback_targets: true}
EOF
echo "admission bounds: principal, project and organization concurrency $BOUND, backlog $BOUND, retained payload $PAYLOAD_BOUND bytes"
echo "worker capacity $CAPACITY; roles log at '$ROLE_LOG'"

step "baton migrate and identity"
"$BIN" migrate --config "$CONFIG" >/dev/null
admin() { "$BIN" admin --config "$CONFIG" "$@"; }
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
ORG="$(admin create-org --name bench | field id)"
PROJECT="$(admin create-project --org "$ORG" --name bench | field id)"
GATEWAY="$(admin create-gateway --project "$PROJECT" --name bench | field id)"
USER_TOKEN="$(admin create-end-user-token --gateway "$GATEWAY" --user bench@example.com | field token)"
WORKER_TOKEN="$(admin create-worker-token --project "$PROJECT" | field token)"
# The webhooks scenario registers its receiver with an admin key.
ADMIN_KEY="$(admin create-api-key --project "$PROJECT" --role admin | field token)"
[ -n "$ORG" ] && [ -n "$PROJECT" ] && [ -n "$GATEWAY" ] && [ -n "$USER_TOKEN" ] && [ -n "$WORKER_TOKEN" ] ||
  die "baton admin did not print the expected identity"

# start_role NAME MARKER ARGS… — starts a role, waits for its "MARKER … addr=…"
# log line, and sets ROLE_PID and ROLE_ADDR.
start_role() {
  local name=$1 marker=$2
  shift 2
  RUST_LOG="$ROLE_LOG" "$BIN" "$@" >/dev/null 2>"$WORK/$name.log" &
  ROLE_PID=$!
  ROLE_PIDS+=("$ROLE_PID")
  ROLE_ADDR=""
  for _ in $(seq 1 300); do
    ROLE_ADDR="$(grep -m1 "$marker" "$WORK/$name.log" | sed -n 's/.*addr=\([^ ]*\).*/\1/p' || true)"
    [ -n "$ROLE_ADDR" ] && return 0
    kill -0 "$ROLE_PID" 2>/dev/null || die "$name exited; see $WORK/$name.log"
    sleep 0.1
  done
  die "$name did not log '$marker' within 30 s; see $WORK/$name.log"
}

step "starting coordinator, gateway and worker on loopback"
start_role coordinator "coordinator listening" coordinator --config "$CONFIG" --listen 127.0.0.1:0
CO_PID=$ROLE_PID
CO_URL="http://$ROLE_ADDR"
BATON_GATEWAY__COORDINATOR_URL="$CO_URL" \
  start_role gateway "gateway listening" gateway --config "$CONFIG" --listen 127.0.0.1:0
GW_PID=$ROLE_PID
GW_URL="http://$ROLE_ADDR"
BATON_WORKER__COORDINATOR_URL="$CO_URL" BATON_WORKER__TOKEN="$WORKER_TOKEN" \
  BATON_WORKER__METRICS_LISTEN=127.0.0.1:0 \
  start_role worker "worker metrics listening" worker --config "$CONFIG" --examples
WK_PID=$ROLE_PID
# A second gateway that hands every tools/call over as a task at once: Demo.Echo
# beats the default 10 s foreground budget, so without it mcp-task would
# measure foreground calls.
BATON_GATEWAY__COORDINATOR_URL="$CO_URL" BATON_GATEWAY__FOREGROUND_BUDGET_MS=0 \
  start_role task-gateway "gateway listening" gateway --config "$CONFIG" --listen 127.0.0.1:0
TASK_GW_URL="http://$ROLE_ADDR"
for _ in $(seq 1 300); do
  grep -q "registered" "$WORK/worker.log" && break
  kill -0 "$WK_PID" 2>/dev/null || die "worker exited; see $WORK/worker.log"
  sleep 0.1
done
grep -q "registered" "$WORK/worker.log" || die "worker did not register; see $WORK/worker.log"
for _ in $(seq 1 300); do
  curl -fsS "$GW_URL/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$GW_URL/readyz" >/dev/null || die "gateway not ready at $GW_URL/readyz"
echo "coordinator $CO_URL (pid $CO_PID), gateway $GW_URL (pid $GW_PID), task gateway $TASK_GW_URL, worker pid $WK_PID"

# Postgres and Redis count too when they run on this machine: the postmaster's
# pid covers every backend (the bench sums a process tree).
PIDS="gateway=$GW_PID,coordinator=$CO_PID,worker=$WK_PID"
PG_DATA="$(psql "$DB_URL" -Atc 'SHOW data_directory' 2>/dev/null || true)"
PG_PID="$(head -1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)"
[ -n "$PG_PID" ] && [ -e "/proc/$PG_PID" ] && PIDS="$PIDS,postgres=$PG_PID"
REDIS_PID="$(redis-cli -u "$REDIS_URL" info server 2>/dev/null | sed -n 's/^process_id:\([0-9]*\).*/\1/p')"
[ -n "$REDIS_PID" ] && [ -e "/proc/$REDIS_PID" ] && PIDS="$PIDS,redis=$REDIS_PID"

step "baton bench --scenario all (N=$N, C=$C, W=$W)"
BATON_BENCH_TOKEN="$USER_TOKEN" BATON_BENCH_ADMIN_KEY="$ADMIN_KEY" "$BIN" bench \
  --http-url "$GW_URL" --task-http-url "$TASK_GW_URL" --org "$ORG" --project "$PROJECT" --gateway "$GATEWAY" \
  --scenario "${BENCH_SCENARIO:-all}" -n "$N" -c "$C" --waiters "$W" \
  --database-url "$DB_URL" --pids "$PIDS" "$@"
