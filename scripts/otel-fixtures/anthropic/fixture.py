#!/usr/bin/env python3
"""Record the Anthropic Python SDK (`anthropic`) instrumented with OpenInference.

No network: the script starts its own fake Anthropic Messages API on 127.0.0.1
(`POST /v1/messages`, non-streaming) and points `anthropic.Anthropic(base_url=...)`
at it. The first request is answered with a text block plus a `get_weather`
`tool_use` block (stop_reason `tool_use`), the second (which carries the
`tool_result`) with the final text (stop_reason `end_turn`).

The tool-use loop is written by hand, as users of the bare SDK do, and the
program makes the agent and tool spans itself with OpenInference attributes:

  weather_agent        hand-made, openinference.span.kind=AGENT (root)
    messages.create    OpenInference AnthropicInstrumentor (LLM)
    get_weather        hand-made, openinference.span.kind=TOOL
    messages.create    OpenInference AnthropicInstrumentor (LLM)

Spans go through SimpleSpanProcessor (one OTLP/HTTP protobuf POST per span,
children first, root last) to $OTLP_RECORDER_ENDPOINT/v1/traces.

The tracer provider is NOT made the global one (like langgraph_fixture.py):
the anthropic SDK has built-in OpenTelemetry tracing of its own (scope
`com.anthropic.sdk.python`, a CLIENT span per API call) that uses the global
provider, so with the global provider left unset only the OpenInference spans
and the hand-made ones are recorded. See NOTES.md.
"""
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from openinference.instrumentation.anthropic import AnthropicInstrumentor

ENDPOINT = os.environ.get("OTLP_RECORDER_ENDPOINT", "http://127.0.0.1:4318")
REQUEST_MODEL = "claude-sonnet-4-5"
RESPONSE_MODEL = "claude-sonnet-4-5-20250929"
QUESTION = "What is the weather in Paris?"

RESPONSE_TOOL_USE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": RESPONSE_MODEL,
    "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 7},
}
RESPONSE_FINAL = {
    "id": "msg_02",
    "type": "message",
    "role": "assistant",
    "model": RESPONSE_MODEL,
    "content": [{"type": "text", "text": "It is sunny in Paris."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 31, "output_tokens": 9, "cache_read_input_tokens": 5},
}


# ---------------------------------------------------------------- fake server
class FakeAnthropic(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/messages":
            self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"unknown path {self.path}"}})
            return
        time.sleep(0.02)  # pretend latency
        has_tool_result = any(
            isinstance(m.get("content"), list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in m["content"])
            for m in body.get("messages", [])
        )
        if has_tool_result:
            self._send(200, RESPONSE_FINAL, request_id="req_fixture_02")
        else:
            self._send(200, RESPONSE_TOOL_USE, request_id="req_fixture_01")

    def _send(self, code, obj, request_id="req_fixture_00"):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", request_id)
        # One request per connection, so a keep-alive connection can never
        # hold the single server thread (and block server.shutdown()).
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass


# ---------------------------------------------------------------- the "agent"
TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather forecast for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    }
]


def get_weather(city: str) -> dict:
    time.sleep(0.005)
    return {"city": city, "forecast": "sunny", "temperature_c": 21}


def main() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "anthropic-fixture"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{ENDPOINT}/v1/traces")))
    AnthropicInstrumentor().instrument(tracer_provider=provider)
    import anthropic  # noqa: E402

    server = HTTPServer(("127.0.0.1", 0), FakeAnthropic)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = anthropic.Anthropic(
        api_key="test",
        base_url=f"http://127.0.0.1:{server.server_address[1]}",
        max_retries=0,
    )

    tracer = provider.get_tracer("runlens.fixture.anthropic")
    messages = [{"role": "user", "content": QUESTION}]
    with tracer.start_as_current_span(
        "weather_agent",
        attributes={"openinference.span.kind": "AGENT", "input.value": QUESTION},
    ) as agent_span:
        first = client.messages.create(
            model=REQUEST_MODEL,
            max_tokens=256,
            system="You are a weather assistant.",
            tools=TOOLS,
            messages=messages,
        )
        messages.append({"role": "assistant", "content": first.content})

        tool_results = []
        for block in first.content:
            if block.type != "tool_use":
                continue
            with tracer.start_as_current_span(
                block.name,
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": block.name,
                    "input.value": json.dumps(block.input),
                },
            ) as tool_span:
                result = json.dumps(get_weather(**block.input))
                tool_span.set_attribute("output.value", result)
            tool_results.append({"type": "tool_result", "tool_use_id": block.id, "content": result})
        messages.append({"role": "user", "content": tool_results})

        second = client.messages.create(
            model=REQUEST_MODEL,
            max_tokens=256,
            system="You are a weather assistant.",
            tools=TOOLS,
            messages=messages,
        )
        final = "".join(b.text for b in second.content if b.type == "text")
        agent_span.set_attribute("output.value", final)
        print("final answer:", final)

    client.close()
    server.shutdown()
    server.server_close()
    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
