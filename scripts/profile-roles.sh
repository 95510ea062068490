#!/usr/bin/env bash
# Profiles Baton's three roles under the side-by-side benchmark's load: runs the Baton
# half of that benchmark (path in BENCH_DIR, default ../shared/bench) with one measured
# run, records each role with `perf` (cpu-clock, DWARF stacks) for a few seconds of it, and
# renders one flame graph per role with inferno (installed into OUT if missing).
#   OUT=/tmp/baton-profile MODE=mcp scripts/profile-roles.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-../shared/bench}
OUT=${OUT:-/tmp/baton-profile}; MODE=${MODE:-mcp}; SECONDS_RECORDED=${SECONDS_RECORDED:-6}
BIN=${BATON_BIN:-${CARGO_TARGET_DIR:-target}/release/baton}
mkdir -p "$OUT"
command -v perf >/dev/null || { echo "perf is needed (Debian: linux-perf)" >&2; exit 1; }
[ -x "$OUT/bin/inferno-flamegraph" ] || cargo install inferno --root "$OUT" >/dev/null
BATON_BIN=$BIN MODES=$MODE RUNS=1 OUT=$OUT/bench.jsonl python3 "$BENCH_DIR/baton/run_baton.py" > "$OUT/bench.txt" 2>&1 &
bench=$!
# The warm-up run's line, then the idle-rate measurement (11 s) before the measured run.
until grep -q warmup "$OUT/bench.txt" 2>/dev/null; do kill -0 $bench; sleep 0.5; done
sleep 16
for role in coordinator gateway worker; do
  pid=$(pgrep -f "$BIN $role" | head -1)
  perf record -F 250 --call-graph dwarf,32768 -p "$pid" -o "$OUT/$role.data" -- sleep "$SECONDS_RECORDED" >/dev/null 2>&1 &
done
wait $bench
for role in coordinator gateway worker; do
  perf script -i "$OUT/$role.data" 2>/dev/null | "$OUT/bin/inferno-collapse-perf" > "$OUT/$role.folded"
  "$OUT/bin/inferno-flamegraph" --title "baton $role, $MODE" < "$OUT/$role.folded" > "$OUT/$role.svg"
done
grep SUMMARY "$OUT/bench.txt"
echo "flame graphs: $OUT/{coordinator,gateway,worker}.svg"
