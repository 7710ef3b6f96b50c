#!/usr/bin/env bash
# Re-record tests/fixtures/otlp/llamaindex/ (LlamaIndex FunctionAgent +
# OpenInference LlamaIndexInstrumentor). Needs python3 (3.11) and access to
# PyPI on the first run only; no other network: the model is scripted.
# See NOTES.md beside this file.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIXTURES="$(cd "$HERE/.." && pwd)"          # scripts/otel-fixtures
ROOT="$(cd "$FIXTURES/../.." && pwd)"
VENV="$ROOT/target/otel-fixtures-llamaindex-venv"
PY="$VENV/bin/python"
OUT="$ROOT/tests/fixtures/otlp/llamaindex"

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"

# Independent of the caller's OTEL_* settings; uncompressed protobuf so every
# .pb is a plain ExportTraceServiceRequest.
for v in $(env | grep -o '^OTEL_[A-Z0-9_]*' || true); do unset "$v"; done
export OTEL_EXPORTER_OTLP_COMPRESSION=none
unset OPENAI_API_KEY OPENAI_BASE_URL LLAMAINDEX_FIXTURE_STREAMING || true

rm -rf "$OUT"
mkdir -p "$OUT"
"$PY" "$FIXTURES/recorder.py" --out "$OUT" -- "$PY" "$HERE/fixture.py"
"$PY" "$FIXTURES/make_expected.py" "$OUT"
