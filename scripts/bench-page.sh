#!/usr/bin/env bash
# scripts/bench-page.sh — how fast runlens's pages become interactive in a real browser.
#
#   scripts/bench-page.sh [--debug] [LOADS]
#
# Builds the app (release by default: what scripts/dev.sh runs), makes a
# 100,000-step, a 10,000-step and a 100-step run with `runlens gen-trace`, an
# experiment of 10,000 items with `runlens gen-experiment`, and a user to sign
# in with, in target/bench-page/<profile>.db (made once, then reused: delete
# the file to remake it), starts the server on a free port, and loads with
# end2end/bench/page_load.mjs, LOADS times each (default 9), in fresh signed-in
# headless Chromium contexts:
#   - the 100,000-step trace page, on loopback: interactive, the page's memory
#     once it has settled, and the longest frame while its step tree is
#     scrolled from top to bottom;
#   - the 10,000-step and the 100-step trace pages, on loopback;
#   - the page of a finished experiment of 10,000 items, on loopback;
#   - the runs list, a first visit at 10 Mbit/s (nothing cached: the browser
#     bundle crosses the throttled link), and a second visit at 10 Mbit/s (the
#     bundle from the browser's cache: its names are content-hashed and
#     immutable).
# Each figure is printed beside its target. Needs what scripts/setup.sh --test installs.
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

SMALL_ID_FILE="$DB.small-run-id"
HUGE_ID_FILE="$DB.huge-run-id"
USER_FILE="$DB.user"
if [ ! -s "$ID_FILE" ] || [ ! -s "$SMALL_ID_FILE" ] || [ ! -s "$USER_FILE" ] || [ ! -f "$DB" ]; then
  rm -f "$DB" "$DB-wal" "$DB-shm" "$ID_FILE" "$SMALL_ID_FILE" "$USER_FILE"
  echo "==> bench-page: making a 10,000-step and a 100-step run (once; about 1–2 minutes)"
  RUST_LOG=error "$BIN" gen-trace --steps 10000 --database-url "sqlite://$DB" | tail -n1 > "$ID_FILE"
  RUST_LOG=error "$BIN" gen-trace --steps 100 --database-url "sqlite://$DB" | tail -n1 > "$SMALL_ID_FILE"
  echo "bench-page-password" | RUST_LOG=error "$BIN" user add bench --role admin --database-url "sqlite://$DB" >/dev/null
  echo "bench" > "$USER_FILE"
fi
if [ ! -s "$HUGE_ID_FILE" ]; then
  echo "==> bench-page: making a 100,000-step run (once; a few minutes)"
  RUST_LOG=error "$BIN" gen-trace --steps 100000 --database-url "sqlite://$DB" | tail -n1 > "$HUGE_ID_FILE"
fi
EXPERIMENT_ID_FILE="$DB.experiment-id"
if [ ! -s "$EXPERIMENT_ID_FILE" ]; then
  echo "==> bench-page: running an experiment of 10,000 items (once; under a minute)"
  RUST_LOG=error "$BIN" gen-experiment --items 10000 --database-url "sqlite://$DB" | tail -n1 > "$EXPERIMENT_ID_FILE"
fi
EXPERIMENT_ID="$(cat "$EXPERIMENT_ID_FILE")"
export BENCH_USER=bench BENCH_PASSWORD=bench-page-password
SMALL_RUN_ID="$(cat "$SMALL_ID_FILE")"
RUN_ID="$(cat "$ID_FILE")"
HUGE_RUN_ID="$(cat "$HUGE_ID_FILE")"

PORT="$(node -e "const s = require('node:net').createServer(); s.listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); });")"
RUNLENS_ADDR="127.0.0.1:$PORT" DATABASE_URL="sqlite://$DB" LEPTOS_SITE_ROOT="$TARGET/site" RUST_LOG=warn \
  "$BIN" serve >"$TARGET/bench-page/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
  sleep 0.1
done

echo "==> bench-page: $profile build; bundle: $(cat "$TARGET/site/pkg/manifest.json" 2>/dev/null || echo 'no manifest')"
for f in "$TARGET"/site/pkg/*.wasm; do
  printf '    %s: %s bytes, %s gzip, %s brotli\n' "$(basename "$f")" "$(stat -c %s "$f")" \
    "$(stat -c %s "$f.gz" 2>/dev/null || echo -)" "$(stat -c %s "$f.br" 2>/dev/null || echo -)"
done
BASE="http://127.0.0.1:$PORT"
bench() { (cd end2end && node bench/page_load.mjs "$@"); }
# One load first so the server's readers and the OS page cache are warm, as
# on a server that has been up; it is not counted.
bench "$BASE/runs/$RUN_ID" 1 >/dev/null
bench "$BASE/runs/$HUGE_RUN_ID" 1 >/dev/null
bench "$BASE/runs/$HUGE_RUN_ID" "$loads" --label "100,000-step trace page" --target 1000 \
  --memory 300 --scroll '[data-testid="tree"]' --frames 50
bench "$BASE/runs/$RUN_ID" "$loads" --label "10,000-step trace page" --target 1000
bench "$BASE/runs/$SMALL_RUN_ID" "$loads" --label "100-step trace page" --target 400
bench "$BASE/experiments/$EXPERIMENT_ID" 1 >/dev/null
bench "$BASE/experiments/$EXPERIMENT_ID" "$loads" --label "experiment page, 10,000 items" --target 500
bench "$BASE/runs" "$loads" --mbit 10 --label "runs list, first visit at 10 Mbit/s" --target 1500
bench "$BASE/runs" "$loads" --mbit 10 --repeat --label "runs list, second visit at 10 Mbit/s (bundle cached)"
