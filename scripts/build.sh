#!/usr/bin/env bash
# scripts/build.sh [--release] — build the runlens server and its browser bundle
# with plain cargo + wasm-bindgen (no cargo-leptos needed).
#
#   1. the server binary        cargo build --bin runlens --features ssr
#                               -> target/{debug,release}/runlens
#   2. the hydration bundle     cargo build --lib --target wasm32-unknown-unknown --features hydrate
#                               (debug profile, or `wasm-release` with --release)
#   3. JS glue for the bundle   wasm-bindgen --target web -> runlens.js, runlens_bg.wasm
#   4. static files             style/main.css -> runlens.css; public/* -> target/site/
#   5. content-hashed names     each renamed after its content (runlens.<16 hex>.js, ...) and
#                               listed in target/site/pkg/manifest.json, which pages link through;
#                               the server sends them `immutable` (src/server/assets.rs)
#   6. precompressed copies     a brotli (.br, node's zlib) and a gzip (.gz) copy of each
#
# The server and the bundle build side by side (the bundle's output goes to
# target/wasm-build.log). Debug (the default) is quick after an edit; --release
# is what scripts/dev.sh serves and gives a smaller wasm bundle (cold times in
# docs/development.md). Both write the same
# target/site, so the last build wins. Honours CARGO_TARGET_DIR (the site is then
# $CARGO_TARGET_DIR/site). Run scripts/setup.sh first on a fresh machine.
#
# --as-tested builds the debug server in the test command's graph (both crates
# with the test targets, see scripts/test.sh): after `cargo test` there it
# compiles nothing again, and the binary is the one the crash test ran.
#
# Environment:
#   RUNLENS_WASM_NAMES=1   keep function names in the bundle (browser stack traces)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

NAME=runlens                       # = output-name in [package.metadata.leptos]
TARGET="${CARGO_TARGET_DIR:-target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
SITE="$TARGET/site"                # = site-root (the server also looks here, next to its binary)
PKG="$SITE/pkg"                    # = site-pkg-dir

release=0
as_tested=0
for arg in "$@"; do
  case "$arg" in
    --release) release=1 ;;
    --as-tested) as_tested=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument: $arg (usage: scripts/build.sh [--release | --as-tested])" >&2; exit 2 ;;
  esac
done

if [ "$release" = 1 ]; then
  server_args=(--release); server_dir=release
  wasm_args=(--profile wasm-release); wasm_dir=wasm-release
  brotli_quality=11
else
  server_args=(); server_dir=debug
  wasm_args=(); wasm_dir=debug
  brotli_quality=9
fi

case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac
command -v wasm-bindgen >/dev/null 2>&1 || { echo "build.sh: wasm-bindgen not found; run scripts/setup.sh" >&2; exit 1; }

# Leptos decides at *compile* time whether the page asks for pkg/runlens.wasm
# (LEPTOS_OUTPUT_NAME set, the cargo-leptos layout) or pkg/runlens_bg.wasm (unset,
# what wasm-bindgen --out-name writes). We build the second layout, so make sure
# a value left in the shell does not leak into the compile.
unset LEPTOS_OUTPUT_NAME

step_start=$SECONDS
phase() { printf '\n==> build: %s\n' "$*"; step_start=$SECONDS; }
took()  { printf '    (%ss)\n' "$((SECONDS - step_start))"; }
total_start=$SECONDS

# The two builds run side by side: each spends minutes on one core at its end
# (the server's own crate; the bundle's link-time optimization), which the
# other fills. They use different profile directories, so cargo lets both run.
mkdir -p "$TARGET"
wasm_log="$TARGET/wasm-build.log"
phase "wasm bundle ($wasm_dir), beside the server: cargo build --lib --target wasm32-unknown-unknown --no-default-features --features hydrate ${wasm_args[*]-} (log: ${wasm_log#"$ROOT"/})"
cargo build --lib --target wasm32-unknown-unknown --no-default-features --features hydrate ${wasm_args[@]+"${wasm_args[@]}"} \
  >"$wasm_log" 2>&1 &
wasm_pid=$!
trap 'kill "$wasm_pid" 2>/dev/null || true' EXIT

if [ "$as_tested" = 1 ]; then
  [ "$release" = 0 ] || { echo "build.sh: --as-tested is a debug build" >&2; exit 2; }
  server_cmd=(cargo build --workspace --no-default-features --features runlens/ssr --tests)
