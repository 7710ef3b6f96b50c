#!/usr/bin/env python3
"""Record a CrewAI crew instrumented with OpenInference.

No network: the script starts its own fake OpenAI Chat Completions API on
127.0.0.1 (`POST /v1/chat/completions`, non-streaming) and gives the agent
`crewai.LLM(model="openai/gpt-4o-mini", base_url=<fake>/v1, api_key="test")`.
CrewAI 1.x routes an `openai/...` model to its *native* OpenAI provider (the
official `openai` SDK, `chat.completions.create`), not to LiteLLM, so the LLM
spans come from OpenInference's `OpenAIInstrumentor`; the crew, task and tool
spans come from `CrewAIInstrumentor` (its default, wrapper-based mode).

The fake server answers the way the request asks for:
- with `tools` in the request (CrewAI's native function calling): first a
  `get_weather` tool call (`call_crew_1`, `{"city": "Paris"}`,
  finish_reason `tool_calls`, usage 12/7), then, once a `tool` message is
  present, the final text (finish_reason `stop`, usage 31/9);
- without `tools` (CrewAI's ReAct text protocol): the same two turns as
  `Action: get_weather` / `Action Input: {"city": "Paris"}` text and then
  `Final Answer: It is sunny in Paris.`.
Every request is summarised on stderr (`fake-openai: ...`) so the run log
shows which protocol CrewAI used.

Spans go through SimpleSpanProcessor (one OTLP/HTTP protobuf POST per span,
children first, root last) to $OTLP_RECORDER_ENDPOINT/v1/traces. The tracer
provider is not made the global one (like the other fixtures), so only the
instrumentors that are handed it record anything.

CrewAI's own telemetry and tracing are switched off by environment
(CREWAI_DISABLE_TELEMETRY, CREWAI_DISABLE_TRACKING, CREWAI_TRACING_ENABLED=false,
CREWAI_DISABLE_VERSION_CHECK; OTEL_SDK_DISABLED must stay unset, it would
disable our provider too) and, as a belt-and-braces check, an audit hook
refuses every socket connection / DNS lookup that is not to the loopback
address and the script fails if one was attempted.
"""
import ipaddress
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

# -------------------------------------------------------------- no network
# Set before crewai is imported: its telemetry singleton reads them on creation.
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_DISABLE_TRACKING"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_DISABLE_VERSION_CHECK"] = "true"
if os.environ.get("OTEL_SDK_DISABLED"):
    sys.exit("OTEL_SDK_DISABLED is set: it would disable the fixture's own TracerProvider")
for _k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY"):
    os.environ.pop(_k, None)

BLOCKED = []


def _is_loopback(host) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _audit(event, args):
    if event == "socket.connect":
        addr = args[1]
        if isinstance(addr, tuple) and not _is_loopback(addr[0]):
            BLOCKED.append(("connect", addr))
            raise OSError(f"fixture: network access to {addr!r} refused")
    elif event == "socket.getaddrinfo":
        if not _is_loopback(args[0]):
            BLOCKED.append(("getaddrinfo", args[0]))
            raise OSError(f"fixture: DNS lookup of {args[0]!r} refused")


sys.addaudithook(_audit)

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from openinference.instrumentation.crewai import CrewAIInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
REQUEST_MODEL = "gpt-4o-mini"
RESPONSE_MODEL = "gpt-4o-mini-2024-07-18"
TOOL_CALL_ID = "call_crew_1"
TOOL_ARGS = '{"city": "Paris"}'
FINAL_TEXT = "It is sunny in Paris."
WEATHER = {"city": "Paris", "forecast": "sunny", "temperature_c": 21}

REQUESTS = []


# ---------------------------------------------------------------- fake server
class FakeOpenAI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        path = self.path.split("?", 1)[0].rstrip("/")
        REQUESTS.append({"path": path, "body": body})
        sys.stderr.write(f"fake-openai: POST {path} {json.dumps(body)[:4000]}\n")
        if path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"unknown path {self.path}", "type": "invalid_request_error"}})
            return
        if body.get("stream"):
            self._send(400, {"error": {"message": "fixture server does not stream", "type": "invalid_request_error"}})
            return
        time.sleep(0.02)  # pretend latency
        messages = body.get("messages", [])
        if body.get("tools"):
            second = any(m.get("role") == "tool" for m in messages)
            if not second:
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": TOOL_CALL_ID,
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": TOOL_ARGS},
                        }
                    ],
                }
                finish = "tool_calls"
        else:
            # ReAct text protocol: the tool result comes back as "Observation:" text.
            second = any("Observation:" in str(m.get("content") or "") for m in messages[1:])
            if not second:
                message = {
                    "role": "assistant",
                    "content": (
                        "Thought: I should look up the weather in Paris.\n"
                        "Action: get_weather\n"
                        f"Action Input: {TOOL_ARGS}"
                    ),
                }
                finish = "stop"
        if second:
            if body.get("tools"):
                message = {"role": "assistant", "content": FINAL_TEXT}
            else:
                message = {
                    "role": "assistant",
                    "content": f"Thought: I now know the final answer\nFinal Answer: {FINAL_TEXT}",
                }
            finish, usage, rid = "stop", (31, 9), "chatcmpl-crew-002"
        else:
            usage, rid = (12, 7), "chatcmpl-crew-001"
        self._send(
            200,
            {
                "id": rid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": RESPONSE_MODEL,
                "system_fingerprint": "fp_fixture",
                "service_tier": "default",
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": usage[0] + usage[1],
                },
            },
        )

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_fixture")
        # One request per connection, so a keep-alive connection can never
        # hold the single server thread (and block server.shutdown()).
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass


# ---------------------------------------------------------------- the crew
def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "crewai-fixture"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))
    CrewAIInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    from crewai import LLM, Agent, Crew, Process, Task  # noqa: E402
    from crewai.tools import tool  # noqa: E402

    @tool("get_weather")
    def get_weather(city: str) -> str:
        """Get the current weather forecast for a city."""
        time.sleep(0.005)
        return json.dumps({**WEATHER, "city": city})

    server = HTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    llm = LLM(
        model=f"openai/{REQUEST_MODEL}",
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        api_key="test",
        max_retries=0,
    )
    agent = Agent(
        role="Weather assistant",
        goal="Answer weather questions",
        backstory="You report the weather briefly.",
        tools=[get_weather],
        llm=llm,
        allow_delegation=False,
        verbose=False,
    )
    task = Task(
        description="What is the weather in Paris?",
        expected_output="One sentence.",
        agent=agent,
    )
    crew = Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=False)
    result = crew.kickoff()
    print("final answer:", result.raw)

    server.shutdown()
    server.server_close()
    provider.force_flush()
    provider.shutdown()

    paths = [r["path"] for r in REQUESTS]
    native = [bool(r["body"].get("tools")) for r in REQUESTS if r["path"] == "/v1/chat/completions"]
    print(f"fake-openai: {len(REQUESTS)} requests {paths}; native tools per call: {native}", file=sys.stderr)
    if BLOCKED:
        sys.exit(f"fixture: blocked non-loopback network access: {BLOCKED}")


if __name__ == "__main__":
    main()
