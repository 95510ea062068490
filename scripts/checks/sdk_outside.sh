#!/usr/bin/env bash
# The worker SDK as a tool author gets it: a new crate outside this repository
# (`cargo new` in a temp dir) depends on `baton-worker` as a git dependency
# pinned to this repository's HEAD commit (a release pins a tag: same
# resolution, a different ref), serves one typed tool to a real
# `baton dev --no-examples`, and the tool is called over REST. It catches what
# the in-workspace example cannot: a dependency that only resolves inside the
# workspace, a build script that needs a file or program the git checkout
# lacks, an item the example reaches that is not public.
#
# What is tested is the committed HEAD: uncommitted edits to worker/ or proto/
# are not in it. The crate is built in CARGO_TARGET_DIR (shared with the
# workspace so the registry crates it has in common with it are reused) and
# starts from the workspace's Cargo.lock for the same reason; set
# SDK_OUTSIDE_FRESH_LOCK=1 to resolve every version afresh, as a new author's
# crate does.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/mcp/lib.sh
repo="$PWD"

rev=$(git rev-parse HEAD)
# A worktree's own .git is a file; the common git directory holds every commit.
url="file://$(cd "$(git rev-parse --git-common-dir)" && pwd)"
if ! git diff --quiet HEAD -- worker proto Cargo.toml; then
  echo "note: worker/, proto/ or Cargo.toml have uncommitted changes; this checks HEAD ($rev)"
fi

work=$(mktemp -d)
worker_pid=
stop_worker() {
  if [ -n "$worker_pid" ]; then
    kill "$worker_pid" 2>/dev/null || true
    wait "$worker_pid" 2>/dev/null || true
    worker_pid=
  fi
}
trap 'stop_worker; stop_dev; rm -rf "$work"' EXIT

passed=0
failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
finish() {
  [ "$failed" -eq 0 ] || { echo "baton dev log:"; tail -n 40 "$work/dev.log" 2>/dev/null || true
    echo "adder log:"; tail -n 40 "$work/adder.log" 2>/dev/null || true; }
  echo "sdk-outside: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# The tool author's crate: the commands docs/writing-tools.md shows ("In your
# own repository"), with --rev for --tag.
(
  cd "$work"
  cargo new --quiet --vcs none adder
  cd adder
  cargo add --quiet baton-worker --git "$url" --rev "$rev"
  cargo add --quiet serde --features derive
  cargo add --quiet tokio --features macros,rt-multi-thread
) >"$work/new.log" 2>&1 || { cat "$work/new.log"; fail "cargo new + cargo add"; finish; }
crate="$work/adder"
[ "${SDK_OUTSIDE_FRESH_LOCK:-0}" = 1 ] || cp "$repo/Cargo.lock" "$crate/Cargo.lock"
cat >"$crate/src/main.rs" <<'RUST'
use baton_worker::schemars::JsonSchema;
use baton_worker::{Context, Failure, Json, ToolSpec, TypedTool, typed};
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "baton_worker::schemars")]
struct AddInput {
    a: i64,
    b: i64,
}

#[derive(Serialize, JsonSchema)]
#[schemars(crate = "baton_worker::schemars")]
struct Sum {
    sum: i64,
}

struct Add;

impl TypedTool for Add {
    type Input = AddInput;
    type Output = Json<Sum>;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("Adder.Add", "Adder", "0.1.0").description("Adds two integers.")
    }

    async fn call(&self, input: AddInput, _cx: Context) -> Result<Json<Sum>, Failure> {
        match input.a.checked_add(input.b) {
            Some(sum) => Ok(Json(Sum { sum })),
            None => Err(Failure::error("the sum does not fit in 64 bits")),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), baton_worker::serve::ServeError> {
    baton_worker::serve(vec![typed(Add)]).await
}
RUST

started=$(date +%s)
if cargo build --quiet --manifest-path "$crate/Cargo.toml" >"$work/build.log" 2>&1; then
  pass "built a crate outside the repository on baton-worker (git, rev $rev) in $(($(date +%s) - started)) s"
else
  cat "$work/build.log"
  fail "building the crate outside the repository"
  finish
fi
adder="${CARGO_TARGET_DIR:-$crate/target}/debug/adder"

[ -x "$BATON_BIN" ] || { fail "no baton binary at $BATON_BIN (cargo build --workspace first)"; finish; }
"$BATON_BIN" dev --no-examples --data-dir "$work/data" --listen 127.0.0.1:0 >"$work/dev.log" 2>&1 &
DEV_PID=$!
DEV_JSON="$work/data/dev.json"
for _ in $(seq 600); do
  [ -s "$DEV_JSON" ] && break
  kill -0 "$DEV_PID" 2>/dev/null || break
  sleep 0.1
done
[ -s "$DEV_JSON" ] || { fail "baton dev did not write dev.json"; finish; }

BATON_WORKER__COORDINATOR_URL=$(dev_field coordinator_url) BATON_WORKER__TOKEN=$(dev_field worker_token) \
  "$adder" >"$work/adder.log" 2>&1 &
worker_pid=$!

rest=$(dev_field rest_base)
token=$(dev_field credentials.end_user.token)
gateway=$(dev_field gateway_id)
start() {
  curl -s -X POST "$rest/tool-executions" -H "Authorization: Bearer $token" -H "Content-Type: application/json" \
    -d "{\"gateway_id\": \"$gateway\", \"tool_name\": \"Adder.Add\", \"input\": $1}"
}
# The worker registers its tool a moment after it starts.
id=
for _ in $(seq 100); do
  id=$(start '{"a": 40, "b": 2}' | python3 -c 'import json,sys; print(json.load(sys.stdin).get("execution_id", ""))' || true)
  [ -n "$id" ] && break
  kill -0 "$worker_pid" 2>/dev/null || break
  sleep 0.2
done
if [ -z "$id" ]; then
  fail "Adder.Add was never served (did the worker register?)"
  finish
fi
pass "the worker registered Adder.Add and a REST start was accepted ($id)"

for _ in $(seq 12); do
  status=$(curl -s "$rest/tool-executions/$id?wait_ms=5000" -H "Authorization: Bearer $token" |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("status", ""))')
  case "$status" in completed | failed | cancelled) break ;; esac
done
result=$(curl -s "$rest/tool-executions/$id/result" -H "Authorization: Bearer $token")
if [ "$status" = completed ] && printf '%s' "$result" | python3 -c '
import json, sys
assert json.load(sys.stdin)["result"]["structuredContent"] == {"sum": 42}'; then
  pass "Adder.Add(40, 2) completed with structuredContent {\"sum\": 42}"
else
  fail "Adder.Add(40, 2): status $status, result $result"
fi

# Input the generated schema refuses never reaches the tool.
bad=$(start '{"a": "forty", "b": 2}')
if printf '%s' "$bad" | python3 -c '
import json, sys
e = json.load(sys.stdin)["error"]
assert e["code"] == "invalid_input" and "/a" in e["message"], e'; then
  pass "input against the generated schema is refused (invalid_input at /a)"
else
  fail "a string for an integer: $bad"
fi

finish
