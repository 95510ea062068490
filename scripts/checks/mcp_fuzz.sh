#!/usr/bin/env bash
# Fuzzes the MCP endpoint (/mcp/{gateway_id}) of a real `baton dev`, in both
# eras (legacy 2025-11-25 / 2025-06-18 sessions, stateless 2026-07-28), with
# scripts/fuzz/mcp_fuzz.py (Python 3 standard library, nothing to install):
# mutated valid messages, wrong types, huge and deeply nested values, invalid
# JSON and UTF-8, batches, unknown methods, bad headers and credentials.
# A case fails on HTTP 5xx, no answer, an unparseable body, a JSON-RPC error
# code outside the list below, or a wrong answer to a pure defect (body over
# the limit → 413, foreign Host/Origin → 403, missing Accept → 406, ...); the
# run fails if the server dies or logs "panicked".
#
#   bash scripts/checks/mcp_fuzz.sh                         # CI: 3000 cases
#   MCP_FUZZ_CASES=50000 bash scripts/checks/mcp_fuzz.sh    # the full run
#   MCP_FUZZ_SEED=7 MCP_FUZZ_THREADS=8 ...                  # other seed / pool
# Failing requests are saved (credentials replaced by placeholders) under
# $MCP_FUZZ_OUT (default: a temporary directory, kept when something failed);
# `python3 scripts/fuzz/mcp_fuzz.py --dev-json .baton/dev.json --replay FILE`
# sends one again.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/mcp/lib.sh

# JSON-RPC error codes the server may answer with: the JSON-RPC 2.0 standard
# ones, and the server codes gateway/src/mcp/error.rs defines
# (HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION, CANCEL_NOT_DELIVERED,
# CANCEL_DELIVERY_UNKNOWN, OVER_CAPACITY).
ALLOWED_CODES="-32700 -32600 -32601 -32602 -32603 -32020 -32021 -32022 -32023 -32024 -32025"
# A code constant added to error.rs without being listed here is reported, so
# the list cannot silently fall behind.
for code in $(grep -oE 'const [A-Z_]+: i64 = -?[0-9]+' gateway/src/mcp/error.rs | grep -oE -- '-?[0-9]+$'); do
  grep -qw -- "$code" <<<"$ALLOWED_CODES" || {
    echo "mcp-fuzz: gateway/src/mcp/error.rs defines code $code, not in ALLOWED_CODES of $0" >&2
    echo "mcp-fuzz: 0 passed, 1 failed"
    exit 1
  }
done
# The gateway's body limit (gateway.max_body_bytes); baton dev uses the default.
BODY_LIMIT=$(grep -oE 'max_body_bytes: [0-9]+ << [0-9]+' src/config.rs | head -n1 | awk '{print $2 * 2 ^ $4}')
BODY_LIMIT=${BODY_LIMIT:-1048576}

work=$(mktemp -d)
out="${MCP_FUZZ_OUT:-$work/failures}"
keep=0
cleanup() {
  stop_dev
  if [ "$keep" -eq 1 ]; then
    echo "mcp-fuzz: kept $work (dev.log, failures)"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
start_dev "$work"

rc=0
python3 scripts/fuzz/mcp_fuzz.py --dev-json "$DEV_JSON" --pid "$DEV_PID" --log "$work/dev.log" \
  --cases "${MCP_FUZZ_CASES:-3000}" --seed "${MCP_FUZZ_SEED:-20261130}" --threads "${MCP_FUZZ_THREADS:-8}" \
  --body-limit "$BODY_LIMIT" --allowed-codes="${ALLOWED_CODES// /,}" --out "$out" || rc=$?
if [ "$rc" -ne 0 ]; then
  keep=1
  # The fuzzer prints the closing line itself; when it crashed before, say so.
  if [ "$rc" -ne 1 ]; then
    echo "mcp-fuzz: the fuzzer exited with $rc"
    echo "mcp-fuzz: 0 passed, 1 failed"
  fi
  echo "baton dev log (last 40 lines):"
  tail -n 40 "$work/dev.log"
fi
exit "$rc"
