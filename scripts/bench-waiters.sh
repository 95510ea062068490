#!/usr/bin/env bash
# "Waiting at scale": `baton bench --scenario waiters` on the cluster topology
# (a coordinator, a gateway and a worker with the example tools, as separate
# processes on loopback, over Postgres and Redis), once per case FORM:SPREAD:WAKE:
# W long polls (poll), legacy MCP tasks/result SSE streams (sse) or websocket
# watches (ws; always HTTP/1.1, the upgrade), on one
# execution or over 1,000 (many), settled all at once (together) or one
# execution at a time (one-by-one). Each case gets fresh processes, so RSS
# before parking is a clean start.
#
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Redis on
# 127.0.0.1:6379 (BENCH_POSTGRES_URL, BENCH_REDIS_URL override them), and a
# release binary: BATON_BIN, or `$CARGO_TARGET_DIR/release/baton` (built here
# with `cargo build --release --bin baton` when missing).
# Knobs: BENCH_WAITERS (10000), BENCH_CASES (see below), BENCH_RUST_LOG (the roles' log
# filter, warn,baton=info), BENCH_KEEP=1 keeps logs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

PG_ADMIN_URL="${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
REDIS_URL="${BENCH_REDIS_URL:-redis://127.0.0.1:6379/}"
W="${BENCH_WAITERS:-10000}"
CASES="${BENCH_CASES:-poll:one:together poll:many:together poll:many:one-by-one sse:one:together sse:many:one-by-one ws:one:together ws:many:one-by-one}"
BIN="${BATON_BIN:-$CARGO_TARGET_DIR/release/baton}"

say() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'bench-waiters.sh: %s\n' "$*" >&2; exit 1; }
for tool in psql redis-cli curl od base64; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done
if [ ! -x "$BIN" ]; then
  say "cargo build --release --bin baton"
  cargo build --release --bin baton
fi

# W client sockets in the bench and W accepted ones in the gateway, plus
# their own: the soft descriptor limit goes up to the hard one, for this
# shell and every process it starts.
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((W + 1000)) ] || die "open-file limit $(ulimit -n) is too low for W=$W (raise the hard limit)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/baton-waiters.XXXXXX")"
PIDS=()
DBS=()
PREFIXES=()

stop_roles() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  PIDS=()
}

finish() {
  local status=$?
  trap - EXIT INT TERM
  stop_roles
  for db in "${DBS[@]}"; do psql "$PG_ADMIN_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true; done
  for prefix in "${PREFIXES[@]}"; do
    redis-cli -u "$REDIS_URL" --scan --pattern "$prefix*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null || true
  done
  if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$status" != 0 ]; then echo "logs in $WORK" >&2; else rm -rf "$WORK"; fi
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM

# role NAME MARKER ARGS… — starts a role and waits for "MARKER … addr=…"; sets PID and ADDR.
role() {
  local name=$1 marker=$2
  shift 2
  RUST_LOG="${BENCH_RUST_LOG:-warn,baton=info}" "$BIN" "$@" >/dev/null 2>"$RUN/$name.log" &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 1 300); do
    ADDR="$(grep -m1 "$marker" "$RUN/$name.log" | sed -n 's/.*addr=\([^ ]*\).*/\1/p' || true)"
    [ -n "$ADDR" ] && return 0
    kill -0 "$PID" 2>/dev/null || die "$name exited; see $RUN/$name.log"
    sleep 0.1
  done
  die "$name did not start; see $RUN/$name.log"
}

for CASE in $CASES; do
  IFS=: read -r FORM SPREAD WAKE <<<"$CASE"
  RUN="$WORK/$FORM-$SPREAD-$WAKE"
  mkdir -p "$RUN"
  SUFFIX="$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  DB="bt_waiters_$SUFFIX"
  PREFIX="bt_waiters_$SUFFIX"
  DBS+=("$DB")
  PREFIXES+=("$PREFIX")
  psql "$PG_ADMIN_URL" -qc "CREATE DATABASE $DB" >/dev/null
  CONFIG="$RUN/baton.yaml"
  cat >"$CONFIG" <<EOF
features:
  native_mcp_tasks: true
  mcp_tasks_compatibility: true
  mcp_tasks_principal_concurrency: 1000000
  mcp_tasks_project_concurrency: 1000000
  mcp_tasks_organization_concurrency: 1000000
  mcp_tasks_backlog: 1000000
  mcp_tasks_retained_payload_bytes: 17179869184
security:
  execution_payload_keys:
    - {id: k1, key: "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"}
database: {url: "${PG_ADMIN_URL%/*}/$DB", max_connections: 16}
redis: {url: "$REDIS_URL", key_prefix: "$PREFIX"}
# 1,000 sleeps at once in the many spread.
worker: {capacity: 1100}
# One bench token parks every waiter.
gateway: {max_waits_per_principal: 100000, max_waits: 100000}
EOF
  "$BIN" migrate --config "$CONFIG" >/dev/null
  admin() { "$BIN" admin --config "$CONFIG" "$@"; }
  field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }
  ORG="$(admin create-org --name waiters | field id)"
  PROJECT="$(admin create-project --org "$ORG" --name waiters | field id)"
  GATEWAY="$(admin create-gateway --project "$PROJECT" --name waiters | field id)"
  TOKEN="$(admin create-end-user-token --gateway "$GATEWAY" --user bench@example.com | field token)"
  WORKER_TOKEN="$(admin create-worker-token --project "$PROJECT" | field token)"

  say "$CASE: coordinator, gateway, worker"
  role coordinator "coordinator listening" coordinator --config "$CONFIG" --listen 127.0.0.1:0
  CO_PID=$PID
  CO_URL="http://$ADDR"
  BATON_GATEWAY__COORDINATOR_URL="$CO_URL" role gateway "gateway listening" gateway --config "$CONFIG" --listen 127.0.0.1:0
  GW_PID=$PID
  GW_URL="http://$ADDR"
  BATON_WORKER__COORDINATOR_URL="$CO_URL" BATON_WORKER__TOKEN="$WORKER_TOKEN" BATON_WORKER__METRICS_LISTEN=127.0.0.1:0 \
    role worker "worker metrics listening" worker --config "$CONFIG" --examples
  for _ in $(seq 1 300); do grep -q "registered" "$RUN/worker.log" && break; sleep 0.1; done
  for _ in $(seq 1 300); do curl -fsS "$GW_URL/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

  say "baton bench --scenario waiters --wait-form $FORM --spread $SPREAD --wake $WAKE (W=$W)"
  BATON_BENCH_TOKEN="$TOKEN" "$BIN" bench --http-url "$GW_URL" --org "$ORG" --project "$PROJECT" --gateway "$GATEWAY" \
    --scenario waiters --waiters "$W" --wait-form "$FORM" --spread "$SPREAD" --wake "$WAKE" -c 64 --max-seconds 300 \
    --pids "gateway=$GW_PID,coordinator=$CO_PID" "$@"
  stop_roles
done
