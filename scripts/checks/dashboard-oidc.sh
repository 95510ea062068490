#!/usr/bin/env bash
# Dashboard sign-in with a real OpenID provider (decision 0050): `oidc-provider`
# from npm on loopback, with people in two groups, and a `baton dev` whose
# coordinator uses it; headless Chromium (Debian `chromium`, `chromium-driver`)
# driven by Python selenium walks the cases in tests/browser/oidc_test.py.
# Screenshots go to $BATON_ARTIFACTS_DIR (or a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools="${BATON_TOOLS_DIR:-$HOME/.cache/baton-tools}"
venv="$tools/venv-selenium"
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import selenium" 2>/dev/null || {
  python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check "selenium==4.38.0"
}
command -v chromium >/dev/null && command -v chromedriver >/dev/null || {
  echo "this check needs chromium and chromedriver: 'bash scripts/setup.sh' installs them" >&2
  exit 1
}
command -v node >/dev/null && command -v npm >/dev/null || { echo "this check needs node and npm" >&2; exit 1; }
idp_dir="$tools/oidc-provider-8.8.1"
[ -d "$idp_dir/node_modules/oidc-provider" ] || {
  mkdir -p "$idp_dir" && npm install --prefix "$idp_dir" --no-audit --no-fund --silent oidc-provider@8.8.1
}
cp tests/browser/oidc_provider.mjs "$idp_dir/"
bin="${CARGO_TARGET_DIR:-target}/debug/baton"
work=$(mktemp -d)
shots="${BATON_ARTIFACTS_DIR:-$work}/dashboard-oidc-screenshots"
mkdir -p "$shots"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
idp_port=$(free_port)
http_port=$(free_port)
callback="http://127.0.0.1:$http_port/dashboard/oidc/callback"
node "$idp_dir/oidc_provider.mjs" "$idp_port" "$callback" "$work/idp-keys.json" >"$work/idp.log" 2>&1 &
idp=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$idp_port/.well-known/openid-configuration" >/dev/null && break; sleep 0.1; done
export BATON_DASHBOARD_SIGN_IN__OIDC__ISSUER_URL="http://127.0.0.1:$idp_port"
export BATON_DASHBOARD_SIGN_IN__OIDC__CLIENT_ID=baton
export BATON_DASHBOARD_SIGN_IN__OIDC__CLIENT_SECRET=baton-test-client-secret
export BATON_DASHBOARD_SIGN_IN__OIDC__REDIRECT_URL="$callback"
export BATON_DASHBOARD_SIGN_IN__OIDC__SCOPES="[email, groups]"
"$bin" dev --data-dir "$work/data" --listen "127.0.0.1:$http_port" >"$work/dev.log" 2>&1 &
dev=$!
trap 'kill $dev $idp 2>/dev/null; wait $dev $idp 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -s "$work/data/dev.json" ] && break; sleep 0.1; done
[ -s "$work/data/dev.json" ] || { cat "$work/dev.log"; exit 1; }
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http_port/readyz" >/dev/null && break; sleep 0.1; done
# The test restarts the provider with rotated keys (and stops it) itself.
BATON_BIN="$bin" BATON_DATABASE__URL="sqlite://$work/data/baton.db" IDP_PID=$idp \
  IDP_COMMAND="node $idp_dir/oidc_provider.mjs $idp_port $callback $work/idp-keys.json" IDP_LOG_DIR="$work" \
  "$venv/bin/python" tests/browser/oidc_test.py "$work/data/dev.json" "$shots" || {
  echo "--- baton dev log (last 40 lines)"; tail -n 40 "$work/dev.log"
  echo "--- oidc-provider log (last 20 lines)"; tail -n 20 "$work/idp.log"
  [ -f "$work/idp-rotated.log" ] && { echo "--- rotated oidc-provider log (last 20 lines)"; tail -n 20 "$work/idp-rotated.log"; }
  exit 1
}
