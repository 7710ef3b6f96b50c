#!/usr/bin/env bash
# Record tests/fixtures/otlp/pydantic-ai/ (Pydantic AI built-in OTel instrumentation).
# Needs python3 and access to PyPI (first run only); no other network. See NOTES.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIXTURES="$(cd "$HERE/.." && pwd)"          # scripts/otel-fixtures (recorder.py, make_expected.py)
ROOT="$(cd "$HERE/../../.." && pwd)"
VENV="$ROOT/target/otel-fixtures-pydantic-ai-venv"
PY="$VENV/bin/python"
OUT="$ROOT/tests/fixtures/otlp/pydantic-ai"

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"

# Independent of the caller's OTEL_* settings; uncompressed protobuf bodies.
for v in $(env | grep -o '^OTEL_[A-Z0-9_]*' || true); do unset "$v"; done
export OTEL_EXPORTER_OTLP_COMPRESSION=none
# Never talk to Logfire (pydantic-ai-slim only ships the no-op logfire-api anyway).
unset LOGFIRE_TOKEN LOGFIRE_SEND_TO_LOGFIRE || true

rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" "$FIXTURES/recorder.py" --out "$OUT" -- "$PY" "$HERE/fixture.py"
"$PY" "$FIXTURES/make_expected.py" "$OUT"
