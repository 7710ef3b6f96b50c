#!/usr/bin/env bash
# scripts/bench-page.sh — how fast a 10,000-step trace opens in a real browser.
#
#   scripts/bench-page.sh [--debug] [LOADS]
#
# Builds the app (release by default: what scripts/dev.sh runs), makes a
# 10,000-step run with `runlens gen-trace` into target/bench-page/<profile>.db
# (made once, then reused: delete the file to remake it), starts the server on
# a free port, and loads the run's trace page LOADS times (default 9) in fresh
# headless Chromium contexts with end2end/bench/page_load.mjs, which prints
# the timings. Needs what scripts/setup.sh --test installs.
#
# Environment:
#   BENCH_NO_BUILD=1   measure target/site and the binary as they are (no build)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

profile=release
build_args=(--release)
loads=9
for arg in "$@"; do
  case "$arg" in
    --debug) profile=debug; build_args=() ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *[!0-9]*|'') echo "bench-page.sh: unknown argument: $arg (usage: scripts/bench-page.sh [--debug] [LOADS])" >&2; exit 2 ;;
    *) loads="$arg" ;;
  esac
done

[ -n "${BENCH_NO_BUILD:-}" ] || scripts/build.sh ${build_args[@]+"${build_args[@]}"} >/dev/null

TARGET="${CARGO_TARGET_DIR:-target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
BIN="$TARGET/$profile/runlens"
mkdir -p "$TARGET/bench-page"
DB="$TARGET/bench-page/$profile.db"
ID_FILE="$DB.run-id"

if [ ! -s "$ID_FILE" ] || [ ! -f "$DB" ]; then
  rm -f "$DB" "$DB-wal" "$DB-shm" "$ID_FILE"
  echo "==> bench-page: making a 10,000-step run (once; about 1–2 minutes)"
  RUST_LOG=error "$BIN" gen-trace --steps 10000 --database-url "sqlite://$DB" | tail -n1 > "$ID_FILE"
fi
RUN_ID="$(cat "$ID_FILE")"

PORT="$(node -e "const s = require('node:net').createServer(); s.listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); });")"
RUNLENS_ADDR="127.0.0.1:$PORT" DATABASE_URL="sqlite://$DB" LEPTOS_SITE_ROOT="$TARGET/site" RUST_LOG=warn \
  "$BIN" serve >"$TARGET/bench-page/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
  sleep 0.1
done

echo "==> bench-page: $profile build, run $RUN_ID"
# One load first so the server's readers and the OS page cache are warm, as
# on a server that has been up; it is not counted.
(cd end2end && node bench/page_load.mjs "http://127.0.0.1:$PORT/runs/$RUN_ID" 1 >/dev/null)
(cd end2end && node bench/page_load.mjs "http://127.0.0.1:$PORT/runs/$RUN_ID" "$loads")
