#!/usr/bin/env bash
# Regenerate the recorded OTLP/HTTP protobuf fixtures under tests/fixtures/otlp/.
# Needs python3 and access to PyPI (first run only). See README.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$ROOT/target/otel-fixtures-venv"
OUT="$ROOT/tests/fixtures/otlp"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"

# The LangGraph fixture has its own venv (its dependency set does not mix with
# the pinned one above).
LG_VENV="$ROOT/target/otel-fixtures-langgraph-venv"
LG_PY="$LG_VENV/bin/python"
if [ ! -x "$LG_PY" ]; then
    python3 -m venv "$LG_VENV"
fi
"$LG_PY" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements-langgraph.txt"

# Keep the recording independent of whatever OTEL_* the caller has exported,
# and send uncompressed protobuf so the files are plain ExportTraceServiceRequest bytes.
for v in $(env | grep -o '^OTEL_[A-Z0-9_]*' || true); do unset "$v"; done
export OTEL_EXPORTER_OTLP_COMPRESSION=none
unset OPENAI_API_KEY OPENAI_BASE_URL || true

record() {  # record DIR PROGRAM [PYTHON]
    local dir="$1" prog="$2" py="${3:-$PY}"
    rm -rf "$dir"
    mkdir -p "$dir"
    "$py" "$HERE/recorder.py" --out "$dir" -- "$py" "$HERE/$prog"
    "$py" "$HERE/make_expected.py" "$dir"
}

record "$OUT/openai-agents" openai_agents_fixture.py

OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental \
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_and_event \
    record "$OUT/genai-client" genai_client_fixture.py

record "$OUT/langgraph" langgraph_fixture.py "$LG_PY"

# Vercel AI SDK (Node; needs node >= 20.6 and npm, versions pinned in
# vercel-ai/package-lock.json). The program is run by the recorder directly.
npm ci --prefix "$HERE/vercel-ai" --no-audit --no-fund --loglevel=error
rm -rf "$OUT/vercel-ai"
mkdir -p "$OUT/vercel-ai"
"$PY" "$HERE/recorder.py" --out "$OUT/vercel-ai" -- node "$HERE/vercel-ai/fixture.mjs"
"$PY" "$HERE/make_expected.py" "$OUT/vercel-ai"

# Pydantic AI, LlamaIndex, the Anthropic SDK, CrewAI (Python) and Mastra
# (Node): each directory records its own fixture with its own venv or
# node_modules (see its NOTES.md).
for d in pydantic-ai llamaindex anthropic crewai mastra; do
    "$HERE/$d/record.sh"
done

"$PY" "$HERE/check_fixtures.py" "$OUT/openai-agents" "$OUT/genai-client"