else
  server_cmd=(cargo build --bin "$NAME" --no-default-features --features ssr ${server_args[@]+"${server_args[@]}"})
fi
phase "server binary ($server_dir): ${server_cmd[*]}"
"${server_cmd[@]}"
took

phase "wasm bundle ($wasm_dir): waiting for it"
if ! wait "$wasm_pid"; then
  tail -n 40 "$wasm_log" >&2
  echo "build.sh: the wasm bundle did not build (whole log: $wasm_log)" >&2
  exit 1
fi
trap - EXIT
took

phase "wasm-bindgen -> ${PKG#"$ROOT"/}"
wasm="$TARGET/wasm32-unknown-unknown/$wasm_dir/$NAME.wasm"
[ -f "$wasm" ] || { echo "build.sh: $wasm was not produced" >&2; exit 1; }
# Build the new pkg/ beside the old one and swap them at the end, so a server
# that is running meanwhile never serves a half-written bundle.
NEW_PKG="$SITE/.pkg.new.$$"
rm -rf "$NEW_PKG"
mkdir -p "$NEW_PKG"
trap 'rm -rf "$NEW_PKG"' EXIT
# The `name` section only names functions in browser stack traces, and in a
# debug build it is 11 of the bundle's 17 MB, which every page load streams
# through the compiler. Kept with RUNLENS_WASM_NAMES=1.
names=(--remove-name-section)
[ "${RUNLENS_WASM_NAMES:-0}" = 1 ] && names=()
wasm-bindgen --target web --no-typescript ${names[@]+"${names[@]}"} --out-dir "$NEW_PKG" --out-name "$NAME" "$wasm"
took

phase "static files, content-hashed names, precompressed copies -> ${SITE#"$ROOT"/}"
cp style/main.css "$NEW_PKG/$NAME.css"
# Each file is renamed after the first 16 hex digits of its SHA-256, so its
# name changes exactly when its content does and a browser may keep it for a
# year; the manifest tells the server which names the pages link.
hashed() {
  local file="$1" base stem ext hash
  base="$(basename "$file")"; stem="${base%.*}"; ext="${base##*.}"
  hash="$(sha256sum "$file" | cut -c1-16)"
  mv "$file" "$NEW_PKG/$stem.$hash.$ext"
  printf '%s' "$stem.$hash.$ext"
}
js="$(hashed "$NEW_PKG/$NAME.js")"
wasm="$(hashed "$NEW_PKG/${NAME}_bg.wasm")"
css="$(hashed "$NEW_PKG/$NAME.css")"
printf '{"js":"%s","wasm":"%s","css":"%s"}\n' "$js" "$wasm" "$css" >"$NEW_PKG/manifest.json"
# Compressed copies the server picks by the browser's Accept-Encoding:
# brotli (node's zlib has it, no extra tool), gzip for the rest. Brotli's
# best setting takes half a minute on a 16 MB debug bundle; a debug build,
# remade after every edit, uses quality 9 (2 s, 16% larger).
gzip -9 -k -n "$NEW_PKG/$js" "$NEW_PKG/$wasm" "$NEW_PKG/$css"
BROTLI_QUALITY="$brotli_quality" node -e '
  const fs = require("fs"), zlib = require("zlib"), P = zlib.constants;
  for (const file of process.argv.slice(1)) {
    const data = fs.readFileSync(file);
    fs.writeFileSync(file + ".br", zlib.brotliCompressSync(data, { params: {
      [P.BROTLI_PARAM_QUALITY]: Number(process.env.BROTLI_QUALITY),
      [P.BROTLI_PARAM_LGWIN]: P.BROTLI_MAX_WINDOW_BITS,
      [P.BROTLI_PARAM_SIZE_HINT]: data.length,
    } }));
  }' "$NEW_PKG/$js" "$NEW_PKG/$wasm" "$NEW_PKG/$css"
if [ -d public ] && [ -n "$(ls -A public)" ]; then
  cp -R public/. "$SITE/"
fi
if [ -d "$PKG" ]; then
  mv "$PKG" "$SITE/.pkg.old.$$"
fi
mv "$NEW_PKG" "$PKG"
rm -rf "$SITE/.pkg.old.$$"
ls -l "$PKG" | sed 's/^/    /'

printf '\n==> build: done in %ss: server %s, site %s\n' \
  "$((SECONDS - total_start))" "${TARGET#"$ROOT"/}/$server_dir/$NAME" "${SITE#"$ROOT"/}"
