#!/usr/bin/env bash
# scripts/setup.sh [--test] — install what building and running runlens needs,
# and with --test what its tests need too.
#
# Idempotent: every step checks first and skips what is already there, so it is
# cheap to run before every build. On a fresh Debian machine (root, Rust via
# rustup, Node 20 + npm) it installs, for scripts/dev.sh and scripts/build.sh:
#   1. the wasm32-unknown-unknown Rust target         (rustup, ~1 min)
#   2. wasm-bindgen-cli, exactly the version pinned   (cargo install, ~3 min)
#      as `wasm-bindgen = "=X.Y.Z"` in Cargo.toml
# and with --test (scripts/test.sh), for the tests:
#   3. Chromium at /usr/bin/chromium                  (apt-get, ~1 min)
#   4. Playwright for end2end/, and the MCP reference (npm ci, no browser download)
#      server the MCP tests run (server-everything)
#   5. Schemathesis, the version pinned below,        (pip of python3, ~30 s)
#      for the API fuzz test (scripts/fuzz-api.sh)
#   6. the OpenAI Agents SDK (openai-agents), the     (pip of python3, ~20 s)
#      version pinned below, for the agent that asks
#      for approval over the API (end2end/agents_sdk/)
#
# It does not install cargo-leptos or wasm-opt: the build goes through plain
# cargo (scripts/build.sh), and Debian's binaryen wasm-opt breaks hydration.
#
# Environment:
#   CHROMIUM_PATH   browser for the end-to-end tests (default /usr/bin/chromium)
set -euo pipefail

for_tests=0
for arg in "$@"; do
  case "$arg" in
    --test) for_tests=1 ;;
    *) echo "setup.sh: unknown argument: $arg (usage: scripts/setup.sh [--test])" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say()  { printf '\n==> setup: %s\n' "$*"; }
ok()   { printf '    ok: %s\n' "$*"; }
die()  { printf '\nsetup.sh: ERROR: %s\n' "$*" >&2; exit 1; }

# cargo-installed binaries (wasm-bindgen) live here.
case ":$PATH:" in
  *":$HOME/.cargo/bin:"*) ;;
  *) export PATH="$HOME/.cargo/bin:$PATH" ;;
esac

# Run as root directly, otherwise through sudo when it exists.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

# --- 0. prerequisites we do not install --------------------------------------
command -v cargo  >/dev/null 2>&1 || die "cargo not found; install Rust with rustup (https://rustup.rs)"
command -v rustup >/dev/null 2>&1 || die "rustup not found; the wasm target is added with rustup"
command -v node   >/dev/null 2>&1 || die "node not found; install Node.js 20 or newer"
command -v npm    >/dev/null 2>&1 || die "npm not found; install Node.js 20 or newer (with npm)"
command -v python3 >/dev/null 2>&1 || die "python3 not found; install Python 3.10 or newer (with pip)"

# --- 1. the wasm target -------------------------------------------------------
say "Rust target wasm32-unknown-unknown"
if rustup target list --installed | grep -qx 'wasm32-unknown-unknown'; then
  ok "already installed"
else
  rustup target add wasm32-unknown-unknown
fi

# --- 2. wasm-bindgen-cli, the exact version of the wasm-bindgen crate ---------
# The CLI and the crate must agree to the patch version, so read the pin.
WASM_BINDGEN_VERSION="$(sed -n \
  -e 's/^wasm-bindgen *= *{[^}]*version *= *"=\([0-9][0-9.]*\)".*/\1/p' \
  -e 's/^wasm-bindgen *= *"=\([0-9][0-9.]*\)".*/\1/p' Cargo.toml | head -n1)"
[ -n "$WASM_BINDGEN_VERSION" ] || die 'Cargo.toml must pin the wasm-bindgen crate exactly (wasm-bindgen = { version = "=X.Y.Z", ... })'
say "wasm-bindgen-cli $WASM_BINDGEN_VERSION"
have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
if [ "$have" = "$WASM_BINDGEN_VERSION" ]; then
  ok "wasm-bindgen $have"
