#!/usr/bin/env bash
# The Helm chart lints, renders, schema-validates, and its rendered config loads
# in the real binary (no cluster exists here; see deploy/check-chart.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
TMPDIR="${BATON_TOOLS_DIR:-${TMPDIR:-/tmp}}" BATON_BIN="${CARGO_TARGET_DIR:-target}/debug/baton" bash deploy/check-chart.sh
