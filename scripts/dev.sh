#!/usr/bin/env bash
# scripts/dev.sh [--debug] — install what is missing, build, and serve runlens.
#
# Runs scripts/setup.sh, then scripts/build.sh, then `runlens serve` in the
# foreground (Ctrl-C stops it). An optimized (release) build by default, the
# one to use and to judge speed by: 17 minutes from a fresh clone on 2 cores
# when last measured (see docs/development.md), under a minute after an edit. --debug
# builds sooner and in seconds after an edit, for working on runlens itself;
# its pages are slower (a 10,000-step trace is interactive after ~0.9 s
# instead of ~0.7 s).
# --release is accepted and is the default.
#
# First start: with no user in the database the server prints a one-time
# setup link (http://127.0.0.1:3000/setup?token=…, valid for an hour) right
# below; open it to create the first admin. Later starts print nothing: sign
# in at /login.
#
# Environment (passed through to the server):
#   RUNLENS_ADDR      where to listen            (default 127.0.0.1:3000)
#   DATABASE_URL      the run store              (default sqlite://runlens.db, created and migrated on start)
#   LEPTOS_SITE_ROOT  the built site             (default <repo>/target/site)
#   RUST_LOG          log filter                 (the server's default when unset)
#   SKIP_SETUP=1      do not run scripts/setup.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

profile=release
build_args=(--release)
for arg in "$@"; do
  case "$arg" in
    --release) profile=release; build_args=(--release) ;;
    --debug) profile=debug; build_args=() ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dev.sh: unknown argument: $arg (usage: scripts/dev.sh [--debug])" >&2; exit 2 ;;
  esac
done

if [ "${SKIP_SETUP:-0}" != 1 ]; then
  scripts/setup.sh
fi
scripts/build.sh ${build_args[@]+"${build_args[@]}"}

TARGET="${CARGO_TARGET_DIR:-target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac

export RUNLENS_ADDR="${RUNLENS_ADDR:-127.0.0.1:3000}"
export DATABASE_URL="${DATABASE_URL:-sqlite://runlens.db}"
export LEPTOS_SITE_ROOT="${LEPTOS_SITE_ROOT:-$TARGET/site}"

printf '\n==> runlens serve: http://%s  (database %s; Ctrl-C to stop)\n' "$RUNLENS_ADDR" "$DATABASE_URL"
printf '    first start: open the setup link the server prints below; afterwards sign in at /login\n\n'
exec "$TARGET/$profile/runlens" serve
