#!/usr/bin/env bash
# Published MCP clients against a real `baton dev` (issue #6, "Done when"):
#   python mcp==1.30.0            2025-11-25 tasks: task call, poll, tasks/result, tasks/list, cancel (running, terminal)
#   fastmcp[tasks]==4.1.4         2026-07-28 tasks extension, including cancel
#   @modelcontextprotocol/sdk@1.32.2   callToolStream with a task
#   python mcp==1.30.0, no tasks  the compatibility handle, Baton_GetToolExecution, the same execution over REST
#   python mcp==1.30.0, saturated  over the admission bound: -32025 with scope and retryAfterMs, session intact
# Each test prints PASS/FAIL lines per case (tests/mcp/); this script counts them.
# Clients are installed once under $BATON_TOOLS_DIR from PyPI and npm.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/mcp/lib.sh

venv_dir "$BATON_TOOLS_DIR/venv-mcp" "mcp==1.30.0"
venv_dir "$BATON_TOOLS_DIR/venv-fastmcp" "fastmcp[tasks]==4.1.4"
node_dir="$BATON_TOOLS_DIR/mcp-node"
npm_dir "$node_dir" "sdk-1.32.2+$(node_package)" "@modelcontextprotocol/sdk@1.32.2" "$(node_package)"
node=$(node22 "$node_dir")
# ESM resolves packages next to the importing file: run the script from there.
cp tests/mcp/ts_sdk_v1.mjs "$node_dir/"

work=$(mktemp -d)
trap 'stop_dev; rm -rf "$work"' EXIT
start_dev "$work"

export PYTHONPATH="$PWD/tests/mcp" PYTHONDONTWRITEBYTECODE=1
# The suites share the dev user but not their executions; they run side by side
# because two of them wait out the 10 s foreground budget.
SUITES=(python_mcp_v1 python_fastmcp_v2 ts_sdk_v1 python_compat)
# Run alone afterwards: it fills a user's admission bound with long executions,
# which hold worker slots the others would wait for.
LAST=python_mcp_saturation
# Nothing here may hang CI: a suite still running after 5 minutes is stopped.
run_suite() {
  case "$1" in
    python_mcp_v1) timeout 300 "$BATON_TOOLS_DIR/venv-mcp/bin/python" tests/mcp/python_mcp_v1.py "$DEV_JSON" ;;
    python_fastmcp_v2) timeout 300 "$BATON_TOOLS_DIR/venv-fastmcp/bin/python" tests/mcp/python_fastmcp_v2.py "$DEV_JSON" ;;
    ts_sdk_v1) timeout 300 "$node" "$node_dir/ts_sdk_v1.mjs" "$DEV_JSON" ;;
    python_compat) timeout 300 "$BATON_TOOLS_DIR/venv-mcp/bin/python" tests/mcp/python_compat.py "$DEV_JSON" ;;
    python_mcp_saturation) timeout 300 "$BATON_TOOLS_DIR/venv-mcp/bin/python" tests/mcp/python_mcp_saturation.py "$DEV_JSON" ;;
  esac
}
declare -A pids=()
for name in "${SUITES[@]}"; do
  run_suite "$name" >"$work/$name.out" 2>"$work/$name.err" &
  pids[$name]=$!
done
for name in "${SUITES[@]}"; do
  wait "${pids[$name]}" && echo 0 >"$work/$name.rc" || echo $? >"$work/$name.rc"
done
run_suite "$LAST" >"$work/$LAST.out" 2>"$work/$LAST.err" && echo 0 >"$work/$LAST.rc" || echo $? >"$work/$LAST.rc"
passed=0
failed=0
for name in "${SUITES[@]}" "$LAST"; do
  rc=$(cat "$work/$name.rc")
  cat "$work/$name.out"
  p=$(grep -c '^PASS ' "$work/$name.out" || true)
  f=$(grep -c '^FAIL ' "$work/$name.out" || true)
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    # The test died before reporting a failed case: count it as one.
    echo "FAIL $name: exited with $rc"
    f=1
  fi
  if [ "$f" -gt 0 ]; then
    sed 's/^/    /' "$work/$name.err" | tail -n 60
  fi
  passed=$((passed + p))
  failed=$((failed + f))
done

[ "$failed" -eq 0 ] || { echo "baton dev log:"; tail -n 40 "$work/dev.log"; }
echo "mcp-clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
