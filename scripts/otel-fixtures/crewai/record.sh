#!/usr/bin/env bash
# Record tests/fixtures/otlp/crewai/ from scripts/otel-fixtures/crewai/fixture.py
# (CrewAI + openinference-instrumentation-crewai + openinference-instrumentation-openai,
# against a local fake OpenAI Chat Completions API). Needs python3 and PyPI on
# first run only (crewai is a large install). See NOTES.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FIX="$(cd "$HERE/.." && pwd)"            # scripts/otel-fixtures
ROOT="$(cd "$FIX/../.." && pwd)"
VENV="$ROOT/target/otel-fixtures-crewai-venv"
OUT="$ROOT/tests/fixtures/otlp/crewai"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
fi
"$PY" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"

# Independent of the caller's OTEL_* / OPENAI_* / CREWAI_* settings (OTEL_SDK_DISABLED
# in particular would switch off the fixture's own TracerProvider); uncompressed
# protobuf so each file is a plain ExportTraceServiceRequest.
for v in $(env | grep -o '^OTEL_[A-Z0-9_]*' || true); do unset "$v"; done
for v in $(env | grep -o '^OPENAI_[A-Z0-9_]*' || true); do unset "$v"; done
for v in $(env | grep -o '^CREWAI_[A-Z0-9_]*' || true); do unset "$v"; done
export OTEL_EXPORTER_OTLP_COMPRESSION=none
# CrewAI's anonymous telemetry, its own tracing (incl. the first-run trace
# collection) and its PyPI version check: all off. fixture.py sets these too.
export CREWAI_DISABLE_TELEMETRY=true
export CREWAI_DISABLE_TRACKING=true
export CREWAI_TRACING_ENABLED=false
export CREWAI_DISABLE_VERSION_CHECK=true

# CrewAI keeps state under $HOME (~/.config/crewai/settings.json with the
# tracing consent and login, ~/.local/share/crewai/credentials/secret.key,
# ~/.local/share/<cwd name>/latest_kickoff_task_outputs.db, ~/.crewai/): run it
# with a throw-away HOME so neither the caller's CrewAI settings affect the
# recording nor the recording leaves files behind.
CREW_HOME="$(mktemp -d)"
trap 'rm -rf "$CREW_HOME"' EXIT
unset XDG_DATA_HOME XDG_CONFIG_HOME XDG_CACHE_HOME

rm -rf "$OUT"
mkdir -p "$OUT"
HOME="$CREW_HOME" "$PY" "$FIX/recorder.py" --out "$OUT" -- "$PY" "$HERE/fixture.py"
"$PY" "$FIX/make_expected.py" "$OUT"