else
  [ -n "$have" ] && echo "    found wasm-bindgen $have, need $WASM_BINDGEN_VERSION: reinstalling"
  # Not --locked: its lockfile pins a crate version the registry no longer serves.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
  have="$(wasm-bindgen --version | awk '{print $2}')"
  [ "$have" = "$WASM_BINDGEN_VERSION" ] || die "wasm-bindgen reports $have after install, expected $WASM_BINDGEN_VERSION"
fi

if [ "$for_tests" != 1 ]; then
  say "done (what the tests need too: scripts/setup.sh --test)"
  exit 0
fi

# --- 3. Chromium for the browser tests ---------------------------------------
CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
say "Chromium ($CHROMIUM_PATH)"
if [ -x "$CHROMIUM_PATH" ]; then
  ok "$("$CHROMIUM_PATH" --version 2>/dev/null | tail -n1 || echo present)"
else
  [ "$CHROMIUM_PATH" = /usr/bin/chromium ] || die "CHROMIUM_PATH=$CHROMIUM_PATH does not exist"
  command -v apt-get >/dev/null 2>&1 || die "no /usr/bin/chromium and no apt-get to install it"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  [ -x "$CHROMIUM_PATH" ] || die "chromium installed but $CHROMIUM_PATH is missing"
fi

# --- 4. Playwright (never downloads a browser: we use Debian's Chromium) -----
say "Playwright and the MCP reference server in end2end/"
cd "$ROOT/end2end"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [ -f package-lock.json ]; then
  # Installed from this very lockfile (its hash is kept after `npm ci`):
  # Playwright, and the MCP reference server the engine tests run.
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  have="$(cat node_modules/.runlens-lock-sha256 2>/dev/null || true)"
  if [ "$have" = "$want" ] && [ -f node_modules/@modelcontextprotocol/server-everything/dist/index.js ]; then
    ok "@playwright/test $(node -p "require('./node_modules/@playwright/test/package.json').version"), @modelcontextprotocol/server-everything"
  else
    npm ci --no-audit --no-fund
    echo "$want" > node_modules/.runlens-lock-sha256
  fi
else
  npm install --no-audit --no-fund
fi

# --- 5. Schemathesis for the API fuzz test ------------------------------------
# Pinned: its checks and data generation change between releases, and the fuzz
# phase of scripts/test.sh must judge the same way on every machine.
SCHEMATHESIS_VERSION=4.32.5
say "Schemathesis $SCHEMATHESIS_VERSION (python3 -m pip)"
cd "$ROOT"
have="$(python3 -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null || true)"
if [ "$have" = "$SCHEMATHESIS_VERSION" ]; then
  ok "schemathesis $have"
else
  [ -n "$have" ] && echo "    found schemathesis $have, need $SCHEMATHESIS_VERSION: reinstalling"
  python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
  python3 -m schemathesis.cli --version >/dev/null || die "schemathesis installed but python3 -m schemathesis.cli fails"
fi

# --- 6. the OpenAI Agents SDK for the external-agent approval test ------------
# Pinned like Schemathesis: end2end/agents_sdk/approval_agent.py subclasses the
# SDK's Model interface, whose signature changes between releases.
OPENAI_AGENTS_VERSION=0.24.0
say "openai-agents $OPENAI_AGENTS_VERSION (python3 -m pip)"
have="$(python3 -c 'import importlib.metadata as m; print(m.version("openai-agents"))' 2>/dev/null || true)"
if [ "$have" = "$OPENAI_AGENTS_VERSION" ]; then
  ok "openai-agents $have"
else
  [ -n "$have" ] && echo "    found openai-agents $have, need $OPENAI_AGENTS_VERSION: reinstalling"
  python3 -m pip install --quiet --disable-pip-version-check "openai-agents==$OPENAI_AGENTS_VERSION"
  python3 -c 'import agents' || die "openai-agents installed but python3 -c 'import agents' fails"
fi

say "done"
