#!/usr/bin/env bash
# Record tests/fixtures/otlp/mastra/ from scripts/otel-fixtures/mastra/fixture.mjs
# (Mastra agent + AI tracing + @mastra/otel-exporter, OTLP/HTTP protobuf, scripted
# model). Needs node (>= 20.6) and npm (npm registry on first run), python3 and
# PyPI on first run (for the shared venv make_expected.py uses). See NOTES.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIX="$(cd "$HERE/.." && pwd)"            # scripts/otel-fixtures
ROOT="$(cd "$FIX/../.." && pwd)"
VENV="$ROOT/target/otel-fixtures-venv"   # the venv make.sh uses (opentelemetry-proto)
OUT="$ROOT/tests/fixtures/otlp/mastra"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check -r "$FIX/requirements.txt"
fi

# Exact versions from package-lock.json.
npm ci --prefix "$HERE" --no-audit --no-fund --loglevel=error

# Independent of the caller's OTEL_* settings; uncompressed protobuf so every
# .pb is a plain ExportTraceServiceRequest.
for v in $(env | grep -o '^OTEL_[A-Z0-9_]*' || true); do unset "$v"; done
export OTEL_EXPORTER_OTLP_COMPRESSION=none

rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" "$FIX/recorder.py" --out "$OUT" -- node "$HERE/fixture.mjs"
"$PY" "$FIX/make_expected.py" "$OUT"
