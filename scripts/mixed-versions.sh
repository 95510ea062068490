#!/usr/bin/env bash
# The mixed-version run: builds an earlier release's `baton` from git history
# (OLD_REV, a pinned commit by default), builds today's, and runs the
# black-box test that upgrades a cluster of the old release role by role while
# clients keep starting executions (tests/it/day_two/mixed_versions.rs).
# Needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379, as the test
# suite does. Knobs: OLD_REV, OLD_BIN (skip the old build), OLD_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
# The last release before versions were stated at registration.
OLD_REV="${OLD_REV:-1c2d242}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

if [ -z "${OLD_BIN:-}" ]; then
  # Its own target directory: two checkouts of one workspace must not share
  # one (cargo would take the other's fresh artifacts for its own).
  OLD_TARGET_DIR="${OLD_TARGET_DIR:-$CARGO_TARGET_DIR/mixed-old}"
  TREE="$(mktemp -d "${TMPDIR:-/tmp}/baton-old.XXXXXX")"
  trap 'git -C "$ROOT" worktree remove --force "$TREE" >/dev/null 2>&1 || true' EXIT
  git -C "$ROOT" worktree add --detach "$TREE" "$OLD_REV" >/dev/null
  echo "==> building baton at $OLD_REV" >&2
  (cd "$TREE" && CARGO_TARGET_DIR="$OLD_TARGET_DIR" cargo build -p baton)
  OLD_BIN="$OLD_TARGET_DIR/debug/baton"
fi
echo "==> building today's baton ($(git -C "$ROOT" rev-parse --short HEAD))" >&2
cargo build --workspace
BATON_OLD_BIN="$OLD_BIN" cargo test -p baton-tests --test it mixed_versions -- --ignored --nocapture
