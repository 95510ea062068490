#!/usr/bin/env bash
# Wire compatibility on every change: `buf breaking` compares proto/ with the
# protos of the last release and fails on anything an older peer could no
# longer read (a field renumbered, retyped or removed without reserving it, an
# enum value reused...). Inside the version window (docs/upgrading.md) peers
# of different releases exchange these messages, so such a change must not
# land. The baseline is the newest `v*` tag reachable from HEAD; before the
# first tag it is the commit 0.1.0's protos were taken from. buf comes from
# the npm registry (@bufbuild/buf ships the binary) and is installed once
# under $BATON_TOOLS_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/mcp/lib.sh

buf_version=1.75.0
# For a clone without tags: the commit 0.1.0's protos were declared at (the
# tag v0.1.0, on 789e70d, carries the same protos).
first_release=c18d5721df9f088b5fe22f03bedd47ea530c4876

dir="$BATON_TOOLS_DIR/buf"
npm_dir "$dir" "buf-$buf_version" "@bufbuild/buf@$buf_version"
buf="$dir/node_modules/.bin/buf"

baseline=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null || echo "$first_release")
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  echo "buf-breaking: the baseline $baseline is not in this clone (a shallow clone? git fetch --unshallow)"
  echo "buf-breaking: 0 passed, 1 failed"
  exit 1
fi
baseline_commit=$(git rev-parse "$baseline^{commit}")
against=".git#ref=$baseline_commit,subdir=proto"

passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if "$buf" breaking proto --against "$against" >"$work/today" 2>&1; then
  echo "PASS proto/ is wire-compatible with $baseline"
  passed=$((passed + 1))
else
  cat "$work/today"
  echo "FAIL proto/ breaks the wire contract of $baseline (see above; add fields, never renumber, retype or reuse)"
  failed=$((failed + 1))
fi

# The gate itself: a copy of proto/ with one field renumbered must be refused,
# so a configuration that checks nothing cannot pass unnoticed.
cp -r proto "$work/renumbered"
field='uint32 attempt = 2;'
file="$work/renumbered/baton/worker/v1/worker.proto"
if grep -qF "$field" "$file"; then
  sed -i "0,/$field/s//uint32 attempt = 98;/" "$file"
  if "$buf" breaking "$work/renumbered" --against "$against" >"$work/renumbered.out" 2>&1; then
    echo "FAIL a renumbered field (AssignmentDeclined.attempt 2 -> 98) passed buf breaking"
    failed=$((failed + 1))
  elif grep -q 'field "2" with name "attempt"' "$work/renumbered.out"; then
    echo "PASS a renumbered field is refused: $(head -n1 "$work/renumbered.out" | sed 's/^[^:]*:[0-9]*:[0-9]*://')"
    passed=$((passed + 1))
  else
    cat "$work/renumbered.out"
    echo "FAIL buf breaking failed on the renumbered copy, but not for the renumbered field"
    failed=$((failed + 1))
  fi
else
  echo "FAIL the self-test's field ($field) is no longer in worker.proto: pick another"
  failed=$((failed + 1))
fi

echo "buf-breaking: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
