#!/usr/bin/env bash
# Record tests/fixtures/otlp/anthropic/ from scripts/otel-fixtures/anthropic/fixture.py
# (anthropic SDK + openinference-instrumentation-anthropic, against a local fake
# Messages API). Needs python3 and PyPI on first run only. See NOTES.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIX="$(cd "$HERE/.." && pwd)"            # scripts/otel-fixtures
ROOT="$(cd "$FIX/../.." && pwd)"
VENV="$ROOT/target/otel-fixtures-anthropic-venv"
OUT="$ROOT/tests/fixtures/otlp/anthropic"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"

# Independent of the caller's OTEL_* / ANTHROPIC_* settings; uncompressed
# protobuf so each file is a plain ExportTraceServiceRequest.
for v in $(env | grep -o '^OTEL_[A-Z0-9_]*' || true); do unset "$v"; done
for v in $(env | grep -o '^ANTHROPIC_[A-Z0-9_]*' || true); do unset "$v"; done
export OTEL_EXPORTER_OTLP_COMPRESSION=none

rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" "$FIX/recorder.py" --out "$OUT" -- "$PY" "$HERE/fixture.py"
"$PY" "$FIX/make_expected.py" "$OUT"
