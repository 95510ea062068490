#!/usr/bin/env bash
# Issue #7, "Done when": the conformance suite's task-input scenario against
# `baton dev --conformance-fixtures`, whose `confirm_delete` and `multi_input`
# are tools of the example remote MCP server (worker/src/remote/example_server)
# served end to end: gateway → coordinator → worker → remote server.
#   tasks-mrtr-input        passes (single and parallel elicitations, partial answers)
#   tasks-mrtr-composition  not run: it needs an input round *before* a task exists
#                           (InputRequiredResult on tools/call); a Baton execution
#                           exists from the tools/call on, so input is task-time only.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/mcp/lib.sh

conformance_setup
trap 'stop_dev; rm -rf "$work"' EXIT
start_dev "$work" --conformance-fixtures
url=$(dev_field mcp_url)

rc=0
"$node" "$suite" server --url "$url" --scenario tasks-mrtr-input -o "$work/results" >"$work/out.log" 2>&1 || rc=$?
sed 's/\x1b\[[0-9;]*m//g' "$work/out.log" | grep -E "Passed:|FAILURE|Error" || cat "$work/out.log"
if [ "$rc" -ne 0 ]; then
  echo "baton dev log:"
  tail -n 40 "$work/dev.log"
  echo "remote-mcp-conformance: 0 passed, 1 failed"
  exit 1
fi
echo "remote-mcp-conformance: 1 passed, 0 failed"
