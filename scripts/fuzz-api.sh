#!/usr/bin/env bash
# scripts/fuzz-api.sh — fuzz the HTTP API against its own OpenAPI document.
#
# Starts the built debug server (target/debug/runlens; run scripts/build.sh first) on a
# fresh SQLite file, seeds runs in every state (fuzz/seed.py: done, failed, cancelled,
# running, paused with a send_email call awaiting approval, imported with a blob; saved
# agents, and a run of one whose agent call started a child run) and
# runs Schemathesis over every operation of GET /api/openapi.json: schema-valid and
# invalid inputs (examples, coverage, fuzzing and stateful phases), with every check:
# no 5xx, status code documented, content type and response schema as documented
# (each Server-Sent Event too), valid data accepted and invalid data rejected, and
# more. Settings: fuzz/schemathesis.toml; hooks (real ids, and the rejections the
# document cannot express): fuzz/hooks.py. Every request carries an instance-admin key
# (a fresh one each run, given to the server as RUNLENS_BOOTSTRAP_API_KEY); Schemathesis's
# ignored_auth check also sends requests without it and expects 401. Exits non-zero on
# any failure, or if the server died or logged a panic. About a minute on 2 cores.
#
# Environment:
#   CARGO_TARGET_DIR   where the server binary is (default target/)
#   FUZZ_PORT          port of the server (default: a free one)
#   FUZZ_KEEP=1        keep the temporary folder (database, server log, report)
#   Extra arguments go to `schemathesis run` (e.g. --include-path /api/runs -n 200).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TARGET="${CARGO_TARGET_DIR:-target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
BIN="$TARGET/debug/runlens"
[ -x "$BIN" ] || { echo "fuzz-api.sh: $BIN not found; run scripts/build.sh first" >&2; exit 1; }
# Through the module, not the `schemathesis` command: pip may put that outside PATH.
st() { python3 -m schemathesis.cli "$@"; }
st --version >/dev/null 2>&1 || { echo "fuzz-api.sh: schemathesis not found; run scripts/setup.sh --test" >&2; exit 1; }

PORT="${FUZZ_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
BASE="http://127.0.0.1:$PORT"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/runlens-fuzz.XXXXXX")"
server_pid=""
# The run's instance-admin key: `rl_` and 64 hex digits.
KEY="rl_$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
export RUNLENS_FUZZ_KEY="$KEY"

cleanup() {
  local rc=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "${FUZZ_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "fuzz-api.sh: kept $TMP (server.log, fuzz.db, report/)" >&2
  else
    rm -rf "$TMP"
  fi
  exit "$rc"
}
trap cleanup EXIT

echo "==> fuzz: server $BIN on $BASE, database $TMP/fuzz.db"
# No provider is configured: only the offline built-in model exists.
env -u OPENAI_API_KEY -u RUNLENS_CONFIG RUST_LOG="${RUST_LOG:-warn}" RUNLENS_BOOTSTRAP_API_KEY="$KEY" \
  "$BIN" serve --addr "127.0.0.1:$PORT" --database-url "sqlite://$TMP/fuzz.db" --site-root "$TARGET/site" \
  >"$TMP/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  curl -fsS "$BASE/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$TMP/server.log" >&2; echo "fuzz-api.sh: the server exited" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "$BASE/healthz" >/dev/null || { echo "fuzz-api.sh: the server did not answer /healthz" >&2; exit 1; }

echo "==> fuzz: seeding runs"
python3 fuzz/seed.py "$BASE" "$TMP/seeds.json"

# The served document, read from a file: loaded from its URL, Schemathesis would leave
# out the operation serving it (GET /api/openapi.json).
curl -fsS "$BASE/api/openapi.json" -o "$TMP/openapi.json"
echo "==> fuzz: schemathesis $(st --version | awk '{print $NF}') over every operation of $BASE/api/openapi.json"
start=$SECONDS
status=0
env PYTHONDONTWRITEBYTECODE=1 RUNLENS_FUZZ_BASE="$BASE" RUNLENS_FUZZ_SEEDS="$TMP/seeds.json" PYTHONPATH="$ROOT/fuzz${PYTHONPATH:+:$PYTHONPATH}" SCHEMATHESIS_HOOKS=hooks \
  python3 -m schemathesis.cli --config-file fuzz/schemathesis.toml --no-color run "$TMP/openapi.json" --url "$BASE" \
  --checks all --report junit --report-dir "$TMP/report" "$@" || status=$?
echo "==> fuzz: schemathesis finished in $((SECONDS - start))s (exit $status)"

if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "fuzz-api.sh: the server died during the fuzz run; its log:" >&2
  tail -n 50 "$TMP/server.log" >&2
  exit 1
fi
if grep -n "panicked" "$TMP/server.log" >&2; then
  echo "fuzz-api.sh: the server panicked while fuzzed (lines above, whole log in $TMP/server.log)" >&2
  exit 1
fi
exit "$status"
