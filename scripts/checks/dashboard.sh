#!/usr/bin/env bash
# The dashboard in a real browser: headless Chromium (Debian `chromium` and
# `chromium-driver`) driven by Python selenium, against a real `baton dev`
# (coordinator, gateway and worker serving the example tools). The checks are
# in tests/browser/dashboard_test.py; screenshots are kept under
# $BATON_ARTIFACTS_DIR (or a temporary directory) and printed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools="${BATON_TOOLS_DIR:-$HOME/.cache/baton-tools}"
venv="$tools/venv-selenium"
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import selenium" 2>/dev/null || {
  python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check "selenium==4.38.0"
}
command -v chromium >/dev/null && command -v chromedriver >/dev/null || {
  echo "dashboard check needs chromium and chromedriver: 'bash scripts/setup.sh' installs them (Debian's chromium and chromium-driver)" >&2
  exit 1
}
bin="${CARGO_TARGET_DIR:-target}/debug/baton"
work=$(mktemp -d)
shots="${BATON_ARTIFACTS_DIR:-$work}/dashboard-screenshots"
mkdir -p "$shots"
"$bin" dev --data-dir "$work/data" --listen 127.0.0.1:0 >"$work/dev.log" 2>&1 &
dev=$!
trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -s "$work/data/dev.json" ] && break; sleep 0.1; done
[ -s "$work/data/dev.json" ] || { cat "$work/dev.log"; exit 1; }
http=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['http_url'])" "$work/data/dev.json")
for _ in $(seq 100); do curl -sf "$http/readyz" >/dev/null && break; sleep 0.1; done
"$venv/bin/python" tests/browser/dashboard_test.py "$work/data/dev.json" "$shots" || {
  echo "--- baton dev log (last 40 lines)"; tail -n 40 "$work/dev.log"; exit 1
}
