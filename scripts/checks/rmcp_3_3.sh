#!/usr/bin/env bash
# rmcp 3.3.0, the Rust SDK release the product names for release validation,
# against a real `baton dev` (2026-07-28 with the tasks extension): discovery,
# a foreground call, a task completing with its result inline, a cancelled
# task, the uniform not-found, and a call over the admission bound (-32025,
# the session intact). The test suite pins rmcp 3.11.0 (tests/it/mcp_rmcp.rs);
# this check builds scripts/rmcp_3_3, a crate outside the workspace, so both
# releases are exercised. The one source difference: 3.3.0 calls the client's
# configuration `ClientInfo` (3.11.0: `ClientConfig`).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/mcp/lib.sh

target="${CARGO_TARGET_DIR:-target}/rmcp-3.3"
cargo build --quiet --manifest-path scripts/rmcp_3_3/Cargo.toml --target-dir "$target"
probe="$target/debug/baton-rmcp-3-3-check"

work=$(mktemp -d)
trap 'stop_dev; rm -rf "$work"' EXIT
start_dev "$work"

rc=0
"$probe" "$DEV_JSON" | tee "$work/out" || rc=$?
# Over capacity: fill the other dev user's bound over REST, then call as them.
export PYTHONPATH="$PWD/tests/mcp" PYTHONDONTWRITEBYTECODE=1
ids=$(python3 -c 'import json,sys; from cases import load_dev, saturate; print(json.dumps(saturate(load_dev(sys.argv[1]))))' "$DEV_JSON")
"$probe" "$DEV_JSON" over-capacity | tee -a "$work/out" || rc=$?
python3 -c 'import json,sys; from cases import load_dev, release; release(load_dev(sys.argv[1]), json.loads(sys.argv[2]))' "$DEV_JSON" "$ids"

passed=$(grep -c '^PASS ' "$work/out" || true)
failed=$(grep -c '^FAIL ' "$work/out" || true)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
[ "$failed" -eq 0 ] || { echo "baton dev log:"; tail -n 40 "$work/dev.log"; }
echo "rmcp-3.3: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
