#!/usr/bin/env bash
# What the test suite needs besides the Rust toolchain: the Debian packages its
# tests and checks call, a PostgreSQL and a Redis that answer. scripts/test.sh
# sources this before its first cargo step, so a missing tool fails the run in
# its first minute rather than in its last check.
#
#   bash scripts/setup.sh             installs what is missing, then exits
#   bash scripts/setup.sh CMD ARG...  ... then runs CMD (in the current
#                                     directory) with TEST_POSTGRES_URL and
#                                     TEST_REDIS_URL set, e.g. a single
#                                     `cargo test`; private servers live as
#                                     long as CMD
#
# Packages come from apt (as root, or through sudo). A service that does not
# answer at TEST_POSTGRES_URL / TEST_REDIS_URL is replaced by a private
# throwaway one on a free loopback port, whose URL is exported instead and
# which is stopped and deleted when the calling shell exits. Prints nothing
# when everything is already in place. The Python venvs, npm packages and
# Node 22 stay with the checks that use them (tests/mcp/lib.sh), which fetch
# them under $BATON_TOOLS_DIR on first use.

export BATON_TOOLS_DIR="${BATON_TOOLS_DIR:-$HOME/.cache/baton-tools}"
SETUP_DEFAULT_PG_URL="postgres://postgres@127.0.0.1:5432/postgres"

setup_say() { printf 'setup: %s\n' "$*" >&2; }

