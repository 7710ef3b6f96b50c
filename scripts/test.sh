#!/usr/bin/env bash
# scripts/test.sh — the whole test suite, the way CI runs it (.ci/run calls this).
#
#   1. scripts/setup.sh --test                            install what is missing
#   2. cargo fmt --check, scripts/check-links.sh,         both crates as the server builds them,
#      cargo clippy -D warnings                           the browser bundle, the model alone;
#                                                         every relative link of the docs
#   3. cargo test --workspace                             engine and server: unit, integration
#                                                         (proptests included) and HTTP API tests,
#                                                         the kill -9 crash test of the binary,
#                                                         on SQLite
#   4. RUNLENS_TEST_STORE=postgres cargo test             the engine and API suites on PostgreSQL
#   5. scripts/build.sh --as-tested                       wasm bundle -> target/site (the debug
#                                                         server is the one the tests built)
#   6. scripts/fuzz-api.sh                                Schemathesis over every operation of the
#                                                         OpenAPI document against the debug server
#   7. cd end2end && npx playwright test                  browser tests in Chromium against
#                                                         a fresh server on a fresh SQLite file
#
# Stops at the first failing phase and says which one. Cold on 2 cores: 49
# minutes from a fresh clone with other builds sharing the cores (2,969 s, an
# upper bound); warm, about 17 minutes before the browser tests. The API fuzz
# phase and the browser tests take about 3.5 and 7 minutes whatever is compiled.
#
# Environment:
#   SKIP_SETUP=1     skip phase 1
#   RUNLENS_TEST_POSTGRES  the PostgreSQL database the PostgreSQL-backed runs use
#                    (default postgres://postgres@127.0.0.1:5432/test; each test
#                    creates and drops a schema of its own)
#   E2E_PORT         port of the server the browser tests start (default 3917, or a free one)
#   Extra arguments are passed to `npx playwright test` (e.g. -g "cancel").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) export PATH="$HOME/.cargo/bin:$PATH" ;; esac

phase_name=""
phase_start=$SECONDS
total_start=$SECONDS
summary=()

phase() {
  phase_name="$1"; phase_start=$SECONDS
  printf '\n======== test: %s ========\n' "$phase_name"
}
passed() {
  local line
  line="$(printf '  ok    %-58s %4ss' "$phase_name" "$((SECONDS - phase_start))")"
  summary+=("$line")
  printf '%s\n' "$line"
}
on_error() {
  local rc=$?
  trap - ERR
  printf '\n' >&2
  printf '%s\n' ${summary[@]+"${summary[@]}"} >&2
  printf '  FAIL  %-58s %4ss  (exit %s)\n' "$phase_name" "$((SECONDS - phase_start))" "$rc" >&2
  printf '\ntest.sh: FAILED in phase "%s" — see the output above.\n' "$phase_name" >&2
  exit "$rc"
}
trap on_error ERR

if [ "${SKIP_SETUP:-0}" != 1 ]; then
  phase "setup (scripts/setup.sh --test)"
  scripts/setup.sh --test
  passed
fi

# The PostgreSQL-backed suites need the database (a service of every machine
# this runs on): say so plainly rather than fail inside a test.
pg_url="${RUNLENS_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}"
pg_hostport="${pg_url#*@}"; pg_hostport="${pg_hostport%%/*}"
if ! (exec 3<>"/dev/tcp/${pg_hostport%%:*}/${pg_hostport##*:}") 2>/dev/null; then
  echo "test.sh: no PostgreSQL at ${pg_hostport} (RUNLENS_TEST_POSTGRES=${pg_url}); the PostgreSQL-backed suites need one" >&2
  exit 1
fi

# Every native phase builds one graph: both crates with the server's features,
# so each dependency is checked once and compiled once (the engine alone and
# the server alone unify their dependencies' features differently, and each
# paid for its own copies).
WORKSPACE=(--workspace --no-default-features --features runlens/ssr)

phase "lint (cargo fmt --check, links of the docs, cargo clippy -D warnings: both crates, the browser bundle, the model alone)"
cargo fmt --all -- --check
scripts/check-links.sh --images
cargo clippy "${WORKSPACE[@]}" --all-targets -- -D warnings
cargo clippy -p runlens-engine --no-default-features -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown --no-default-features --features hydrate -- -D warnings
passed

phase "Rust tests on SQLite (cargo test: both crates, the kill -9 crash test of the binary)"
cargo test "${WORKSPACE[@]}"
passed

phase "engine and API tests on PostgreSQL (RUNLENS_TEST_STORE=postgres, --test engine --test api)"
RUNLENS_TEST_STORE=postgres cargo test "${WORKSPACE[@]}" --test engine --test api -- --skip crash::
passed

phase "build (scripts/build.sh --as-tested: the wasm bundle; the server is the binary the tests built)"
scripts/build.sh --as-tested
passed

phase "API fuzz (scripts/fuzz-api.sh)"
scripts/fuzz-api.sh
passed

phase "end-to-end (npx playwright test, then no secret in the server's log)"
server_log="$(mktemp -t runlens-e2e-server.XXXXXX.log)"
E2E_API_KEY="rl_$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
export E2E_API_KEY
( cd end2end && E2E_SERVER_LOG="$server_log" npx playwright test "$@" ) || { tail -n 50 "$server_log" >&2; exit 1; }
test_password="$(sed -n "s/^export const PASSWORD = '\(.*\)';$/\1/p" end2end/tests/users.ts)"
[ -n "$test_password" ] || { echo "test.sh: cannot read the test password from end2end/tests/users.ts" >&2; exit 1; }
[ -s "$server_log" ] || { echo "test.sh: the end-to-end server wrote no log to $server_log" >&2; exit 1; }
for secret in "$test_password" "$E2E_API_KEY" "${E2E_API_KEY#rl_}"; do
  if grep -qF -- "$secret" "$server_log"; then
    echo "test.sh: a password or API key secret appears in the server's log ($server_log)" >&2
    exit 1
  fi
done
# Signing secrets (HTTP tools' and webhooks') start with whsec_; none may be logged.
if grep -qF -- "whsec_" "$server_log"; then
  echo "test.sh: a signing secret (whsec_…) appears in the server's log ($server_log)" >&2
  exit 1
fi
printf '  the server log (%s lines) holds no password or key secret\n' "$(wc -l < "$server_log")"
rm -f "$server_log"
passed

printf '\n======== test: all passed in %ss ========\n' "$((SECONDS - total_start))"
printf '%s\n' "${summary[@]}"
