#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and store-contract tests, the
# black-box tests against real processes, and the external checks (official
# clients and fuzzers) that have landed. scripts/setup.sh runs first: it
# installs the Debian packages that are missing and, when nothing answers at
# TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres, trust
# auth) or TEST_REDIS_URL (default redis://127.0.0.1:6379/), starts a private
# server for this run instead. Tests create their own databases and key
# prefixes, so they run in parallel.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export BATON_TOOLS_DIR="${BATON_TOOLS_DIR:-$HOME/.cache/baton-tools}"
# Sourced, not run: the URLs it exports and the servers it starts (stopped
# when this script exits) are for the steps below.
. scripts/setup.sh

step() { printf '\n==> %s\n' "$*"; }

step "dropping test databases older than an hour (names carry their creation time)"
cutoff=$(( $(date +%s) - 3600 ))
psql "$TEST_POSTGRES_URL" -Atqc "SELECT datname FROM pg_database WHERE datname ~ '^(bt_it|baton_t)_[0-9]+_'" |
  while read -r db; do
    created=$(printf '%s' "$db" | sed -E 's/^(bt_it|baton_t)_([0-9]+)_.*/\2/')
    if [ "$created" -lt "$cutoff" ]; then psql "$TEST_POSTGRES_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true; fi
  done

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo build"
cargo build --workspace --all-targets --quiet

step "cargo test: tidy (the source tree's own rules)"
cargo test -p baton-tests --test tidy --quiet

step "cargo test: unit, store and admission contracts (SQLite, Postgres, Redis)"
cargo test --workspace --lib --bins --quiet

# Each black-box test runs a small cluster of processes; on a 2-core machine a
# few at a time keeps every test inside its own time bounds.
step "cargo test: black-box, real processes"
cargo test --workspace --test it --quiet -- --test-threads "${BATON_IT_THREADS:-4}"

for check in scripts/checks/*.sh; do
  [ -e "$check" ] || continue
  step "external check: $check"
  bash "$check"
done