# The installed server's bin directory, found the way tests/it/servers.rs
# finds it, so that this script and the tests agree on which server exists.
setup_pg_bin() {
  if [ -n "${BATON_PG_BIN:-}" ]; then
    echo "$BATON_PG_BIN"
    return 0
  fi
  local initdb
  initdb=$(command -v initdb 2>/dev/null) && [ -x "$(dirname "$initdb")/pg_ctl" ] && {
    dirname "$initdb"
    return 0
  }
  initdb=$(for f in /usr/lib/postgresql/*/bin/initdb; do [ -x "$f" ] && echo "$f"; done | sort -V | tail -n1)
  [ -n "$initdb" ] && dirname "$initdb"
}

# "command package" pairs; python3-venv and the server are checked apart
# because neither is a command on PATH.
SETUP_COMMANDS="
psql postgresql-client
pg_isready postgresql-client
redis-server redis-server
redis-cli redis-tools
python3 python3
node nodejs
npm npm
chromium chromium
chromedriver chromium-driver
jq jq
curl curl
flock util-linux
"

# Prints the Debian packages whose commands are missing, one per line.
setup_missing() {
  local cmd pkg
  while read -r cmd pkg; do
    [ -n "$cmd" ] || continue
    command -v "$cmd" >/dev/null 2>&1 || echo "$pkg"
  done <<<"$SETUP_COMMANDS"
  setup_pg_bin >/dev/null || echo postgresql
  # Debian ships ensurepip (what `python3 -m venv` needs) in python3-venv.
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || echo python3-venv
}

setup_packages() {
  local missing sudo=()
  missing=$(setup_missing | sort -u | tr '\n' ' ')
  missing=${missing% }
  [ -n "$missing" ] || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    setup_say "missing Debian packages $missing, and no apt-get here: install their equivalents and run again"
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      setup_say "missing Debian packages $missing: run 'apt-get install $missing' as root, then run again"
      return 1
    fi
    sudo=(sudo)
  fi
  setup_say "installing $missing"
  # The lock timeout: another run on the machine may be installing at this moment.
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
  # shellcheck disable=SC2086 # the package list is meant to split
  if ! { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq $missing; }; then
    setup_say "apt-get could not install $missing"
    return 1
  fi
  # A python3 other than Debian's (pyenv, a venv) gains nothing from
  # python3-venv; say so here rather than in a check much later.
  missing=$(setup_missing | sort -u | tr '\n' ' ')
  missing=${missing% }
  if [ -n "$missing" ]; then
    setup_say "still missing after apt-get install: $missing (does PATH find another installation's command first?)"
    return 1
  fi
}

# rustup's minimal profile leaves out the two components the suite's first steps use.
setup_rust_components() {
  command -v cargo >/dev/null 2>&1 || {
    setup_say "no cargo on PATH: install the Rust toolchain (https://rustup.rs) first"
    return 1
  }
  local want=()
  cargo fmt --version >/dev/null 2>&1 || want+=(rustfmt)
  cargo clippy --version >/dev/null 2>&1 || want+=(clippy)
  [ ${#want[@]} -gt 0 ] || return 0
  command -v rustup >/dev/null 2>&1 || {
    setup_say "cargo lacks ${want[*]} and there is no rustup to add them"
    return 1
  }
  setup_say "adding rust components ${want[*]}"
  rustup component add "${want[@]}"
}

setup_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A fresh directory for a private server. It must be reachable by the user
# the server runs as: as root that is `postgres`, and /root is usually 0700,
# so the tools dir is left for /tmp when that user cannot get in.
setup_private_dir() {
  local kind="$1" user="${2:-}" dir
  mkdir -p "$BATON_TOOLS_DIR/run" && dir=$(mktemp -d "$BATON_TOOLS_DIR/run/$kind.XXXXXX") || return 1
  if [ -n "$user" ]; then
    chown "$user:" "$dir" || return 1
    if ! runuser -u "$user" -- test -w "$dir" 2>/dev/null; then
      rmdir "$dir"
      dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-$kind.XXXXXX") && chown "$user:" "$dir" || return 1
    fi
  fi
  echo "$dir"
}

# initdb refuses to run as root, so as root the private cluster is owned by
# and runs as `postgres` (the server package's user), or `nobody` without it.
setup_pg_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  if id postgres >/dev/null 2>&1; then echo postgres; else echo nobody; fi
}

setup_as_pg_user() {
  if [ -n "$SETUP_PG_USER" ]; then
    # The server's user may not be allowed into the caller's working directory.
    (cd "$SETUP_PG_DIR" && runuser -u "$SETUP_PG_USER" -- "$@")
  else
    "$@"
  fi
}

setup_pg_answers() {
  PGCONNECT_TIMEOUT=5 psql -X "$1" -Atqc 'select 1' >/dev/null 2>&1
}

setup_redis_answers() {
  [ "$(timeout 10 redis-cli -u "$1" ping 2>/dev/null)" = PONG ]
}

# Stops and deletes what setup_postgres and setup_redis started, and only that:
# the machine's own servers are never touched.
setup_cleanup() {
  if [ -n "${SETUP_REDIS_DIR:-}" ]; then
    local pid
    pid=$(cat "$SETUP_REDIS_DIR/redis.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -rf "$SETUP_REDIS_DIR"
    SETUP_REDIS_DIR=
  fi
  if [ -n "${SETUP_PG_DIR:-}" ]; then
    if [ -f "$SETUP_PG_DIR/data/postmaster.pid" ]; then
      setup_as_pg_user "$SETUP_PG_BIN/pg_ctl" -D "$SETUP_PG_DIR/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$SETUP_PG_DIR"
    SETUP_PG_DIR=
  fi
}

# Installed once, when the first private server starts. INT and TERM become
# exits so that an interrupted run still stops its servers.
setup_trap() {
  [ -z "${SETUP_TRAPPED:-}" ] || return 0
  SETUP_TRAPPED=1
  trap setup_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

setup_private_postgres() {
  local asked="$1" port
  SETUP_PG_BIN=$(setup_pg_bin) || {
    setup_say "no PostgreSQL server (initdb, pg_ctl) to start a private one with"
    return 1
  }
  SETUP_PG_USER=$(setup_pg_user)
  setup_trap
  SETUP_PG_DIR=$(setup_private_dir postgres "$SETUP_PG_USER") && port=$(setup_free_port) || return 1
  # C.UTF-8 where the C library has it, as Debian's own cluster gets: under
  # plain C, lower() and ILIKE leave non-ASCII letters alone.
  local locale=--no-locale
  if locale -a 2>/dev/null | grep -qix 'c\.utf-\?8'; then locale=--locale=C.UTF-8; fi
  setup_as_pg_user "$SETUP_PG_BIN/initdb" -D "$SETUP_PG_DIR/data" -U postgres --auth=trust \
    -E UTF8 "$locale" --no-sync >"$SETUP_PG_DIR/initdb.log" 2>&1 || {
    setup_say "initdb failed:"
    cat "$SETUP_PG_DIR/initdb.log" >&2
    return 1
  }
  # TCP only (no socket directory to collide or to outgrow a path's length);
  # no durability, pointless for a cluster deleted on exit; and the same
  # connection headroom as the clusters tests/it/servers.rs starts.
  setup_as_pg_user "$SETUP_PG_BIN/pg_ctl" -D "$SETUP_PG_DIR/data" -l "$SETUP_PG_DIR/server.log" -w -t 60 \
    -o "-p $port -k '' -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null || {
    setup_say "the private PostgreSQL did not start:"
    tail -n 20 "$SETUP_PG_DIR/server.log" >&2
    return 1
  }
  export TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres"
  setup_pg_answers "$TEST_POSTGRES_URL" || {
    setup_say "the private PostgreSQL at $TEST_POSTGRES_URL does not answer"
    return 1
  }
  setup_say "nothing answered at $asked: private PostgreSQL at $TEST_POSTGRES_URL (data in $SETUP_PG_DIR, deleted on exit)"
}

setup_postgres() {
  export TEST_POSTGRES_URL="${TEST_POSTGRES_URL:-$SETUP_DEFAULT_PG_URL}"
  setup_pg_answers "$TEST_POSTGRES_URL" && return 0
  # The usual reason on a CI image or a fresh install: the machine's own
  # cluster is merely stopped. Only for the default URL, whose port is that
  # cluster's; starting it needs root, so sudo may not prompt.
  if [ "$TEST_POSTGRES_URL" = "$SETUP_DEFAULT_PG_URL" ] && command -v pg_lsclusters >/dev/null 2>&1; then
    local as_root=() ver name port status
    [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
    while read -r ver name port status _; do
      if [ "$port" != 5432 ] || [[ "$status" != down* ]]; then continue; fi
      "${as_root[@]}" pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start </dev/null >/dev/null 2>&1 || continue
      for _ in $(seq 30); do
        if setup_pg_answers "$TEST_POSTGRES_URL"; then
          setup_say "started the PostgreSQL cluster $ver/$name"
          return 0
        fi
        sleep 1
      done
    done < <(pg_lsclusters -h 2>/dev/null)
  fi
  setup_private_postgres "$TEST_POSTGRES_URL"
}

setup_redis() {
  export TEST_REDIS_URL="${TEST_REDIS_URL:-redis://127.0.0.1:6379/}"
  setup_redis_answers "$TEST_REDIS_URL" && return 0
  local asked="$TEST_REDIS_URL" port
  setup_trap
  SETUP_REDIS_DIR=$(setup_private_dir redis) && port=$(setup_free_port) || return 1
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --dir "$SETUP_REDIS_DIR" --pidfile "$SETUP_REDIS_DIR/redis.pid" --logfile "$SETUP_REDIS_DIR/redis.log" || {
    setup_say "the private Redis did not start"
    return 1
  }
  local url="redis://127.0.0.1:$port/"
  for _ in $(seq 100); do setup_redis_answers "$url" && break; sleep 0.1; done
  setup_redis_answers "$url" || {
    setup_say "the private Redis at $url does not answer:"
    tail -n 20 "$SETUP_REDIS_DIR/redis.log" >&2
    return 1
  }
  export TEST_REDIS_URL="$url"
  setup_say "nothing answered at $asked: private Redis at $TEST_REDIS_URL (deleted on exit)"
}

# Each step checks its own failures and returns them: set -e does not act
# inside functions called from a && or || list, as these are.
setup_all() {
  setup_packages && setup_rust_components && setup_postgres && setup_redis
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  setup_all
  if [ $# -gt 0 ]; then "$@"; fi
else
  setup_all || exit 1
fi
